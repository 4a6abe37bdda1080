"""Per-snapshot-version memo of what a request's pool resolves to.

Lustre's RR allocator costs O(stripe count) per file: the pool's member array and its
usable count are kept in the LOD device and rebuilt only when targets change
(``lod_qos_rr`` ``lqr_dirty``). The restated policies get the same from this memo: a
producer that bumps ``ClusterSnapshot.version`` on every change of the OSTs lets it keep
(members, usable count) per pool until the version moves; an unversioned snapshot is
resolved afresh every call (the objects may have changed).
"""
from __future__ import annotations

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstState
from lustre_alloc.mapper.state.ost_health import is_usable, members_and_stripe_count, pool_members


def version_key(snapshot: ClusterSnapshot) -> tuple[int, int] | None:
    """``(id, version)`` of a versioned snapshot; None when it promises nothing."""
    return None if snapshot.version is None else (id(snapshot), snapshot.version)


class PoolCache:
    """(members in LOD order, usable count) per pool, kept per snapshot version."""

    def __init__(self) -> None:
        self._key: tuple[int, int] | None = None
        self._pools: dict[str | None, tuple[list[OstState], int]] = {}

    def resolve(self, snapshot: ClusterSnapshot, pool: str | None) -> tuple[list[OstState], int]:
        """:func:`~lustre_alloc.mapper.state.ost_health.pool_members` of ``pool`` and how many of them
        are usable. Raises InvalidRequestError for an unknown pool (never cached)."""
        key = version_key(snapshot)
        if key is None or key != self._key:
            self._pools.clear()
            self._key = key
        hit = self._pools.get(pool)
        if hit is None:
            members = pool_members(snapshot, pool)
            hit = (members, sum(1 for o in members if is_usable(o)))
            if key is not None:
                self._pools[pool] = hit
        return hit

    def members_and_stripe_count(self, snapshot: ClusterSnapshot, pool: str | None,
                                 requested: int) -> tuple[list[OstState], int]:
        """:func:`~lustre_alloc.mapper.state.ost_health.members_and_stripe_count` from the memo.

        Raises:
            NoSpaceError: no OST of the pool is usable.
            InvalidRequestError: unknown pool, or ``requested`` out of range.
        """
        return members_and_stripe_count(snapshot, pool, requested,
                                        resolved=self.resolve(snapshot, pool))
