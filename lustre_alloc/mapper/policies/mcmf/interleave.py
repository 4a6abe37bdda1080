"""Capability-weighted interleaving: Lustre's round-robin when the OSTs look alike, each
OST's share of new stripes in proportion to its estimated speed when they do not, and
believed stragglers kept to a small exploration share.

Why not a greedy per-round optimum over the last sample: with 5 s-old load samples every
round piles onto the OSTs that looked idle at the sample (Mitzenmacher, "How Useful Is Old
Information?", IEEE TPDS 2000). What persists is speed: an OST that was slow on its own
RPCs stays slow (a straggler, a failed-over OST, a slow drive) until evidence says
otherwise, and new objects should go to each OST in proportion to what it delivers
(MemEFS: capacities proportional to measured bandwidth).

The rule, per create, over the usable OSTs of the pool (``c_j``: estimated write speed,
:class:`lustre_alloc.mapper.speed.rates.OstRateTracker`, with memory and relaxation; ``m``: their median):

* every ``c_j`` within ``tolerance`` of ``m``: exactly Lustre's round-robin
  (:class:`lustre_alloc.mapper.policies.round_robin.RoundRobin`, its own state and seed);
* else smooth weighted round-robin (nginx's SWRR: each OST accrues ``c_j / m`` per pick,
  the largest accrued is taken and pays the total) over Lustre's RR array order, so equal
  weights walk that order and an OST of half the speed gets half the stripes;
* an OST with ``c_j < m / straggler_factor`` is a straggler: it takes no stripe except an
  exploration stripe once per ``1 / explore_share`` creates, so that its recovery shows in
  its own RPC times (then its estimate rises at once and it rejoins).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.policies.round_robin import RoundRobin
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import is_usable, pool_members, resolve_stripe_count

EQUAL_TOLERANCE = 0.25
"""Speeds within this fraction of the median count as equal (ours: brw_stats' log2 buckets
cannot tell closer speeds apart)."""
EXPLORE_SHARE = 0.01
"""Share of creates that put one stripe on a believed straggler (ours; measured cost in
docs/placement.md)."""


class CapabilityInterleave:
    """The rule of the module docstring.

    Args:
        seed: the round-robin's seed.
        tolerance: speeds within this fraction of the median are equal.
        straggler_factor: an OST this many times slower than the median is a straggler.
        explore_share: share of creates that explore a straggler (0: never).
    """

    def __init__(self, seed: int = 0, tolerance: float = EQUAL_TOLERANCE,
                 straggler_factor: float = 3.0, explore_share: float = EXPLORE_SHARE):
        if not 0 <= tolerance < 1 or straggler_factor <= 1 or not 0 <= explore_share <= 1:
            raise ValueError("tolerance in [0, 1), straggler_factor > 1, explore_share in [0, 1]")
        self.rr = RoundRobin(seed=seed)
        self.tolerance = tolerance
        self.straggler_factor = straggler_factor
        self.explore_share = explore_share
        self.accrued: dict[int, float] = {}
        self.explore_credit = 0.0
        self.stats = {"round_robin": 0, "weighted": 0, "explored": 0}

    def pick(self, snapshot: ClusterSnapshot, request: CreateRequest,
             speed: dict[int, float]) -> list[int]:
        """The OST indices for ``request`` in stripe order; ``speed``: OST index ->
        estimated write speed, bytes/s (usable OSTs).

        Raises:
            NoSpaceError, InvalidRequestError: as Lustre's allocators.
        """
        members = pool_members(snapshot, request.pool)
        usable = [o for o in members if is_usable(o)]
        count = resolve_stripe_count(request.stripe_count, len(usable))
        c = np.array([speed.get(o.index, np.nan) for o in usable], dtype=float)
        known = np.isfinite(c) & (c > 0)
        if count == 0 or not known.any():
            return self._round_robin(snapshot, request)
        med = float(np.median(c[known]))
        rel = np.where(known, c / med, 1.0)            # no evidence: like the others
        if np.all(np.abs(rel - 1.0) <= self.tolerance):
            return self._round_robin(snapshot, request)
        self.stats["weighted"] += 1
        order = self.rr.order(snapshot, members, request.pool)
        weight = {o.index: float(w) for o, w in zip(usable, rel)}
        slow = {i for i, w in weight.items() if w < 1.0 / self.straggler_factor}
        fast = [i for i in order if i in weight and i not in slow]
        explore = 0
        if slow and self.explore_share > 0:
            self.explore_credit += self.explore_share
            if self.explore_credit >= 1.0:
                self.explore_credit -= 1.0
                explore = 1
        want_fast = min(count - explore, len(fast))
        chosen = self._swrr(fast, weight, want_fast)
        rest = count - len(chosen)
        if rest > 0:              # exploration, or too few fast OSTs for the stripe count
            slow_order = [i for i in order if i in slow]
            picked = self._swrr(slow_order, weight, rest)
            self.stats["explored"] += len(picked) if explore else 0
            chosen += picked
        return chosen

    def _round_robin(self, snapshot: ClusterSnapshot, request: CreateRequest) -> list[int]:
        self.stats["round_robin"] += 1
        return self.rr.pick(snapshot, request)

    def _swrr(self, candidates: Sequence[int], weight: dict[int, float], k: int) -> list[int]:
        """``k`` distinct OSTs by smooth weighted round-robin over ``candidates`` (in RR
        array order: equal weights walk it)."""
        chosen: list[int] = []
        if k <= 0 or not candidates:
            return chosen
        acc = self.accrued
        total = sum(weight[i] for i in candidates)
        for i in candidates:
            acc.setdefault(i, 0.0)
        for _ in range(min(k, len(candidates))):
            for i in candidates:
                acc[i] += weight[i]
            best = max((i for i in candidates if i not in chosen), key=lambda i: acc[i])
            acc[best] -= total
            chosen.append(best)
        return chosen
