"""Cost models of the placement flow network (Paul et al. 2017, Section III-C1, Fig. 10).

A cost model turns the cluster state of the candidate OSTs into integer arc costs; the
graph (:mod:`lustre_alloc.mapper.flow.network`) and the solver (:mod:`lustre_alloc.mapper.flow.solver`) do not
know what the costs mean (the Firmament split: cost model, graph, solver).

Two arc families carry costs:

* request -> OST (capacity 1): the load of the OST's OSS,
  ``alpha*CPU% + beta*Mem%`` plus the LNet term between the MDS and that OSS
  (Section III-C1; alpha = beta = 0.5 in the paper). The same for every request.
* OST -> sink: what one more stripe costs on that OST. A model gives a unit cost per
  *stripe slot* ``k = 0, 1, ...`` of the round (``unit_costs`` shape ``(N, K)``,
  non-decreasing along ``k``). ``K = 1`` means one arc whose unit cost is the same for
  every stripe (a linear cost).

Models: :class:`RateCost`, a stripe's expected completion time on each OST (the default and
the only one shipped). The paper's cost (used KiB, one linear arc per OST) and a convex cost of
fill and queue were measured and lost (docs/placement.md, "What was tried"); they live in
``bench/experiments/costs.py``, which registers them in :data:`COST_MODELS` for a study.

Integer scaling: percentages are multiplied by :data:`PERCENT_SCALE` before rounding,
so 0.01 percentage point is the cost resolution (OR-Tools needs integer costs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from lustre_alloc.mapper.state.arrays import OstArrays
from lustre_alloc.mapper.state.ost_health import enospc_reserve_bytes

PERCENT_SCALE = 100
"""Integer cost units per percentage point."""


TIME_UNIT_S = 1e-6
"""Seconds per integer cost unit of :class:`RateCost` (microseconds)."""
MAX_COST_UNITS = 10**12
"""Largest unit cost (10^6 s): keeps OR-Tools' scaled costs far from int64 overflow."""


STRAGGLERS_BY_LATENCY = "latency"
"""A cost model that prices space and queues, not time: a straggler is an OST whose brw_stats
RPC time is far above its peers' (:func:`lustre_alloc.mapper.flow.stragglers.straggler_indices`)."""
STRAGGLERS_BY_RATE = "rate"
"""A cost model that already prices each OST's current load in time: a straggler is an
OST whose measured *rate* is far off, not one that is merely busy now
(:func:`lustre_alloc.mapper.flow.stragglers.slowest_outliers` over seconds per byte)."""


class CostModel(Protocol):
    """Integer arc costs for one round, and the properties a policy needs to use them.

    Attributes:
        name: the model's name in configurations.
        time_unit_s: seconds per integer cost unit when the costs are times (None when
            they are points: percentages times :data:`PERCENT_SCALE`, or KiB).
        straggler_rule: :data:`STRAGGLERS_BY_LATENCY` or :data:`STRAGGLERS_BY_RATE`.
        has_oss_layer: the network gets OST -> OSS -> sink arcs priced by
            :meth:`oss_unit_costs`.
    """
    name: str
    time_unit_s: float | None
    straggler_rule: str
    has_oss_layer: bool

    def request_arc_costs(self, osts: OstArrays) -> np.ndarray:
        """Cost of request -> OST arcs, int64 shape (N,) (one per OST, same for every request)."""
        ...

    def unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float,
                   rows: np.ndarray | None = None) -> np.ndarray:
        """OST -> sink unit cost of stripe slot ``k``, int64 shape (len(rows), K) with
        ``K <= slots``, non-decreasing along axis 1; ``K == 1`` is a linear cost for every
        slot. ``rows`` selects OSTs (default all); normalisations still use all N."""
        ...

    def oss_unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float = 0.0) -> np.ndarray:
        """OSS slot ``k`` cost, int64 (n_oss, slots), non-decreasing along axis 1; only
        called when :attr:`has_oss_layer`."""
        ...


@dataclass(frozen=True)
class RateCost:
    """Rate-aware convex cost: a stripe's expected completion time on each OST.

    The OST ``j`` slot ``k`` (the round's ``k``-th stripe there) costs, in seconds::

        T_j(k) = b * (1 / r_j + w * (max(L_j / rpc, 1 / r_j) - 1 / r_j) + (p_j + k) / r_j)
                 +  band_j(k)  (+ D if degraded)

    * ``b``: the round's expected bytes per stripe; ``r_j``: the OST's smoothed measured
      write rate (:mod:`lustre_alloc.mapper.speed.rates`); ``L_j``: brw_stats mean write RPC time of
      ``rpc`` bytes. Under the processor sharing an OST gives its streams (the
      simulator's model; Lustre's NRS over RPCs approximates it), ``L_j / rpc`` is the
      time per byte a new stream sees behind the ``q_j = L_j r_j / rpc - 1`` streams
      already there: ``b L_j / rpc = (q_j b + b) / r_j``, i.e. (bytes queued ahead of
      this stripe + its own bytes) / rate, the queued bytes counted as far as they
      compete with it. Unmanaged jobs' streams are in ``L_j`` like ours.
    * ``w = load_weight`` (default 0.25): the part of that sampled load the cost trusts.
      The sample is up to one statistics interval old, a mean over the interval (streams
      that ended since count), and brw_stats bins RPC times in log2 buckets; a rule that
      trusts an old sample fully sends every create to the OSTs that looked least loaded
      at it (Mitzenmacher, "How Useful Is Old Information?", IEEE TPDS 2000). Measured
      (docs/history.md, "Trusting the sample in part"): 1 trails round-robin by 7.5% of
      the phase mean on the uniform ``scale-160``, 0.25 by 3.9%; 0 (load unseen) herds.
    * ``p_j``: stripes placed since the sample (and reserved by predicted lists): each
      adds ``b / r_j``, as does each earlier stripe of this round (``k``). So the slot
      costs rise by ``b / r_j`` per slot: convex, a round spreads (Firmament's parallel
      arcs for convex costs), faster OSTs take proportionally more.
    * ``band_j(k)``: space as a soft band, not a term that outweighs load: zero while the
      OST's used fraction after ``k + 1`` stripes stays within ``band_points`` percent
      over the mean (the balance metric is max/mean); beyond it ``band_weight`` times
      the time of one stripe on the median-rate OST per percent over. With the default
      0.01, an OST twice as full as the mean costs about one more queued stripe: a
      lightly loaded system fills its emptier OSTs first, a busy one uses every OST.
      The mean is floored at ``band_floor_fraction`` (an empty file system is not
      steered by noise). Space as a constraint is elsewhere: full (ENOSPC) OSTs
      are not candidates, and a slot whose expected bytes would take the OST below its
      ENOSPC watermark (:func:`enospc_reserve_bytes`) costs ``D`` more: used only when
      the round cannot be served otherwise (an announcement may never be written, so
      it never refuses a create Lustre would accept).
    * ``D = degraded_penalty_s``: a degraded (RAID rebuilding) OST is used only when the
      round cannot be served otherwise, as Lustre's allocators do; so is an OST on which
      the MDS had no precreated objects at its last sample (``precreate_empty``): LOD's
      round-robin and QOS first passes skip it (``lod_qos.c`` ``lod_check_and_reserve_ost()``:
      "skip OSPs with no objects ready"), while an explicit list makes the create wait for
      its precreation (``lod_alloc_ost_list()``): an OST whose precreation cannot keep up is
      slow or busy now.

    The OSS layer (OST -> OSS -> sink) charges the server's shared limit the same way:
    slot ``k`` of OSS ``s`` costs ``oss_weight * b * (Q_s + 1 + k) / R_s``, ``Q_s`` the
    streams on its OSTs (``sum q_j + p_j``) and ``R_s`` its limit: the sum of its OSTs'
    rates, capped by its link's measured limit (:meth:`lustre_alloc.mapper.speed.rates.OstRateTracker.update_oss`)
    and by ``oss_limit_bytes_s`` when given.

    Request -> OST arcs cost 0: OSS CPU and memory are consequences of the bytes already
    counted. The flow's total is then the round's total expected completion time, and
    its optimum is never worse than any other assignment of the same round, round-robin's
    included (``tests/mapper/test_rate_cost.py``).

    Sources: Paul et al. 2017, Section III-D (per-OST I/O time from brw_stats, slow OSTs);
    Firmament (Gog et al., OSDI 2016: convex costs as parallel arcs of rising cost);
    iez/Tarazu (Wadhwa et al.: load-aware redirection of new objects by measured server
    load).

    Args:
        rpc_bytes: bytes of the RPC ``L_j`` refers to.
        band_points: width of the band, percent over the mean used fraction.
        band_floor_fraction: smallest mean used fraction the band is relative to.
        band_weight: stripes' worth of time per percentage point past the band.
        degraded_penalty_s: seconds added to every slot of a degraded OST.
        oss_weight: weight of the OSS layer (0 disables it).
        oss_limit_bytes_s: an OSS's link limit, bytes/s (None: its OSTs' sum).
        link_share: cap each OST's rate at its share of its OSS's measured link limit.
        watermark_bytes: bytes kept free per OST beyond Lustre's own ENOSPC reserve
            (:func:`enospc_reserve_bytes`).
        load_weight: the part ``w`` of the sampled load above idle the cost counts, in
            [0, 1] (above).
    Raises (on construction):
        ValueError: ``load_weight`` outside [0, 1].
    """
    rpc_bytes: float = 1 << 20
    band_points: float = 5.0
    band_weight: float = 0.01
    band_floor_fraction: float = 0.001
    degraded_penalty_s: float = 1e4
    oss_weight: float = 1.0
    oss_limit_bytes_s: float | None = None
    watermark_bytes: float = 0.0
    link_share: bool = True
    load_weight: float = 0.25
    name: str = "rate"
    time_unit_s = TIME_UNIT_S
    straggler_rule = STRAGGLERS_BY_RATE
    has_oss_layer = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.load_weight <= 1.0:
            raise ValueError(f"load_weight must be in [0, 1], got {self.load_weight!r}")

    def request_arc_costs(self, osts: OstArrays) -> np.ndarray:
        return np.zeros(len(osts.index), dtype=np.int64)

    def _rates(self, osts: OstArrays) -> np.ndarray:
        if osts.rate_bytes_s is None:
            from lustre_alloc.mapper.speed.rates import DEFAULT_RATE_BYTES_S
            rate = np.full(len(osts.index), DEFAULT_RATE_BYTES_S)
        else:
            rate = np.maximum(osts.rate_bytes_s.astype(float), 1.0)
        if self.link_share and osts.oss_limit_bytes_s is not None and len(rate):
            # An OST delivers no more than its share of its OSS's link when all the
            # server's OSTs are busy: min(r_j, R_link / n_s).
            n_s = np.bincount(osts.oss)[osts.oss]
            share = osts.oss_limit_bytes_s.astype(float) / np.maximum(n_s, 1)
            rate = np.minimum(rate, np.where(np.isfinite(share), share, np.inf))
        return rate

    def _per_byte_now(self, osts: OstArrays, rate: np.ndarray) -> np.ndarray:
        """Seconds per byte a new stream sees now, (N,)."""
        base = 1.0 / rate
        if osts.write_latency_s is None:
            return base
        lat = osts.write_latency_s.astype(float)
        ok = np.isfinite(lat) & (lat > 0)
        sampled = np.where(ok, np.maximum(np.where(ok, lat, 0.0) / self.rpc_bytes, base), base)
        # The sample is up to one interval old and a log2-bucketed interval mean: trusted
        # in part, so the flow does not pile onto the OSTs that looked idle at it.
        return base + self.load_weight * (sampled - base)

    def _extra(self, osts: OstArrays) -> np.ndarray:
        if osts.extra_stripes is None:
            return np.zeros(len(osts.index))
        return osts.extra_stripes.astype(float)

    def completion_s(self, osts: OstArrays, slots: int, bytes_per_stripe: float,
                     rows: np.ndarray | None = None) -> np.ndarray:
        """``T_j(k)`` in seconds, float (len(rows), slots) (see the class docstring)."""
        k = np.arange(max(1, slots), dtype=float)
        b = max(float(bytes_per_stripe), 1.0)
        rate = self._rates(osts)
        now = self._per_byte_now(osts, rate)
        extra = self._extra(osts)
        fill0 = osts.used_fraction
        mean_fill = float(fill0.mean()) if len(fill0) else 0.0
        stripe_s = b / float(np.median(rate)) if len(rate) else 0.0
        total = np.maximum(osts.kbytes_total.astype(float) * 1024, 1.0)
        degraded = (osts.degraded if osts.degraded is not None
                    else np.zeros(len(osts.index), dtype=bool))
        if osts.precreate_empty is not None:
            degraded = degraded | osts.precreate_empty
        if rows is not None:
            rate, now, extra, fill0, total, degraded = (rate[rows], now[rows], extra[rows],
                                                        fill0[rows], total[rows], degraded[rows])
        t = b * (now[:, None] + (extra[:, None] + k[None, :]) / rate[:, None])
        fill = fill0[:, None] + (b / total)[:, None] * (k[None, :] + 1.0)
        ref = max(mean_fill, self.band_floor_fraction)
        over = np.maximum(0.0, (fill / ref - 1.0) * 100.0 - self.band_points)
        t = t + self.band_weight * stripe_s * over
        # Past the ENOSPC watermark: allowed only when nothing else can serve the round
        # (an announcement may never be written; refusing it would refuse a create
        # Lustre accepts), then at the price of a degraded OST.
        avail = osts.kbytes_avail.astype(float) * 1024.0
        room = avail - enospc_reserve_bytes(osts.kbytes_total) - self.watermark_bytes
        if rows is not None:
            room = room[rows]
        past = b * (k[None, :] + 1.0) > room[:, None]
        t = t + np.where(past, self.degraded_penalty_s, 0.0)
        return t + np.where(degraded, self.degraded_penalty_s, 0.0)[:, None]

    def unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float,
                   rows: np.ndarray | None = None) -> np.ndarray:
        t = self.completion_s(osts, slots, bytes_per_stripe, rows)
        return np.minimum(np.rint(t / TIME_UNIT_S), MAX_COST_UNITS).astype(np.int64)

    def oss_completion_s(self, osts: OstArrays, slots: int, bytes_per_stripe: float) -> np.ndarray:
        """OSS slot ``k`` time, seconds, float (n_oss, slots) (class docstring)."""
        n_oss = int(osts.oss.max()) + 1
        b = max(float(bytes_per_stripe), 1.0)
        rate = self._rates(osts)
        queued = np.maximum(self._per_byte_now(osts, rate) * rate - 1.0, 0.0) + self._extra(osts)
        q_s = np.bincount(osts.oss, queued, minlength=n_oss)
        r_s = np.bincount(osts.oss, rate, minlength=n_oss)
        if osts.oss_limit_bytes_s is not None:
            limit = np.full(n_oss, np.inf)
            np.minimum.at(limit, osts.oss, osts.oss_limit_bytes_s.astype(float))
            r_s = np.minimum(r_s, limit)
        if self.oss_limit_bytes_s is not None:
            r_s = np.minimum(r_s, self.oss_limit_bytes_s)
        r_s = np.maximum(r_s, 1.0)
        k = np.arange(max(1, slots), dtype=float)
        return self.oss_weight * b * (q_s[:, None] + 1.0 + k[None, :]) / r_s[:, None]

    def oss_unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float = 0.0) -> np.ndarray:
        t = self.oss_completion_s(osts, slots, bytes_per_stripe)
        return np.minimum(np.rint(t / TIME_UNIT_S), MAX_COST_UNITS).astype(np.int64)


COST_MODELS: dict[str, type] = {"rate": RateCost}
"""Cost model name -> class: ``rate``; a study may register its own (``bench/experiments``)."""


def make_cost_model(name: str, **params: float) -> CostModel:
    """A cost model by name (``rate``, or one a study registered in :data:`COST_MODELS`).

    Raises:
        ValueError: unknown name or parameter.
    """
    try:
        cls = COST_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown cost model {name!r}; known: {', '.join(COST_MODELS)}") from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(f"cost model {name!r}: {exc}") from None
