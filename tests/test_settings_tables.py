"""The settings an admin reads are the code's: the docs' settings tables are generated from
the settings' metadata (scripts/settings_tables.py), and every packaged example
configuration names every admin key of its tables with its true default."""
from __future__ import annotations

import re
import tomllib
from dataclasses import MISSING
from pathlib import Path

import pytest

from lustre_alloc.common.settings import settings_of
from scripts import settings_tables

ROOT = Path(__file__).resolve().parents[1]
HEADER = re.compile(r"^#?\s?\[([\w.]+)\]")
KEY_LINE = re.compile(r"^(#?)\s?([a-z][a-z0-9_]*)\s*=\s*(\S.*?)(?:\s+#\s?(.*))?$")
"""``[#] key = value [# comment]``: a commented line shows the default unless its comment
starts with "e.g." (an example value)."""


def test_the_docs_tables_are_generated_from_the_code():
    for doc in sorted({s.doc for s in settings_tables.sections()}):
        text = (ROOT / doc).read_text()
        assert settings_tables.render(text, doc) == text, (
            f"{doc} is stale: scripts/settings_tables.py --write")


def test_the_check_command_reports_a_stale_table(tmp_path, capsys):
    for doc in {s.doc for s in settings_tables.sections()}:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc).write_text((ROOT / doc).read_text())
    ops = tmp_path / settings_tables.OPERATIONS
    ops.write_text(ops.read_text().replace("| `bind` |", "| `bnd` |", 1))
    assert settings_tables.main(["--check", "--root", str(tmp_path)]) == 1
    assert "stale" in capsys.readouterr().err
    assert settings_tables.main(["--write", "--root", str(tmp_path)]) == 0
    assert settings_tables.main(["--check", "--root", str(tmp_path)]) == 0


def test_every_setting_says_its_unit_and_what_it_does():
    for section in settings_tables.sections():
        for key, about, _ in section.rows():
            assert about.unit and about.doc, f"{section.name}.{key}: unit or doc missing"


def _example_keys(example: str) -> dict[str, list[tuple[str, bool, object, str]]]:
    """Table -> (key, commented, value, comment) of every ``key = value`` line."""
    found: dict[str, list[tuple[str, bool, object, str]]] = {}
    table = ""
    for line in (ROOT / example).read_text().splitlines():
        m = HEADER.match(line)
        if m:
            table = m.group(1)
            continue
        m = KEY_LINE.match(line)
        if m and table:
            value = tomllib.loads(f"v = {m.group(3)}")["v"]
            found.setdefault(table, []).append(
                (m.group(2), bool(m.group(1)), value, m.group(4) or ""))
    return found


def _same(default: object, value: object) -> bool:
    if isinstance(default, tuple):
        default = list(default)
    return default == value or (isinstance(default, float) and default == float(value))


@pytest.mark.parametrize("example", sorted({s.example for s in settings_tables.sections()}))
def test_the_packaged_example_names_every_admin_key_with_its_default(example):
    found = _example_keys(example)
    mine = [s for s in settings_tables.sections() if s.example == example]
    for section in mine:
        lines = {k: (c, v, note) for k, c, v, note in found.get(section.name, [])}
        for key, _, default in section.rows():
            sub = f"{section.name}.{key}"          # a table-valued key: its own [table]
            assert key in lines or sub in found, f"[{section.name}] {key}: not in {example}"
            if key not in lines:
                continue
            commented, value, note = lines[key]
            if commented and default is not MISSING and not note.startswith("e.g."):
                assert _same(default, value), (
                    f"{example}: [{section.name}] {key} shows {value!r}, the default is "
                    f"{default!r}")
    for section in mine:
        if section.development:
            assert section.name in found, f"{example}: no [{section.name}] table"
            continue
        dev_keys = {f.name for cls in section.classes
                    for f, _ in settings_of(cls, development=True)}
        for key, _, _, _ in found.get(section.name, []):
            assert key not in dev_keys, f"{example}: [{section.name}] {key}: a development switch"


def test_a_development_switch_in_the_admin_table_is_refused_with_its_home(tmp_path):
    from lustre_alloc.common.errors import ConfigError
    from lustre_alloc.mapper.service.config import load_config
    for text, named in (('[mapper]\nstatic_cluster = "2x2"\n', "[development]"),
                        ('[steer]\nrate_smoothing = 1.0\n', "[development.steer]"),
                        ('[development]\nbind = "x"\n', "development.bind"),
                        ('[mapper]\nlease_s = 2.0\n', "mapper.layout_lease_s"),
                        ('[steer]\nlease_s = 900.0\n', "steer.action_lease_s"),
                        ('[mapper]\npeer_request_burst = 9\n', "was removed")):
        path = tmp_path / "m.toml"
        path.write_text(text)
        with pytest.raises(ConfigError) as err:
            load_config(str(path), {})
        assert named in str(err.value) and "\n" not in str(err.value)
    path.write_text('[development]\nstatic_cluster = "2x2"\nseed = 4\n'
                    '[development.steer]\nrate_smoothing = 1.0\n[steer]\nmode = "dry_run"\n')
    config = load_config(str(path), {"seed": 5})
    assert config.static_cluster == "2x2" and config.seed == 5       # the flag wins
    assert config.steer_config().params.rate_smoothing == 1.0


def test_the_migration_services_development_switch_has_its_own_table():
    from lustre_alloc.rebalance.config import MigrateConfigError, from_table
    base = {"fsname": "fs", "mount": "/m", "ost_rate_mib_s": 1.0}
    with pytest.raises(MigrateConfigError, match=r"migrate.layout_xattr is a development"):
        from_table({**base, "layout_xattr": "user.x"}, "m.toml")
    cfg = from_table({**base, "development": {"layout_xattr": "user.x"}}, "m.toml")
    assert cfg.layout_xattr == "user.x"
