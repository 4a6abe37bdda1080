"""One row per check of the selftest, and the table an admin reads."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True)
class Row:
    """One check: ``result`` PASS, FAIL or SKIP (could not run here: not an OSS, no
    ``--steer``), and what was seen (one line)."""
    check: str
    result: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def table(rows: Iterable[Row]) -> str:
    """The rows as an aligned text table, then a one-line verdict."""
    rows = list(rows)
    width = max([len("check")] + [len(r.check) for r in rows])
    lines = [f"{'check':<{width}}  result  detail", f"{'-' * width}  ------  ------"]
    lines += [f"{r.check:<{width}}  {r.result:<6}  {r.detail}" for r in rows]
    failed = sum(r.result == FAIL for r in rows)
    passed = sum(r.result == PASS for r in rows)
    skipped = sum(r.result == SKIP for r in rows)
    lines.append(f"{passed} passed, {failed} failed, {skipped} skipped")
    return "\n".join(lines)


def failed(rows: Iterable[Row]) -> bool:
    """True when any row failed."""
    return any(r.result == FAIL for r in rows)
