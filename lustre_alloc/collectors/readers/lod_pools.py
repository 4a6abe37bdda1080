"""Reader for the MDS's OST pools: ``lod.<fsname>-MDT<hex>-mdtlov.pools.<pool>``.

Each pool file lists its member OSTs, one target UUID per line (lod_pool.c
``pool_proc_show`` prints each member's ``obd_uuid``), in the order the pool was built with
``lctl pool_add``; an empty pool is an empty file. ``lctl get_param lod.*.pools.*`` prints it
as a multi-line value::

    lod.testfs-MDT0000-mdtlov.pools.flash=
    testfs-OST0000_UUID
    testfs-OST0002_UUID

Pool names are at most ``LOV_MAXPOOLNAME`` (15) bytes. Locations: ``/proc/fs/lustre/lod/
<lod>/pools/<pool>`` (a directory of seq files in every version).
"""
from __future__ import annotations

import re

from lustre_alloc.common.errors import LodPoolError
from lustre_alloc.collectors.readers._common import split_lines

_UUID_RE = re.compile(r"^([A-Za-z0-9_]{1,8})-OST([0-9a-fA-F]{4,8})_UUID$")
_LOD_RE = re.compile(r"^([A-Za-z0-9_]{1,8})-MDT[0-9a-fA-F]{4,8}-mdtlov$")
MAX_POOL_NAME = 15


def lod_fsname(device: str) -> str | None:
    """``testfs`` of the LOD device ``testfs-MDT0000-mdtlov``; None for other names."""
    m = _LOD_RE.match(device)
    return m.group(1) if m else None


def parse_pool(text: str, source: str = "<text>") -> tuple[str | None, list[int]]:
    """(fsname, OST indices in file order) of one pool file; fsname None for an empty pool.

    Raises:
        LodPoolError: a non-blank line that is not ``<fsname>-OST<hex>_UUID``, or members of
            two file systems.
    """
    fsname: str | None = None
    members: list[int] = []
    for lineno, line in split_lines(text):
        if not line.strip():
            continue
        m = _UUID_RE.match(line.strip())
        if m is None:
            raise LodPoolError(f"expected an OST UUID (<fsname>-OSTxxxx_UUID), got "
                               f"{line.strip()[:60]!r}", source=source, line=lineno)
        if fsname is not None and m.group(1) != fsname:
            raise LodPoolError(f"member of file system {m.group(1)!r} in a pool of {fsname!r}",
                               source=source, line=lineno)
        fsname = m.group(1)
        index = int(m.group(2), 16)
        if index not in members:
            members.append(index)
    return fsname, members
