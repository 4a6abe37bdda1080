"""Where the mapper's admin socket lives when systemd gives it no ``RUNTIME_DIRECTORY``
(started by hand), so that ``lustre-alloc-ctl`` finds it without being told."""
from __future__ import annotations

import os
from pathlib import Path

SYSTEMD_CONTROL = Path("/run/lustre-alloc/control")
"""The admin socket under the packaged unit (``RuntimeDirectory=lustre-alloc``)."""


def hand_started_control() -> Path:
    """The admin socket of a mapper started by hand: ``$XDG_RUNTIME_DIR/lustre-alloc/control``
    when the user has a runtime directory, else ``/tmp/lustre-alloc-<uid>/control`` (a
    directory of the user's own, mode 0700 when the mapper makes it)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    base = Path(xdg) / "lustre-alloc" if xdg else Path(f"/tmp/lustre-alloc-{os.getuid()}")
    return base / "control"


def control_candidates() -> list[Path]:
    """Where ``lustre-alloc-ctl`` looks for the admin socket, in order: the packaged unit's,
    then a hand-started mapper's."""
    return [SYSTEMD_CONTROL, hand_started_control()]
