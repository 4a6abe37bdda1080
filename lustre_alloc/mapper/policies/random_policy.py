"""The paper's weighted random allocator (Paul et al. 2017, Section IV-B).

"Our random allocation model picks a random OST from a subset of the OSTs whose ratio
of available space to total disk space is greater than 0.4." Each stripe is drawn
uniformly, without replacement, from the usable OSTs of the pool whose
``kbytesavail / kbytestotal > 0.4``. The paper is silent on what happens when fewer
OSTs qualify than stripes are wanted; we then fill the remaining stripes uniformly
from the other usable OSTs (a file still gets its stripe count, as with Lustre's
allocators), and note it in the placement.
"""
from __future__ import annotations

import random

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import is_usable, pool_members, resolve_stripe_count
from lustre_alloc.mapper.policies.placement import CreateRequest, NoSpaceError, Placement

AVAIL_RATIO_MIN = 0.4
"""Eligibility threshold on ``kbytesavail / kbytestotal`` (Section IV-B)."""


class WeightedRandom:
    """Uniform choice among OSTs with more than 40% available space.

    Args:
        seed: generator seed (simulator runs are reproducible).
        avail_ratio_min: eligibility threshold (default 0.4, the paper's).
    """
    name = "random"

    def __init__(self, seed: int = 0, avail_ratio_min: float = AVAIL_RATIO_MIN):
        self._rng = random.Random(seed)
        self.avail_ratio_min = avail_ratio_min

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """Raises NoSpaceError when no OST of the pool is usable."""
        usable = [o for o in pool_members(snapshot, request.pool) if is_usable(o)]
        count = resolve_stripe_count(request.stripe_count, len(usable))
        if count == 0:
            raise NoSpaceError("no usable OST")
        eligible = [o.index for o in usable
                    if o.kbytes_total > 0 and o.kbytes_avail / o.kbytes_total > self.avail_ratio_min]
        if len(eligible) >= count:
            return Placement(tuple(self._rng.sample(eligible, count)), self.name)
        chosen = list(eligible)
        self._rng.shuffle(chosen)
        rest = [o.index for o in usable if o.index not in set(eligible)]
        chosen += self._rng.sample(rest, count - len(chosen))
        return Placement(tuple(chosen), self.name,
                         note=f"only {len(eligible)} OSTs above {self.avail_ratio_min:.0%} available")
