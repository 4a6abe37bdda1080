"""Readers for the MDS's OSP devices: what the MDS itself knows about each OST.

The MDS talks to every OST through one OSP device per (OST, MDT), named
``<fsname>-OST<hex>-osc-MDT<hex>`` (an MDT-to-MDT one is ``<fsname>-MDT<hex>-osp-MDT<hex>``
and is skipped here). Three one-integer parameters decide whether LOD may place objects on it:

* ``active``: 0 after ``lctl set_param osp.<dev>.active=0`` (or ``lctl --device <dev>
  deactivate``): LOD never allocates on it.
* ``max_create_count``: 0 after ``lctl set_param osp.<dev>.max_create_count=0``, the documented
  way to drain an OST (Lustre Operations Manual, "Removing an OST from the File System"); the
  OSP then sets ``OS_STATFS_NOPRECREATE`` and LOD skips it (ENOBUFS).
* ``prealloc_status``: 0, or the negative errno of the last precreate (``-28`` ENOSPC,
  ``-19`` ENODEV when the OST went away, ``-107`` ENOTCONN ...), osp_precreate.c
  ``opd_pre_status``.
* ``prealloc_next_id``, ``prealloc_last_id``, ``prealloc_reserved``: the next object id the
  MDS will use, the last the OST has precreated, and the ids reserved by creates under way
  (``osp/lproc_osp.c``: ``opd_pre_used_fid`` + 1, ``opd_pre_last_created_fid``,
  ``opd_pre_reserved``). The objects ready for new files are
  ``last - (next - 1) - reserved``: what ``osp_dev.c`` ``osp_statfs()`` hands LOD as
  ``os_fprecreated``, and LOD's round-robin and QOS first passes skip an OST with none
  (``lod_qos.c`` ``lod_check_and_reserve_ost()``: "skip OSPs with no objects ready"); an
  OST whose precreation cannot keep up is slow or busy now.

Real example (Lustre 2.14 DDN, ``lctl get_param osp.*.active osp.*.max_create_count``,
``tests/fixtures/lustre/ddn-lctl-2.14-2.15/osp.txt``)::

    osp.tesfs-OST0001-osc-MDT0000.active=0
    osp.tesfs-OST0001-osc-MDT0000.max_create_count=0

Locations: ``/sys/fs/lustre/osp/<dev>/`` (2.12+), ``/proc/fs/lustre/osp/<dev>/`` before.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from lustre_alloc.common.errors import OspParamError

LEAVES = ("active", "max_create_count", "prealloc_status", "prealloc_next_id",
          "prealloc_last_id", "prealloc_reserved")
"""The OSP parameters read, one integer each."""
PRECREATE_LEAVES = ("prealloc_next_id", "prealloc_last_id", "prealloc_reserved")
_DEVICE_RE = re.compile(r"^([A-Za-z0-9_]{1,8})-OST([0-9a-fA-F]{4,8})-osc-(MDT[0-9a-fA-F]{4,8})$")
_INT_RE = re.compile(r"^\s*(-?\d{1,20})\s*$", re.ASCII)


@dataclass(frozen=True, slots=True)
class OspDevice:
    """Which OST (and from which MDT) an OSP device name points to."""
    fsname: str
    index: int
    mdt: str


def parse_osp_device(name: str) -> OspDevice | None:
    """``tesfs-OST0001-osc-MDT0000`` -> (tesfs, 1, MDT0000); None for MDT-MDT OSPs and
    other names."""
    m = _DEVICE_RE.match(name)
    if m is None:
        return None
    return OspDevice(m.group(1), int(m.group(2), 16), m.group(3))


def parse_osp_int(text: str, source: str = "<text>") -> int:
    """The integer of ``active``, ``max_create_count`` or ``prealloc_status`` (may be < 0).

    Raises:
        OspParamError: not exactly one decimal integer.
    """
    m = _INT_RE.match(text)
    if m is None:
        raise OspParamError(f"expected one integer, got {text[:40].strip()!r}", source=source,
                            line=1)
    return int(m.group(1))


@dataclass(slots=True)
class OstOnMds:
    """The MDS's view of one OST, over all its MDTs (DNE: one OSP per MDT).

    ``active`` is False when any MDT's OSP is inactive; ``max_create_count`` is the smallest
    (0 = drained from at least one MDT); ``prealloc_status`` the first non-zero errno (0 =
    fine); ``precreated_objects`` the fewest objects ready on any MDT's OSP (module
    docstring; None when no OSP's ids were read). Parameters not read are
    None. Conservative by choice (ours): an OST one MDT cannot
    use is not proposed at all, since the mapper answers creates from every MDT.
    """
    fsname: str
    index: int
    active: bool | None = None
    max_create_count: int | None = None
    prealloc_status: int | None = None
    precreated_objects: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {"fsname": self.fsname, "index": self.index, "active": self.active,
                "max_create_count": self.max_create_count,
                "prealloc_status": self.prealloc_status,
                "precreated_objects": self.precreated_objects}


def precreated_objects(next_id: int | None, last_id: int | None,
                       reserved: int | None) -> int | None:
    """Objects one OSP has ready for new files: ``last_id - (next_id - 1) - reserved``
    (``osp_statfs()``'s ``os_fprecreated``), at least 0; None without both ids, or when
    ``next_id`` is past ``last_id + 1`` (the two read across a sequence change)."""
    if next_id is None or last_id is None or next_id > last_id + 1:
        return None
    return max(0, last_id - (next_id - 1) - (reserved or 0))


def combine_osp(values: Mapping[str, Mapping[str, int]]) -> dict[str, OstOnMds]:
    """``{leaf: {device: value}}`` (leaves of :data:`LEAVES`) -> ``{"<fsname>-OST<hex>":
    OstOnMds}``, combined over the MDTs as :class:`OstOnMds` says."""
    out: dict[str, OstOnMds] = {}
    for leaf, per_device in values.items():
        if leaf in PRECREATE_LEAVES:
            continue            # combined per device below
        for device, value in per_device.items():
            dev = parse_osp_device(device)
            if dev is None:
                continue
            ost = out.setdefault(f"{dev.fsname}-OST{dev.index:04x}",
                                 OstOnMds(dev.fsname, dev.index))
            if leaf == "active":
                ost.active = bool(value) if ost.active is None else ost.active and bool(value)
            elif leaf == "max_create_count":
                ost.max_create_count = value if ost.max_create_count is None else \
                    min(ost.max_create_count, value)
            elif leaf == "prealloc_status":
                if ost.prealloc_status in (None, 0):
                    ost.prealloc_status = value
    ids = values.get("prealloc_next_id", {})
    for device, next_id in ids.items():
        dev = parse_osp_device(device)
        ready = precreated_objects(next_id, values.get("prealloc_last_id", {}).get(device),
                                   values.get("prealloc_reserved", {}).get(device))
        if dev is None or ready is None:
            continue
        ost = out.setdefault(f"{dev.fsname}-OST{dev.index:04x}", OstOnMds(dev.fsname, dev.index))
        ost.precreated_objects = ready if ost.precreated_objects is None else \
            min(ost.precreated_objects, ready)
    return out
