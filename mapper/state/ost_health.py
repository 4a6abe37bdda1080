"""Which OSTs may receive a new object, and how many stripes a request gets.

The rules restate Lustre's LOD usability check and stripe-count resolution
(lod_qos.c ``lod_statfs_and_check`` / ``lod_qos_prep_create``; restated in
``docs/reference/lustre-lod-allocator.md``, "USABLE CHECK" and "DISPATCH"). Every
policy, ours included, applies them: the MDS rejects an explicit OST list that names an
unusable OST, so the mapper must never return one.
"""
from __future__ import annotations

from typing import Sequence

from mapper.state.cluster_state import ClusterSnapshot, OstFlag, OstState
from mapper.policies.placement import InvalidRequestError

MAX_STRIPE_COUNT = 2000
"""``LOV_MAX_STRIPE_COUNT`` (lustre_idl.h)."""


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
    if requested < -1 or requested > MAX_STRIPE_COUNT:
        raise InvalidRequestError(
            f"stripe count {requested} outside -1..{MAX_STRIPE_COUNT}")
    if requested == -1:
        count = usable
    elif requested == 0:
        count = 1
    else:
        count = requested
    return max(0, min(count, usable, MAX_STRIPE_COUNT))


def check_placement(snapshot: ClusterSnapshot, osts: Sequence[int], pool: str | None) -> None:
    """Assert the invariants every policy guarantees; raises AssertionError naming the
    first violation (duplicate, unknown, unusable or out-of-pool OST). For tests and
    for the mapper's last line of defence before a reply."""
    allowed = {o.index: o for o in pool_members(snapshot, pool)}
    seen: set[int] = set()
    for idx in osts:
        if idx in seen:
            raise AssertionError(f"OST {idx} appears twice in {list(osts)}")
        seen.add(idx)
        if idx not in allowed:
            raise AssertionError(f"OST {idx} is not in pool {pool!r} or does not exist")
        reason = unusable_reason(allowed[idx])
        if reason:
            raise AssertionError(f"OST {idx} is unusable ({reason})")
