"""What one MCMF round derives from the OSTs alone, kept per snapshot version: usable OSTs,
stragglers, candidate arrays with measured rates, the regime and the round's one cost model.

A flow round at thousands of OSTs cannot afford to redo this per request; a snapshot whose
``version`` has not moved reuses the last view. The request rounds and the planner read the
same view, so they price every OST with the same cost model (a planner solving with the configured model
while request rounds used the regime's priced them apart).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from lustre_alloc.mapper.flow.costs import STRAGGLERS_BY_RATE, CostModel
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.flow.stragglers import slowest_outliers, straggler_indices
from lustre_alloc.mapper.policies.mcmf.params import McmfParams
from lustre_alloc.mapper.policies.mcmf.regime import FLOW, Regime, RegimeThresholds, classify, failover_evidence
from lustre_alloc.mapper.state.arrays import OstArrays, OstTable, TableSync, ost_arrays
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import pool_members


@dataclass
class RoundView:
    """Per-snapshot-version state of a round.

    Attributes:
        key: ``(id(snapshot), version)``, or None for an unversioned snapshot.
        table: the snapshot's per-OST arrays.
        usable_count: usable OSTs.
        stragglers: OST indices left out of the round (:mod:`lustre_alloc.mapper.flow.stragglers`).
        candidates: usable, non-straggling OST indices (int64, ascending).
        base: their arrays, with smoothed rates and OSS link limits.
        cost: the cost model of every round on this view (planning and requests).
        regime: the regime (:mod:`lustre_alloc.mapper.policies.mcmf.regime`), None when switching is off.
        pools: per pool, (usable OSTs in it, mask over ``candidates``), filled lazily.
    """
    key: tuple[int, int] | None
    table: OstTable
    usable_count: int
    stragglers: set[int]
    candidates: np.ndarray
    base: OstArrays
    cost: CostModel
    regime: Regime | None = None
    pools: dict[str | None, tuple[int, np.ndarray]] = field(default_factory=dict)

    def pool(self, snapshot: ClusterSnapshot, pool: str | None) -> tuple[int, np.ndarray]:
        """(usable OSTs in the pool, mask over candidates).

        Raises:
            InvalidRequestError: an unknown pool (never cached).
        """
        hit = self.pools.get(pool)
        if hit is None:
            members = pool_members(snapshot, pool)
            if members is snapshot.osts:
                hit = (self.usable_count, np.ones(len(self.candidates), dtype=bool))
            else:
                idx = np.fromiter((o.index for o in members), dtype=np.int64, count=len(members))
                t = self.table
                hit = (int(np.count_nonzero(t.usable[idx] & t.present[idx])),
                       np.isin(self.candidates, idx))
            self.pools[pool] = hit
        return hit


class RoundViews:
    """Builds the :class:`RoundView` of a snapshot, reusing it while the version holds.

    Args:
        params: the policy's parameters (straggler rule, smoothing, regime).
        cost_model: the configured cost model; its ``straggler_rule`` picks the straggler
            test.
        space_cost_model: with ``params.regime``, the model of rounds while load is
            uniform but space is not (None: ``cost_model`` always).
        count: called with a statistic's name each time a view is classified.
    """

    def __init__(self, params: McmfParams, cost_model: CostModel,
                 space_cost_model: CostModel | None, count: Callable[[str], None]):
        self.params = params
        self.cost_model = cost_model
        self.space_cost_model = space_cost_model
        self.regime_thresholds = RegimeThresholds(**(params.regime_params or {}))
        self.rate_tracker = OstRateTracker(params.rate_smoothing,
                                           latency_smoothing=params.latency_smoothing,
                                           relax_s=params.rate_relax_s,
                                           busy_s=params.rate_busy_s,
                                           first_look_median=params.rate_first_look_median)
        self._count = count
        self._tables = TableSync()
        self._last: RoundView | None = None

    def view(self, snapshot: ClusterSnapshot) -> RoundView:
        """The view of ``snapshot`` (kept while ``snapshot.version`` says nothing changed;
        never kept for an unversioned snapshot). Vectorized over the snapshot's
        :class:`~lustre_alloc.mapper.state.arrays.OstTable`."""
        key = None if snapshot.version is None else (id(snapshot), snapshot.version)
        last = self._last
        if key is not None and last is not None and key == last.key:
            return last
        p = self.params
        table = self._tables.table(snapshot)
        usable = table.usable_indices()
        usable_set = set(usable.tolist())
        usable_osts = [o for o in snapshot.osts if o.index in usable_set]
        tracker = self.rate_tracker
        tracker.update(usable_osts)
        tracker.update_oss(usable_osts, snapshot.osses)
        if self.cost_model.straggler_rule == STRAGGLERS_BY_RATE:
            per_byte = 1.0 / tracker.rates(usable)
            stragglers = slowest_outliers(zip(per_byte.tolist(), usable.tolist()),
                                          p.straggler_factor, 0.0, p.straggler_max_fraction)
        else:
            stragglers = straggler_indices(usable, table.latency_s[usable],
                                           table.latency_known[usable], p.straggler_factor,
                                           p.straggler_min_excess_s, p.straggler_max_fraction)
        candidates = usable
        if stragglers:
            candidates = usable[~np.isin(usable, np.fromiter(stragglers, dtype=np.int64))]
        base = ost_arrays(table, candidates)
        if tracker.latency_smoothing < 1.0:
            base = replace(base, write_latency_s=tracker.latencies(base.index))
        write_back = tracker.write_back(base.index)
        if write_back.any() and base.write_latency_s is not None:
            # A write-back OST's sampled time per RPC is whichever fsync fell in the sample,
            # not a queue (RateCost's L_j): its window, fsyncs included, is its rate already
            # (rates.py _fold_write_back). Priced as load, one fsync in the last sample
            # sent the next files to the alike OSTs that had none (docs/lustre-vm.md).
            base = replace(base, write_latency_s=np.where(write_back, np.nan,
                                                          base.write_latency_s))
        oss_of = {o.index: o.oss for o in usable_osts}
        base = replace(base, rate_bytes_s=tracker.rates(base.index),
                       oss_limit_bytes_s=tracker.oss_limits([oss_of[int(i)] for i in base.index]),
                       degraded=table.degraded[candidates].astype(bool),
                       precreate_empty=~table.precreated[candidates].astype(bool),
                       extra_stripes=np.zeros(len(candidates)))
        regime = self._regime(snapshot, base, stragglers) if p.regime else None
        view = RoundView(key, table, len(usable), stragglers, candidates, base,
                         self._cost(regime), regime)
        self._last = view
        return view

    def invalidate(self) -> None:
        """Build the next view afresh even if the snapshot has not changed (the rate
        tracker was changed from outside a round)."""
        self._last = None

    def _regime(self, snapshot: ClusterSnapshot, base: OstArrays,
                stragglers: set[int]) -> Regime:
        if stragglers:
            # Uneven load by definition (and Lustre's RR would use them): no other
            # evidence needed.
            regime = Regime(FLOW, False, True)
        else:
            t, tracker = self.regime_thresholds, self.rate_tracker
            failed_over = failover_evidence(snapshot.osts, snapshot.osses)
            slow_look, slow_ost = tracker.slow_evidence(base.index, t.look_factor,
                                                        t.slowest_ratio)
            regime = classify(base, t, failed_over, slow_look, slow_ost)
        self._count(f"regime_{regime.mode}_load_{'uniform' if regime.load_uniform else 'uneven'}"
                    f"_space_{'in' if regime.space_in_band else 'out'}"
                    + ("_failed_over" if regime.failed_over else "")
                    + ("_slow_look" if regime.slow_look else "")
                    + ("_slow_ost" if regime.slow_ost else ""))
        return regime

    def _cost(self, regime: Regime | None) -> CostModel:
        """The one place the round's cost model is chosen."""
        if regime is not None and self.space_cost_model is not None and regime.load_uniform:
            return self.space_cost_model
        return self.cost_model
