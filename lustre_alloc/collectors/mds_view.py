"""What the MDS knows about the OSTs, for the MDS collector's sample: the OSP parameters
(``active``, ``max_create_count``, ``prealloc_status``; :mod:`lustre_alloc.collectors.readers.osp`) and the
OST pools (``lod.*.pools.*``; :mod:`lustre_alloc.collectors.readers.lod_pools`).

Published in the MDS sample's ``server`` map (docs/protocol.md, "MDS view of the OSTs")::

    "osts":  {"scratch-OST0001": {"fsname": "scratch", "index": 1, "active": false,
                                  "max_create_count": 0, "prealloc_status": 0}, ...},
    "pools": {"scratch": {"flash": [0, 2]}, ...}

A parameter or pool that cannot be read is left out and named in ``server.unavailable``
(``osp.<leaf>``, ``lod_pools``); one bad device or pool never hides the others.
"""
from __future__ import annotations

from typing import Any, Protocol

from lustre_alloc.common.errors import LustreStatsError, SourceUnavailable
from lustre_alloc.collectors.readers.lod_pools import MAX_POOL_NAME, lod_fsname, parse_pool
from lustre_alloc.collectors.readers.osp import LEAVES, combine_osp, parse_osp_int


class FamilySource(Protocol):
    def read_family(self, family: str, leaf: str) -> dict[str, tuple[str, str]]:
        """``{device (or "<lod>.<pool>"): (text, where)}``; raises SourceUnavailable."""


def collect_mds_view(source: FamilySource, server: dict[str, Any]) -> None:
    """Add ``osts`` and ``pools`` to ``server`` (and reasons to ``server["unavailable"]``)."""
    unavailable: dict[str, str] = server.setdefault("unavailable", {})
    values: dict[str, dict[str, int]] = {}
    for leaf in LEAVES:
        try:
            texts = source.read_family("osp", leaf)
        except SourceUnavailable as exc:
            unavailable[f"osp.{leaf}"] = f"{exc.reason}: {exc.source}"
            continue
        parsed: dict[str, int] = {}
        for device, (text, where) in texts.items():
            try:
                parsed[device] = parse_osp_int(text, where)
            except LustreStatsError as exc:
                unavailable[f"osp.{device}.{leaf}"] = f"garbled: {exc}"
        values[leaf] = parsed
    server["osts"] = {name: ost.as_dict() for name, ost in sorted(combine_osp(values).items())}
    pools: dict[str, dict[str, list[int]]] = {}
    try:
        texts = source.read_family("lod", "pools")
    except SourceUnavailable as exc:
        unavailable["lod_pools"] = f"{exc.reason}: {exc.source}"
        texts = {}
    for key, (text, where) in sorted(texts.items()):
        device, _, pool = key.rpartition(".")
        fs = lod_fsname(device)
        if fs is None or not pool or len(pool.encode()) > MAX_POOL_NAME:
            continue
        try:
            members_fs, members = parse_pool(text, where)
        except LustreStatsError as exc:
            unavailable[f"lod_pools.{pool}"] = f"garbled: {exc}"
            continue
        if members_fs not in (None, fs):
            unavailable[f"lod_pools.{pool}"] = f"garbled: members of {members_fs} under {fs}"
            continue
        # DNE: every MDT's LOD holds the same pools (the MGS pushes them); the first wins
        pools.setdefault(fs, {}).setdefault(pool, members)
    server["pools"] = pools
