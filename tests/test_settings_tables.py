"""The settings an admin reads are the code's: docs/operations.md's tables are generated
from the settings' metadata, and the packaged mapper.toml.example names every admin key
with its true default."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from lustre_alloc.mapper.service import settings_tables
from lustre_alloc.common.settings import default_of, settings_of

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ROOT / "docs/operations.md"
EXAMPLE = ROOT / "lustre_alloc/mapper/service/systemd/mapper.toml.example"
HEADER = re.compile(r"^#?\s?\[([\w.]+)\]")
KEY_LINE = re.compile(r"^(#?)\s?([a-z][a-z0-9_]*)\s*=\s*(\S.*?)(?:\s+#\s.*)?$")


def test_the_operations_tables_are_generated_from_the_code():
    text = OPERATIONS.read_text()
    assert settings_tables.render(text) == text, (
        "docs/operations.md is stale: python -m lustre_alloc.mapper.service.settings_tables "
        "--write docs/operations.md")


def test_the_check_command_reports_a_stale_table(tmp_path, capsys):
    doc = tmp_path / "ops.md"
    doc.write_text(OPERATIONS.read_text().replace("| `bind` |", "| `bnd` |", 1))
    assert settings_tables.main(["--check", str(doc)]) == 1
    assert "stale" in capsys.readouterr().err
    assert settings_tables.main(["--write", str(doc)]) == 0
    assert settings_tables.main(["--check", str(doc)]) == 0


def test_every_setting_says_its_unit_and_what_it_does():
    for section in settings_tables.sections():
        for key, about, _ in section.rows():
            assert about.unit and about.doc, f"{section.name}.{key}: unit or doc missing"


def _example_keys() -> dict[str, list[tuple[str, bool, object]]]:
    """Table -> (key, commented, value) of every ``key = value`` line of the example."""
    found: dict[str, list[tuple[str, bool, object]]] = {}
    table = ""
    for line in EXAMPLE.read_text().splitlines():
        m = HEADER.match(line)
        if m:
            table = m.group(1)
            continue
        m = KEY_LINE.match(line)
        if m and table:
            value = tomllib.loads(f"v = {m.group(3)}")["v"]
            found.setdefault(table, []).append((m.group(2), bool(m.group(1)), value))
    return found


def _same(default: object, value: object) -> bool:
    if isinstance(default, tuple):
        default = list(default)
    return default == value or (isinstance(default, float) and default == float(value))


def test_the_packaged_example_names_every_admin_key_with_its_default():
    found = _example_keys()
    for section in settings_tables.sections():
        lines = {k: (c, v) for k, c, v in found.get(section.name, [])}
        for key, _, default in section.rows():
            sub = f"{section.name}.{key}"          # a table-valued key: its own [table]
            assert key in lines or sub in found or any(t == sub for t in found), (
                f"[{section.name}] {key}: not in {EXAMPLE.name}")
            if key in lines and lines[key][0]:      # a commented line shows the default
                assert _same(default, lines[key][1]), (
                    f"[{section.name}] {key}: the example shows {lines[key][1]!r}, the "
                    f"default is {default!r}")
    development = {s.name for s in settings_tables.sections() if s.development}
    for section in settings_tables.sections():
        if section.development:
            continue
        dev_keys = {f.name for cls in section.classes
                    for f, _ in settings_of(cls, development=True)}
        for key, _, _ in found.get(section.name, []):
            assert key not in dev_keys, f"[{section.name}] {key}: a development switch"
    assert development <= set(found), "the example shows the [development] tables"


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


def test_defaults_in_the_tables_are_the_dataclass_defaults():
    from lustre_alloc.mapper.service.config import MapperConfig
    d = MapperConfig()
    for f, _ in settings_of(MapperConfig):
        assert getattr(d, f.name) == default_of(f)
