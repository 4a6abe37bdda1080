"""docs/architecture.md stays honest: every path its tables name exists, every package and
module of the project is listed, and the layers it states hold."""
from __future__ import annotations

import configparser
import re
from pathlib import Path

from tests.test_import_cycles import import_graph

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
LAYERS = {"common": 0, "collectors": 1, "traces": 1, "mapper": 2, "rebalance": 3,
          "selftest": 3, "simulator": 4, "livestack": 5}
"""The layer order the document states; an import may only go to a lower or equal layer."""


def _table_paths(section: str) -> list[str]:
    """The backticked paths in the first or second column of a table under ``section``."""
    text = DOC.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    paths = []
    for line in text.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        for cell in cells[:2]:
            paths += [p for p in re.findall(r"`([^`]+)`", cell)
                      if "/" in p and not p.startswith("[")]
    return paths


def _packages() -> list[str]:
    """The packages setup.cfg ships (``[options] packages``)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return [p.strip() for p in cfg["options"]["packages"].split() if p.strip()]


def _modules() -> list[str]:
    """Every Python module of the shipped packages (not ``__init__``), as a repo path."""
    out = []
    for pkg in _packages():
        folder = ROOT / pkg.replace(".", "/")
        out += [str(p.relative_to(ROOT)) for p in sorted(folder.glob("*.py"))
                if p.name != "__init__.py"]
    return out


def test_every_listed_path_exists():
    listed = _table_paths("Modules") + _table_paths("Where does X live")
    assert len(listed) > 50
    missing = [p for p in listed if not (ROOT / p.split(" ")[0]).exists()]
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_package_and_module_is_listed():
    listed = set(_table_paths("Modules"))
    packages = [pkg.replace(".", "/") + "/" for pkg in _packages()]
    unlisted = [p for p in packages + _modules() if p not in listed]
    assert unlisted == [], ("add a row to the Modules table of docs/architecture.md for: "
                            f"{unlisted}")


def test_modules_table_lists_each_path_once():
    listed = _table_paths("Modules")
    assert sorted(set(listed)) == sorted(listed)


def _edges() -> list[tuple[str, str]]:
    """The import graph's edges with module names relative to ``lustre_alloc``."""
    return [(a.removeprefix("lustre_alloc."), b.removeprefix("lustre_alloc."))
            for a, b in import_graph().edges()]


def test_no_import_goes_to_a_higher_layer():
    upward = [(a, b) for a, b in _edges() if LAYERS[a.split(".")[0]] < LAYERS[b.split(".")[0]]]
    assert upward == [], f"imports against the layer order of docs/architecture.md: {upward}"


MAPPER_LAYERS = {"state": 0, "speed": 1, "flow": 2, "predictor": 3, "steer": 4, "policies": 5,
                 "explain": 6, "shadow": 7, "service": 8}
"""The layers inside ``lustre_alloc/mapper/`` that docs/architecture.md states."""


def _mapper_package_edges() -> set[tuple[str, str]]:
    edges = set()
    for a, b in _edges():
        if a.startswith("mapper.") and b.startswith("mapper.") and a.count(".") >= 2:
            pa, pb = a.split(".")[1], b.split(".")[1]
            if pa != pb:
                edges.add((pa, pb))
    return edges


def test_mapper_subpackages_are_all_layered():
    folders = {p.name for p in (ROOT / "lustre_alloc" / "mapper").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(MAPPER_LAYERS)
    doc = DOC.read_text()
    assert " < ".join(sorted(MAPPER_LAYERS, key=MAPPER_LAYERS.get)) in doc


def test_no_import_goes_to_a_higher_layer_inside_mapper():
    upward = sorted((a, b) for a, b in _mapper_package_edges()
                    if MAPPER_LAYERS[a] < MAPPER_LAYERS[b])
    assert upward == [], f"imports against mapper's layer order (docs/architecture.md): {upward}"


def test_mapper_layer_check_fails_on_an_upward_import():
    """The check itself: an invented state -> policies edge is reported."""
    edges = _mapper_package_edges() | {("state", "policies")}
    assert [e for e in edges if MAPPER_LAYERS[e[0]] < MAPPER_LAYERS[e[1]]] == [("state", "policies")]
