"""Which file system a target belongs to: ``fsname`` of an OST (Lustre target names are
``<fsname>-OST<hex index>``, lustre/include/obd.h; an fsname is 1..8 characters,
``MTI_NAME_MAXLEN`` minus the ``-OSTxxxx`` suffix, mkfs.lustre ``--fsname``).

Cluster state is keyed by (fsname, OST index): the mapper keeps one
:class:`~lustre_alloc.mapper.state.state_store.StateStore` per file system, each taking only the targets of
its own fsname, so ``scratch-OST0000`` and ``home-OST0000`` never overwrite each other.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

MAX_FSNAME = 8
"""Longest fsname Lustre accepts (mkfs.lustre: "fsname must be <= 8 characters")."""
_TARGET_RE = re.compile(r"^([A-Za-z0-9_]{1,8})-(?:OST|MDT)[0-9a-fA-F]{4,8}(?:[-_].*)?$")
_FSNAME_RE = re.compile(r"^[A-Za-z0-9_]{1,8}$")


def fsname_of(name: str) -> str | None:
    """``scratch`` of ``scratch-OST0004`` (also ``scratch-OST0004-osc-MDT0000``,
    ``scratch-OST0004_UUID``); None when ``name`` is not a Lustre target name."""
    m = _TARGET_RE.match(name)
    return m.group(1) if m else None


def valid_fsname(name: str) -> bool:
    """True for a name mkfs.lustre would accept as ``--fsname`` (1..8 of [A-Za-z0-9_])."""
    return bool(_FSNAME_RE.match(name))


def target_fsname(name: str, target: Mapping[str, Any]) -> str | None:
    """The fsname a sample's target declares (field ``fsname``), else the one in its name."""
    fs = target.get("fsname")
    if isinstance(fs, str) and fs:
        return fs
    return fsname_of(name)


def target_name(fsname: str, index: int, kind: str = "OST") -> str:
    """Lustre's name of a target: ``scratch-OST0004`` (the index in 4 hex digits, as
    ``lctl dl`` and ``/proc/fs/lustre/obdfilter/*`` name it); the ``target`` label of the
    metrics."""
    return f"{fsname}-{kind}{index:04x}"
