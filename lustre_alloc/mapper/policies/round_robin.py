"""Lustre's round-robin OST allocator (``lod_ost_alloc_rr``), restated exactly.

Source: Lustre lod_qos.c (``lod_ost_alloc_rr``) and lu_tgt_descs.c/lod_pool.c
(``lod_qos_calc_rr``: building the RR array), tags 2.12..2.16; restated in
``docs/reference/lustre-lod-allocator.md`` ("RR"). No Lustre code is copied.

The RR array interleaves OSTs across OSSes: OSSes are taken in order of descending
OST count (ties keep the order their OSTs connected), and the j-th OST of an OSS with
``c`` OSTs goes to slot ``j*N/c`` of the ``N``-slot array, probing forward to the next
empty slot. With OSS A={0,1,2,3} and B={4,5,6,7} the array is 0,4,1,5,2,6,3,7.

Each allocation walks the array from ``start_idx + offset_idx``:

* ``start_count`` counts allocations down; at zero, ``start_idx`` is re-seeded to a
  uniform random slot and ``start_count = (LOV_CREATE_RESEED_MIN / N +
  LOV_CREATE_RESEED_MULT) * N`` with ``LOV_CREATE_RESEED_MIN = 2000`` and
  ``LOV_CREATE_RESEED_MULT = 30`` (lustre_lov.h / lod_internal.h).
* Otherwise, when ``start_idx > N`` or the stripe count is ``>= N``, ``start_idx``
  wraps (``start_idx %= N``), and when the stripe count is > 1 and ``N % count != 1``
  the ``offset_idx`` advances by one so that successive files do not keep starting on
  the same OSTs. (The reference notes write ``start_idx >= N: start_idx -= N``;
  lod_qos.c 2.4..2.15 test ``start_idx > N``, which matters when a call starts at
  exactly ``N``.)
* Three passes (``speed`` 0, 1, 2) relax the filters: pass 0 needs precreated
  objects and skips DEGRADED OSTs, pass 1 still skips DEGRADED ones, pass 2 takes any
  usable OST. Unusable OSTs (:mod:`lustre_alloc.mapper.state.ost_health`) and duplicates are never taken.
  Each pass starts again from the ``start_idx`` the call began with, so ``start_idx``
  ends a call advanced only by the slots the last pass read.
* The slot is computed before ``start_idx`` is incremented, as in lod_qos.c since
  2.12 (the reference notes write the increment first; the code reads the slot first).

Success if at least one stripe was found (the file silently gets fewer stripes, as
Lustre does); ENOSPC (:class:`~lustre_alloc.mapper.policies.placement.NoSpaceError`) if none.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import cast

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstFlag, OstState, osts_by_oss
from lustre_alloc.mapper.state.ost_health import is_usable
from lustre_alloc.mapper.policies.placement import CreateRequest, NoSpaceError, Placement
from lustre_alloc.mapper.policies.pool_cache import PoolCache, version_key

LOV_CREATE_RESEED_MIN = 2000
LOV_CREATE_RESEED_MULT = 30
NEVER = 3
"""Pass level of a slot no pass takes (see :attr:`RoundRobinState.levels`)."""


def slot_levels(array: list[int | None], members: dict[int, OstState]) -> list[int]:
    """:attr:`RoundRobinState.levels` of ``array``: the first pass (``speed``) whose
    filters let each slot's OST through."""
    levels = []
    for idx in array:
        ost = None if idx is None else members.get(idx)
        if ost is None or not is_usable(ost):
            levels.append(NEVER)
        elif ost.flags & OstFlag.DEGRADED:
            levels.append(2)        # only the last pass takes a DEGRADED OST
        elif ost.files_precreated == 0:
            levels.append(1)        # the first pass needs precreated objects
        else:
            levels.append(0)
    return levels


def build_rr_array(members: list[OstState], server_ost_count: dict[str, int],
                   server_order: list[str]) -> list[int | None]:
    """The RR slot array for ``members`` (pool members, or all OSTs).

    Args:
        members: OSTs in LOD array order.
        server_ost_count: OSS -> number of OSTs it serves in the whole file system
            (``lsq_tgt_count``: all its OSTs, not only pool members).
        server_order: OSS names in the order they first connected.
    Returns:
        ``N = len(members)`` slots holding OST indices (None = empty slot).
    """
    n = len(members)
    slots: list[int | None] = [None] * n
    # Stable sort: ties keep connection order.
    servers = sorted(server_order, key=lambda s: -server_ost_count[s])
    by_server: dict[str, list[OstState]] = {}
    for ost in members:
        by_server.setdefault(ost.oss, []).append(ost)
    # "Probe forward to the next empty slot" through a next-free-slot forest (path
    # halving): the same slots as probing one by one, in near O(N) instead of
    # O(N x OSSes) (0.5 s of Python at 3600 OSTs / 450 OSSes, paid by the first request).
    free = list(range(n))

    def next_free(p: int) -> int:
        while free[p] != p:
            free[p] = free[free[p]]
            p = free[p]
        return p
    for server in servers:
        for j, ost in enumerate(by_server.get(server, ())):
            pos = next_free(j * n // server_ost_count[server])
            slots[pos] = ost.index
            free[pos] = (pos + 1) % n      # a free slot remains while members remain
    return slots


@dataclass
class RoundRobinState:
    """Per-pool RR state (``lod_qos_rr`` / ``lu_qos_rr``)."""
    key: tuple
    array: list[int | None]
    start_idx: int = 0
    start_count: int = 0
    offset_idx: int = 0
    members: dict[int, OstState] = field(default_factory=dict)
    view_key: tuple[int, int] | None = None   # snapshot version the key was checked at
    levels: list[int] = field(default_factory=list)
    """Per slot, the first pass that may take its OST: 0 (precreated objects, not
    DEGRADED), 1 (none precreated), 2 (DEGRADED), :data:`NEVER` (empty slot, unusable OST);
    derived with ``members`` at the snapshot version they were read at."""
    all_ready: bool = False
    """Every slot holds an OST the first pass takes: a call takes ``count`` consecutive
    slots (the common case, O(stripe count) with no per-slot test)."""


class RoundRobin:
    """Lustre's RR allocator as a :class:`~lustre_alloc.mapper.policies.placement.PlacementPolicy`.

    Args:
        seed: seed of the generator used for ``start_idx`` re-seeding (Lustre uses
            ``prandom_u32_max``); fixed seeds make simulator runs reproducible.
    """
    name = "round_robin"

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._pools: dict[str | None, RoundRobinState] = {}
        self.pool_cache = PoolCache()
        self._memo: dict[tuple[str | None, int], tuple[RoundRobinState, int]] = {}
        """(pool, requested stripe count) -> (RR state, resolved count) at ``_memo_view``."""
        self._memo_view: tuple[int, int] | None = None

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """Allocate ``request``; raises NoSpaceError when no OST is usable.

        O(stripe count) on a versioned snapshot whose version did not move (the pool's
        members, usable count and RR array are kept, as LOD keeps them); O(OSTs) when
        it moved or the snapshot is unversioned."""
        return Placement(tuple(self.pick(snapshot, request)), self.name)

    def pick(self, snapshot: ClusterSnapshot, request: CreateRequest) -> list[int]:
        """The OST list :meth:`allocate` places ``request`` on (same errors).

        At an unchanged snapshot version, a request of a (pool, stripe count) seen before
        goes straight to the walk: its members, stripe count and RR state are kept."""
        view = version_key(snapshot)
        if view is not None and view == self._memo_view:
            hit = self._memo.get((request.pool, request.stripe_count))
            if hit is not None:
                return self._walk(hit[0], hit[1])
        members, count = self.pool_cache.members_and_stripe_count(snapshot, request.pool,
                                                                  request.stripe_count)
        st = self._state_for(snapshot, members, request.pool)
        if view is not None:
            if view != self._memo_view:
                self._memo.clear()
                self._memo_view = view
            self._memo[(request.pool, request.stripe_count)] = (st, count)
        return self._walk(st, count)

    def order(self, snapshot: ClusterSnapshot, members: list[OstState],
              pool: str | None) -> list[int]:
        """The pool's OSTs in LOD's RR array order (interleaved across OSSes), from the
        state this allocator keeps (rebuilt only when the members or the OSS map change)."""
        return [i for i in self._state_for(snapshot, members, pool).array if i is not None]

    def prepare(self, snapshot: ClusterSnapshot) -> None:
        """Build the RR state of the file system and of each pool (LOD builds its RR array
        at the first create after a change, ``lod_qos.c`` ``lod_qos_calc_rr``); the cursors
        do not move."""
        for pool in (None, *snapshot.pools):
            members, _ = self.pool_cache.resolve(snapshot, pool)
            self._state_for(snapshot, members, pool)

    def state(self, pool: str | None = None) -> RoundRobinState | None:
        """The RR state of ``pool`` (for tests and diagnostics)."""
        return self._pools.get(pool)

    def _state_for(self, snapshot: ClusterSnapshot, members: list[OstState],
                   pool: str | None) -> RoundRobinState:
        if pool is not None and not snapshot.pools.get(pool):
            # lod_find_pool() returns NULL for an empty pool: the file system's own
            # RR state is used, as for a request without a pool.
            pool = None
        st = self._pools.get(pool)
        view_key = version_key(snapshot)
        if st is not None and view_key is not None and st.view_key == view_key:
            return st           # nothing changed since the last check: O(1)
        # rr_dirty: rebuild when the member list or any OST's OSS changes. Every OST
        # counts, not only members: the spacing divides by each OSS's total OST count.
        key = (tuple(o.index for o in members), tuple((o.index, o.oss) for o in snapshot.osts))
        if st is None or st.key != key:
            groups = osts_by_oss(snapshot.osts)
            counts = {s: len(v) for s, v in groups.items()}
            array = build_rr_array(members, counts, list(groups))
            old = st
            st = RoundRobinState(key=key, array=array)
            if old is not None:  # Lustre keeps the counters across a rebuild
                st.start_idx, st.start_count, st.offset_idx = (
                    old.start_idx, old.start_count, old.offset_idx)
            self._pools[pool] = st
        st.members = {o.index: o for o in members}
        st.levels = slot_levels(st.array, st.members)
        st.all_ready = bool(st.levels) and not any(st.levels)
        st.view_key = view_key
        return st

    def select(self, snapshot: ClusterSnapshot, members: list[OstState],
               pool: str | None, count: int) -> list[int]:
        """Walk the RR array for ``count`` stripes (``count`` already resolved).

        Also used by :class:`~lustre_alloc.mapper.policies.lustre_qos.LustreQos` when QOS declines.
        Raises NoSpaceError when no stripe at all could be found.
        """
        return self._walk(self._state_for(snapshot, members, pool), count)

    def _walk(self, st: RoundRobinState, count: int) -> list[int]:
        n = len(st.array)
        st.start_count -= 1
        if st.start_count <= 0:
            st.start_idx = self._rng.randrange(n)
            st.start_count = (LOV_CREATE_RESEED_MIN // n + LOV_CREATE_RESEED_MULT) * n
        elif count >= n or st.start_idx > n:
            # lod_qos.c: "stripe_count_min >= N || start_idx > N" (strictly greater:
            # a call starting at start_idx == N reads slot (N + offset) % N unwrapped).
            st.start_idx %= n
            if count > 1 and n % count != 1:
                st.offset_idx += 1
        call_start = st.start_idx
        array = st.array
        if st.all_ready and 0 < count <= n:
            # Every slot passes the first pass's filters and holds a distinct OST: the
            # walk below would take the next ``count`` slots and stop.
            first = (call_start + st.offset_idx) % n
            st.start_idx = call_start + count
            if first + count <= n:
                return cast("list[int]", array[first:first + count])
            return cast("list[int]", array[first:] + array[:first + count - n])
        levels = st.levels
        offset = st.offset_idx
        chosen: list[int] = []
        taken: set[int] = set()
        for speed in range(3):
            # Every pass restarts from the slot the call began at (lod_qos.c resets
            # lqr_start_idx to the value saved before the first pass); start_idx
            # advances by every slot read.
            read = 0
            while read < n and len(chosen) < count:
                pos = (call_start + read + offset) % n
                read += 1
                if levels[pos] > speed:
                    continue            # empty, unusable, or filtered out in this pass
                idx = cast(int, array[pos])
                if idx in taken:
                    continue
                chosen.append(idx)
                taken.add(idx)
            st.start_idx = call_start + read
            if len(chosen) >= count:
                break
        if not chosen:
            raise NoSpaceError("round-robin found no usable OST")
        return chosen
