"""The settings tables of the docs, generated from the settings' own metadata
(:mod:`lustre_alloc.common.settings`): a developer's tool, not installed.

    .venv/bin/python scripts/settings_tables.py --write     # rewrite the tables in the docs
    .venv/bin/python scripts/settings_tables.py --check     # exit 1 if one is stale

Each table sits between ``<!-- settings:NAME -->`` and ``<!-- /settings:NAME -->`` in the
document :func:`sections` names for it; the text between the markers is replaced, the rest is
left alone. ``tests/test_settings_tables.py`` runs the check and holds every packaged example
configuration to the same metadata.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lustre_alloc.common.settings import About, default_of, settings_of, toml_value  # noqa: E402


@dataclass(frozen=True)
class Section:
    """One table an admin writes.

    Attributes:
        name: the TOML table (``mapper``, ``policy.mcmf``, ``migrate.budget`` ...) and the
            marker's name.
        classes: the dataclasses whose settings the table holds, in order.
        doc: the document holding its generated table (repository path).
        example: the packaged example configuration that shows its keys (repository path).
        development: list the development switches instead of the admin's settings.
    """
    name: str
    classes: tuple[type, ...]
    doc: str
    example: str
    development: bool = False

    def rows(self) -> Iterator[tuple[str, About, object]]:
        """(key, about, default) of every setting of the table."""
        for cls in self.classes:
            for f, a in settings_of(cls, development=self.development):
                yield f.name, a, default_of(f)


OPERATIONS = "docs/operations.md"
REBALANCE = "docs/rebalance.md"
COLLECTOR_EXAMPLE = "lustre_alloc/collectors/systemd/collector.toml.example"
BROKER_EXAMPLE = "lustre_alloc/collectors/systemd/broker.toml.example"
MAPPER_EXAMPLE = "lustre_alloc/mapper/service/systemd/mapper.toml.example"
MIGRATE_EXAMPLE = "lustre_alloc/rebalance/systemd/migrate.toml.example"


def sections() -> tuple[Section, ...]:
    """Every table of every configuration file an admin writes."""
    from lustre_alloc.common.config import BrokerConfig, CollectorConfig
    from lustre_alloc.mapper.policies.lustre_qos import LustreQosTunables
    from lustre_alloc.mapper.policies.mcmf.params import McmfParams
    from lustre_alloc.mapper.service.config import MapperConfig
    from lustre_alloc.mapper.service.scope import Scope
    from lustre_alloc.mapper.steer.agents import SteerConfig
    from lustre_alloc.mapper.steer.controller import SteerParams
    from lustre_alloc.rebalance.budget import BudgetParams
    from lustre_alloc.rebalance.config import MigrateConfig
    return (Section("collector", (CollectorConfig,), OPERATIONS, COLLECTOR_EXAMPLE),
            Section("broker", (BrokerConfig,), OPERATIONS, BROKER_EXAMPLE),
            Section("mapper", (MapperConfig,), OPERATIONS, MAPPER_EXAMPLE),
            Section("policy.mcmf", (McmfParams,), OPERATIONS, MAPPER_EXAMPLE),
            Section("policy.lustre_qos", (LustreQosTunables,), OPERATIONS, MAPPER_EXAMPLE),
            Section("steer", (SteerParams, SteerConfig), OPERATIONS, MAPPER_EXAMPLE),
            Section("scope", (Scope,), OPERATIONS, MAPPER_EXAMPLE),
            Section("development", (MapperConfig,), OPERATIONS, MAPPER_EXAMPLE, True),
            Section("development.steer", (SteerParams, SteerConfig), OPERATIONS, MAPPER_EXAMPLE,
                    True),
            Section("migrate", (MigrateConfig,), REBALANCE, MIGRATE_EXAMPLE),
            Section("migrate.budget", (BudgetParams,), REBALANCE, MIGRATE_EXAMPLE),
            Section("migrate.development", (MigrateConfig,), REBALANCE, MIGRATE_EXAMPLE, True))


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


def render(document: str, doc: str) -> str:
    """``document`` (the repository file ``doc``) with every ``settings:NAME`` block replaced
    by its generated table.

    Raises:
        ValueError: a marker names no section of ``doc``, or a section of ``doc`` has no
            marker.
    """
    mine = {s.name: s for s in sections() if s.doc == doc}
    seen: set[str] = set()

    def fill(m: re.Match) -> str:
        name = m.group(1)
        if name not in mine:
            raise ValueError(f"settings:{name}: no such settings table in {doc} "
                             f"(known: {', '.join(mine)})")
        seen.add(name)
        return f"<!-- settings:{name} -->\n{markdown(mine[name])}\n<!-- /settings:{name} -->"

    out = re.sub(r"<!-- settings:([\w.]+) -->\n.*?<!-- /settings:\1 -->", fill, document,
                 flags=re.S)
    missing = sorted(set(mine) - seen)
    if missing:
        raise ValueError(f"no <!-- settings:{missing[0]} --> block in {doc}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/settings_tables.py",
                                description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the tables in the docs")
    mode.add_argument("--check", action="store_true", help="exit 1 if a table is stale")
    p.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = p.parse_args(argv)
    stale = []
    for doc in sorted({s.doc for s in sections()}):
        path = args.root / doc
        text = path.read_text()
        try:
            new = render(text, doc)
        except ValueError as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            return 2
        if new != text:
            if args.write:
                path.write_text(new)
            else:
                stale.append(doc)
    for doc in stale:
        print(f"{doc}: settings tables are stale; run scripts/settings_tables.py --write",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
