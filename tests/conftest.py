"""Shared test fixtures: where the in-repository fixtures and data live, deterministic seeds."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = PROJECT_ROOT / "tests" / "fixtures"
"""Test-only real inputs (Lustre /proc trees, lctl dumps); see fixtures/lustre/SOURCES.md."""
DATA = PROJECT_ROOT / "lustre_alloc_data"
"""Real operational data shipped in the wheel (package ``lustre_alloc_data``)."""
PYTOKIO = DATA / "nersc-pytokio"


@pytest.fixture(scope="session")
def pytokio_dir() -> Path:
    """The NERSC pytokio data folder inside the repository (``lfs df``, ``lctl dl -t``, LMT, HACC)."""
    return PYTOKIO


@pytest.fixture(autouse=True)
def own_runtime_dir(monkeypatch):
    """Each test's mappers (in process and spawned) get a runtime directory of their own, so
    a hand-started mapper's admin socket (``lustre_alloc.common.runtime_dir``) never meets another
    test's; a short path, for AF_UNIX's 107 bytes."""
    path = tempfile.mkdtemp(prefix="la-run-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", path)
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    yield path
    shutil.rmtree(path, ignore_errors=True)
