"""Compare two trees of simulation results, field by field ("behaviour unchanged
where nothing was wrong").

Usage::

    python bench/compare_summaries.py BEFORE_DIR AFTER_DIR

Each directory holds ``<scenario>/summary.json`` as ``lustre-alloc-sim run --out`` writes
them. Every field of every policy's row is compared exactly, except what measures the
machine rather than the placement: wall-clock time (``wall_s``), the allocation decision
time (``alloc_us_*``: ``time.perf_counter_ns`` around each create) and the provenance block
(paths, times, command line). Prints one line per difference and a closing count line;
exits 1 when anything differs, 2 on bad usage.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterator

from lustre_alloc.simulator.report import MACHINE_FIELDS
SKIPPED_BLOCKS = ("provenance",)


def _walk(a: Any, b: Any, path: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key in MACHINE_FIELDS or (path == "" and key in SKIPPED_BLOCKS):
                continue
            if key not in a or key not in b:
                yield f"{path}.{key}: only in {'after' if key in b else 'before'}"
                continue
            yield from _walk(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path}: {len(a)} entries before, {len(b)} after"
        for i, (x, y) in enumerate(zip(a, b)):
            label = x.get("policy", i) if isinstance(x, dict) else i
            yield from _walk(x, y, f"{path}[{label}]")
    elif a != b:
        yield f"{path}: {a!r} -> {b!r}"


def compare(before: Path, after: Path) -> list[str]:
    """Differences between the two trees' summaries, one line each."""
    out = []
    scenarios = sorted({p.parent.name for p in before.glob("*/summary.json")}
                       | {p.parent.name for p in after.glob("*/summary.json")})
    for name in scenarios:
        a, b = before / name / "summary.json", after / name / "summary.json"
        if not a.exists() or not b.exists():
            out.append(f"{name}: summary.json only in {'after' if b.exists() else 'before'}")
            continue
        out += [f"{name}{line}" for line in _walk(json.loads(a.read_text()),
                                                    json.loads(b.read_text()), "")]
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(Path(p).is_dir() for p in argv):
        print("usage: compare_summaries.py BEFORE_DIR AFTER_DIR (two result trees)",
              file=sys.stderr)
        return 2
    diffs = compare(Path(argv[0]), Path(argv[1]))
    for line in diffs:
        print(line)
    n = len(list(Path(argv[0]).glob("*/summary.json")))
    print(f"{n} scenarios compared, {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
