"""What this mapper placed that the statistics do not show yet, in one place: the pending
per-OST load (:class:`lustre_alloc.mapper.state.pending.PendingOverlay`) and, when ``app_weight`` is
set, each application's recent stripes per OST (the per-application spreading term).

Between statistics samples the mapper would otherwise decide every round from the same
numbers and pile stripes on the OSTs that looked best 5 s ago; every list it hands out
(flow round, plan queue, kept prediction, round-robin regime) is booked here.

The spreading term: ``app_weight`` points per stripe an application received on an OST
recently (decaying with ``app_half_life_s``), added to its request arcs, so that its
files spread over OSTs the way round-robin spreads them (files that keep growing after
their creation, appends, do not pile up).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.flow.costs import PERCENT_SCALE
from lustre_alloc.mapper.state.arrays import OstArrays, OstTable
from lustre_alloc.mapper.state.pending import PendingOverlay


@dataclass(slots=True)
class AppStripes:
    """Stripes one application received recently, per OST index, decayed up to
    ``as_of_s`` (seconds on the pending clock)."""
    as_of_s: float
    per_ost: dict[int, float] = field(default_factory=dict)


class PlacedBooks:
    """The pending overlay and the per-application stripe counts.

    Args:
        pending: the overlay shared with the kept lists and the plan queues.
        app_weight: points per recent stripe of the application on an OST (0: off).
        app_half_life_s: decay of those counts, s.
        max_apps: applications remembered, at most.
    """

    def __init__(self, pending: PendingOverlay, app_weight: float, app_half_life_s: float,
                 max_apps: int):
        self.pending = pending
        self.app_weight = app_weight
        self.app_half_life_s = app_half_life_s
        self.max_apps = max_apps
        self.app_stripes: OrderedDict[str, AppStripes] = OrderedDict()

    def book(self, osts: Sequence[int], bytes_per_stripe: float, jobid: str,
             table: OstTable) -> None:
        """A list handed out: ``bytes_per_stripe`` bytes now pending on each of ``osts``."""
        if self.app_weight:
            app = self.app_stripes.get(jobid)
            if app is None:
                app = self.app_stripes[jobid] = AppStripes(self.pending.time_s)
            placed = app.per_ost
            self.app_stripes.move_to_end(jobid)
            for i in osts:
                placed[i] = placed.get(i, 0.0) + 1.0
            while len(self.app_stripes) > self.max_apps:
                self.app_stripes.popitem(last=False)
        self.pending.add(osts, bytes_per_stripe, table)

    def unbook(self, osts: Sequence[int], bytes_per_stripe: float) -> None:
        """A booked list that was never used (a lease returned or expired): its pending
        load comes off (the per-application counts decay on their own)."""
        self.pending.remove(osts, bytes_per_stripe)

    def app_costs(self, jobid: str, osts: OstArrays, unit: float = PERCENT_SCALE) -> np.ndarray | None:
        """The spreading term of ``jobid``'s request arcs, int64 (N,) in cost units
        (``unit`` per point), or None when off or the application has no stripes."""
        app = self.app_stripes.get(jobid)
        if app is None or self.app_weight == 0:
            return None
        placed = app.per_ost
        factor = 0.5 ** ((self.pending.time_s - app.as_of_s) / self.app_half_life_s)
        for k in placed:
            placed[k] *= factor
        app.as_of_s = self.pending.time_s
        counts = np.array([placed.get(int(i), 0.0) for i in osts.index])
        return np.rint(self.app_weight * counts * unit).astype(np.int64)
