"""The Lustre OST rules, each defined once: space/inode flags, staleness, usability,
pool membership and stripe count.

This is the one home of these rules; the mapper's state store (samples from the
collectors), the simulator's MDS view and the live stack's emulated MDS all import them,
so production and simulation cannot apply a rule differently
(``tests/mapper/test_rules_agree.py`` keeps them in step).

* Space and inodes (:func:`statfs_flags`): OSP's full watermarks with hysteresis and the
  ``ENOINO`` limit (osp_precreate.c ``osp_pre_update_status``; lustre_idl.h).
* Staleness (:func:`stale_servers`): which OSSes' statistics are too old to trust (ours;
  the gate's ``stale`` reason, :mod:`lustre_alloc.mapper.policies.gate`).
* Usability (:func:`unusable_reason`, :func:`is_usable`), pools (:func:`pool_members`) and
  stripe count (:func:`resolve_stripe_count`) restate Lustre's LOD usability check and
  stripe-count resolution (lod_qos.c ``lod_statfs_and_check`` / ``lod_qos_prep_create``;
  restated in ``docs/reference/lustre-lod-allocator.md``, "USABLE CHECK" and "DISPATCH").
  Every policy, ours included, applies them: the MDS rejects an explicit OST list that
  names an unusable OST, so the mapper must never return one.
"""
from __future__ import annotations

import errno
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstFlag, OstState
from lustre_alloc.common.lustre import LOV_MAX_STRIPE_COUNT
from lustre_alloc.mapper.state.placement_errors import InvalidRequestError, NoSpaceError, PlacementCheckError

ENOINO_FILES = 32
"""``files_free`` below which OSP flags an OST ``OS_STATFS_ENOINO``."""


def enospc_watermarks_kib(kbytes_total: int) -> tuple[int, int]:
    """OSP's full watermarks of an OST of ``kbytes_total`` KiB, as (low, high) KiB.

    ``reserved_mb_low = max(1, kbytes_total >> 20)`` MiB (about 0.1 % of the OST) and
    ``reserved_mb_high = 2 * low + 1`` MiB (osp_precreate.c; restated in
    ``docs/reference/lustre-lod-allocator.md``). Vectorised form:
    :func:`enospc_watermarks_kib_array`.
    """
    low_mib = max(1, int(kbytes_total) >> 20)
    return low_mib * 1024, (2 * low_mib + 1) * 1024


def enospc_watermarks_kib_array(kbytes_total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`enospc_watermarks_kib` over an array of OST sizes (KiB, shape (N,)): the
    (low, high) watermarks in KiB, int64 arrays of shape (N,)."""
    low_mib = np.maximum(1, np.asarray(kbytes_total, dtype=np.int64) >> 20)
    return low_mib * 1024, (2 * low_mib + 1) * 1024


def enospc_reserve_bytes(kbytes_total: np.ndarray) -> np.ndarray:
    """The free space an OST needs to take new objects again once OSP marked it full: its
    high watermark (:func:`enospc_watermarks_kib_array`) in bytes, float (N,). The rate
    cost keeps a stripe's expected bytes above it (:class:`lustre_alloc.mapper.flow.costs.RateCost`)."""
    return enospc_watermarks_kib_array(kbytes_total)[1].astype(float) * 1024.0


def is_enospc(kbytes_avail: int, kbytes_total: int, was_enospc: bool) -> bool:
    """OSP's ``OS_STATFS_ENOSPC`` after a statfs: set when ``kbytes_avail`` (KiB) falls
    below the low watermark, kept while it stays at or below the high one (hysteresis, so
    an OST at the edge does not flap). Vectorised form: :func:`is_enospc_array`."""
    low, high = enospc_watermarks_kib(kbytes_total)
    return kbytes_avail <= high if was_enospc else kbytes_avail < low


def is_enospc_array(kbytes_avail: np.ndarray, kbytes_total: np.ndarray,
                    was_enospc: np.ndarray) -> np.ndarray:
    """:func:`is_enospc` element-wise over arrays of shape (N,) (KiB, KiB, bool); bool (N,)."""
    low, high = enospc_watermarks_kib_array(kbytes_total)
    avail = np.asarray(kbytes_avail, dtype=np.int64)
    return np.where(np.asarray(was_enospc, dtype=bool), avail <= high, avail < low)


PREALLOC_ENOSPC = -errno.ENOSPC
"""``osp.*.prealloc_status`` of an OST whose precreate found no space (negative errno,
osp_precreate.c): full, but still active."""


def osp_view(active: bool, flags: OstFlag, osp_active: bool, max_create_count: int | None,
             prealloc_status: int) -> tuple[bool, OstFlag]:
    """``(active, flags)`` of an OST after the MDS's own view of it (its OSP device):
    inactive when the OSP is inactive or its last precreate failed with anything but
    ENOSPC; ``NOPRECREATE`` when ``max_create_count`` is 0 (drained: ``lctl set_param
    osp.*.max_create_count=0``, the Lustre manual's way to stop new objects on an OST);
    ``ENOSPC`` when ``prealloc_status`` is ``-ENOSPC`` (lod_qos.c ``lod_statfs_and_check``
    skips all three; restated in ``docs/reference/lustre-lod-allocator.md``)."""
    if not osp_active or prealloc_status not in (0, PREALLOC_ENOSPC):
        active = False
    if max_create_count == 0:
        flags |= OstFlag.NOPRECREATE
    if prealloc_status == PREALLOC_ENOSPC:
        flags |= OstFlag.ENOSPC
    return active, flags


def lnet_load_percent(send_bytes_s: np.ndarray | float, recv_bytes_s: np.ndarray | float,
                      link_bytes_s: float) -> np.ndarray:
    """LNet load of a server, 0..100 (float array of the inputs' shape): its busier link
    direction over the link rate (a full-duplex link carries ``link_bytes_s`` each way).
    Ours: the paper names the LNet statistic (Section III-C) but not its normalisation.
    The state store applies it to the collectors' ``lnet_send/recv_bytes_per_s``, the
    simulator to the bytes its OSSes sent and received."""
    busier = np.maximum(np.asarray(send_bytes_s, dtype=float), np.asarray(recv_bytes_s, dtype=float))
    return np.minimum(100.0, 100.0 * busier / link_bytes_s)


def statfs_flags(previous: OstFlag, kbytes_avail: int, kbytes_total: int,
                 files_free: int) -> OstFlag:
    """``previous`` with its ``ENOSPC`` and ``ENOINO`` bits recomputed from one statfs
    (KiB, free inodes); the other bits are kept. ``ENOSPC`` follows :func:`is_enospc`
    (its hysteresis reads ``previous``); ``ENOINO`` when ``files_free`` < ``ENOINO_FILES``.
    """
    flags = previous & ~(OstFlag.ENOSPC | OstFlag.ENOINO)
    if is_enospc(kbytes_avail, kbytes_total, bool(previous & OstFlag.ENOSPC)):
        flags |= OstFlag.ENOSPC
    if files_free < ENOINO_FILES:
        flags |= OstFlag.ENOINO
    return flags


def stale_servers_until(snapshot: ClusterSnapshot, max_age_s: float) -> tuple[list[str], float]:
    """The stale OSSes at ``snapshot.time_s`` and until when that answer holds.

    An OSS is stale when it serves a usable OST whose OST or OSS sample is older than
    ``max_age_s`` seconds (or was never taken). Returns (sorted OSS names, the time,
    seconds on the snapshot's clock, at which the oldest fresh sample turns stale; inf
    when none will). O(OSTs).
    """
    now = snapshot.time_s
    stale: set[str] = set()
    turns_stale = float("inf")
    osses = snapshot.osses
    for ost in snapshot.osts:
        if not is_usable(ost):
            continue
        times = [t for t in (ost.sample_time_s, osses[ost.oss].sample_time_s) if t is not None]
        if not times:
            stale.add(ost.oss)
            continue
        oldest = min(times)
        if now - oldest > max_age_s:
            stale.add(ost.oss)
        else:
            turns_stale = min(turns_stale, oldest + max_age_s)
    return sorted(stale), turns_stale


def stale_servers(snapshot: ClusterSnapshot, max_age_s: float) -> list[str]:
    """OSS names serving a usable OST whose last sample is older than ``max_age_s``
    seconds at ``snapshot.time_s`` (or was never taken), sorted."""
    return stale_servers_until(snapshot, max_age_s)[0]


def unusable_reason(ost: OstState) -> str | None:
    """Why ``ost`` cannot take a new object, or None if it can.

    Order and errno names follow LOD's check: inactive (EREMOTEIO to the client),
    ENOSPC (full, or out of inodes with no precreated objects left), EROFS
    (read-only), ENOBUFS (``max_create_count=0``).
    """
    if not ost.active:
        return "inactive"
    flags = ost.flags
    if not flags:       # fast path (the common case): no state bit set, nothing below applies
        return None
    if flags & OstFlag.ENOSPC or (flags & OstFlag.ENOINO and ost.files_precreated == 0):
        return "ENOSPC"
    if flags & OstFlag.READONLY:
        return "EROFS"
    if flags & OstFlag.NOPRECREATE:
        return "ENOBUFS"
    return None


def is_usable(ost: OstState) -> bool:
    """True when :func:`unusable_reason` is None."""
    return unusable_reason(ost) is None


def pool_members(snapshot: ClusterSnapshot, pool: str | None) -> list[OstState]:
    """The OSTs a request may use, in LOD array (index) order.

    ``None`` or an empty pool means every OST (LOD: "empty pool = no pool").

    Raises:
        InvalidRequestError: the pool does not exist (``lfs setstripe -p`` and
            liblustreapi refuse an unknown pool with EINVAL).
    """
    if pool is None:
        return snapshot.osts
    try:
        members = snapshot.pools[pool]
    except KeyError:
        raise InvalidRequestError(f"unknown OST pool {pool!r}") from None
    if not members:
        return snapshot.osts
    return [o for o in snapshot.osts if o.index in members]


def resolve_stripe_count(requested: int, usable: int) -> int:
    """The stripe count LOD would allocate for ``requested`` with ``usable`` OSTs.

    ``-1`` means every usable OST, ``0`` the default stripe count (1); the result is
    clipped to ``usable`` and to ``LOV_MAX_STRIPE_COUNT`` (no overstriping).

    Raises:
        InvalidRequestError: ``requested`` < -1 or > ``LOV_MAX_STRIPE_COUNT``.
    """
    if requested < -1 or requested > LOV_MAX_STRIPE_COUNT:
        raise InvalidRequestError(
            f"stripe count {requested} outside -1..{LOV_MAX_STRIPE_COUNT}")
    if requested == -1:
        count = usable
    elif requested == 0:
        count = 1
    else:
        count = requested
    return max(0, min(count, usable, LOV_MAX_STRIPE_COUNT))


def members_and_stripe_count(snapshot: ClusterSnapshot, pool: str | None, requested: int,
                             resolved: tuple[list[OstState], int] | None = None
                             ) -> tuple[list[OstState], int]:
    """LOD's dispatch for one create: the pool's OSTs in index order
    (:func:`pool_members`) and the stripe count it allocates over their usable ones
    (:func:`resolve_stripe_count`).

    Raises:
        NoSpaceError: no OST of the pool is usable (ENOSPC).
        InvalidRequestError: unknown pool, or ``requested`` out of range.
    """
    if resolved is None:
        members = pool_members(snapshot, pool)
        usable = sum(1 for o in members if is_usable(o))
    else:
        members, usable = resolved      # (members, usable count) kept by the caller
    count = resolve_stripe_count(requested, usable)
    if count == 0:
        raise NoSpaceError("no usable OST" + (f" in pool {pool!r}" if pool else ""))
    return members, count


def check_placement(snapshot: ClusterSnapshot, osts: Sequence[int], pool: str | None) -> None:
    """Check the invariants every policy guarantees (for tests and for the mapper's last
    line of defence before a reply).

    Raises:
        PlacementCheckError: naming the first violation (duplicate, unknown, unusable or
            out-of-pool OST).
        InvalidRequestError: ``pool`` does not exist.
    """
    allowed = {o.index: o for o in pool_members(snapshot, pool)}
    seen: set[int] = set()
    for idx in osts:
        if idx in seen:
            raise PlacementCheckError(f"OST {idx} appears twice in {list(osts)}", idx)
        seen.add(idx)
        if idx not in allowed:
            raise PlacementCheckError(f"OST {idx} is not in pool {pool!r} or does not exist",
                                      idx)
        reason = unusable_reason(allowed[idx])
        if reason:
            raise PlacementCheckError(f"OST {idx} is unusable ({reason})", idx)
