"""Shared test fixtures: where the in-repository fixtures and data live, deterministic seeds."""
from __future__ import annotations

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
