"""Shared test fixtures: where ../shared lives, deterministic seeds."""
from __future__ import annotations

from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED = PROJECT_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only ``../shared`` folder beside the checkout (fixtures, data, papers)."""
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}: tests read real fixtures from it")
    return SHARED
