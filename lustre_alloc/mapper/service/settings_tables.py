"""The settings tables of docs/operations.md, generated from the settings' own metadata
(:mod:`lustre_alloc.common.settings`).

    python -m lustre_alloc.mapper.service.settings_tables --write docs/operations.md
    python -m lustre_alloc.mapper.service.settings_tables --check docs/operations.md   # exit 1 if stale

Each table sits between ``<!-- settings:NAME -->`` and ``<!-- /settings:NAME -->`` in the
document; the text between the markers is replaced, the rest is left alone.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from lustre_alloc.common.settings import About, default_of, settings_of, toml_value


@dataclass(frozen=True)
class Section:
    """One table an admin writes.

    Attributes:
        name: the marker name and the TOML table (``mapper``, ``policy.mcmf`` ...).
        classes: the dataclasses whose settings the table holds, in order.
        development: list the development switches instead of the admin's settings.
    """
    name: str
    classes: tuple[type, ...]
    development: bool = False

    def rows(self) -> Iterator[tuple[str, About, object]]:
        """(key, about, default) of every setting of the table."""
        for cls in self.classes:
            for f, a in settings_of(cls, development=self.development):
                yield f.name, a, default_of(f)


def sections() -> tuple[Section, ...]:
    """Every table of the mapper's configuration file, in the order operations.md gives them.

    The imports are here so that a collector host, which installs no mapper, can still import
    :mod:`lustre_alloc.common.settings`."""
    from lustre_alloc.mapper.policies.lustre_qos import LustreQosTunables
    from lustre_alloc.mapper.policies.mcmf.params import McmfParams
    from lustre_alloc.mapper.service.config import MapperConfig
    from lustre_alloc.mapper.service.scope import Scope
    from lustre_alloc.mapper.steer.agents import SteerConfig
    from lustre_alloc.mapper.steer.controller import SteerParams
    return (Section("mapper", (MapperConfig,)),
            Section("policy.mcmf", (McmfParams,)),
            Section("policy.lustre_qos", (LustreQosTunables,)),
            Section("steer", (SteerParams, SteerConfig)),
            Section("scope", (Scope,)),
            Section("development", (MapperConfig,), development=True),
            Section("development.steer", (SteerParams,), development=True))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(section: Section) -> str:
    """The table of ``section``: key, unit, default, what it does, what chose the default."""
    lines = ["| key | unit | default | what it does | what chose the default |",
             "|---|---|---|---|---|"]
    for key, a, default in section.rows():
        shown = a.shown or toml_value(default)
        lines.append(f"| `{key}` | {_cell(a.unit)} | `{_cell(shown)}` | {_cell(a.doc)} | "
                     f"{_cell(a.source) or '-'} |")
    return "\n".join(lines)


def admin_keys() -> dict[str, list[str]]:
    """Table name -> the admin-visible keys it takes (development tables excluded)."""
    return {s.name: [k for k, _, _ in s.rows()] for s in sections() if not s.development}


def render(document: str) -> str:
    """``document`` with every ``settings:NAME`` block replaced by its generated table.

    Raises:
        ValueError: a marker names no section, or a section has no marker.
    """
    by_name = {s.name: s for s in sections()}
    seen: set[str] = set()

    def fill(m: re.Match) -> str:
        name = m.group(1)
        if name not in by_name:
            raise ValueError(f"settings:{name}: no such settings table "
                             f"(known: {', '.join(by_name)})")
        seen.add(name)
        return f"<!-- settings:{name} -->\n{markdown(by_name[name])}\n<!-- /settings:{name} -->"

    out = re.sub(r"<!-- settings:([\w.]+) -->\n.*?<!-- /settings:\1 -->", fill, document,
                 flags=re.S)
    missing = sorted(set(by_name) - seen)
    if missing:
        raise ValueError(f"no <!-- settings:{missing[0]} --> block in the document")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lustre_alloc.mapper.service.settings_tables",
                                description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="DOC", help="rewrite the tables in DOC")
    mode.add_argument("--check", metavar="DOC", help="exit 1 if DOC's tables are stale")
    args = p.parse_args(argv)
    path = Path(args.write or args.check)
    text = path.read_text()
    try:
        new = render(text)
    except ValueError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 2
    if args.write:
        if new != text:
            path.write_text(new)
        return 0
    if new != text:
        print(f"{path}: settings tables are stale; run python -m "
              f"lustre_alloc.mapper.service.settings_tables --write {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
