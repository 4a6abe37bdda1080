"""Paths of the real Lustre fixtures (tests/fixtures/lustre, see SOURCES.md there) and small helpers."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from lustre_alloc.livestack.stack import free_port, free_ports  # noqa: F401 - one port picker for every test

from tests.conftest import FIXTURES

LUSTRE = FIXTURES / "lustre"
HPE = LUSTRE / "hpe-lustre-2.10.1"
DDN = LUSTRE / "ddn-lctl-2.14-2.15"
CONSTRUCTED = LUSTRE / "constructed"
HPE_PROC = HPE / "proc" / "fs" / "lustre"
PYTHON = sys.executable


def all_ddn_dumps() -> list[Path]:
    """Every lctl dump in the DDN fixture folder (LICENSE excluded)."""
    return sorted(p for p in DDN.rglob("*.txt"))


@pytest.fixture(scope="session")
def hpe_root() -> Path:
    if not HPE.is_dir():
        pytest.fail(f"fixture tree missing: {HPE}")
    return HPE


def fake_lctl(tmp_path: Path, dump: Path, name: str = "lctl") -> list[str]:
    """A command that prints ``dump`` whatever its arguments (stands in for ``lctl``)."""
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\nexec cat '{dump}'\n")
    script.chmod(0o755)
    return [str(script)]


def link_tree(root: Path, links: dict[str, Path]) -> Path:
    """Build a proc/sys tree under ``root`` whose files are symlinks to fixture files."""
    for rel, target in links.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
    return root
