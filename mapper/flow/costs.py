"""Cost models of the placement flow network (Paul et al. 2017, Section III-C1, Fig. 10).

A cost model turns the cluster state of the candidate OSTs into integer arc costs; the
graph (:mod:`mapper.flow.network`) and the solver (:mod:`mapper.flow.solver`) do not
know what the costs mean (the Firmament split: cost model, graph, solver).

Two arc families carry costs:

* request -> OST (capacity 1): the load of the OST's OSS,
  ``alpha*CPU% + beta*Mem%`` plus the LNet term between the MDS and that OSS
  (Section III-C1; alpha = beta = 0.5 in the paper). The same for every request.
* OST -> sink: what one more stripe costs on that OST. A model gives a unit cost per
  *stripe slot* ``k = 0, 1, ...`` of the round (``unit_costs`` shape ``(N, K)``,
  non-decreasing along ``k``). ``K = 1`` means one arc whose unit cost is the same for
  every stripe (a linear cost).

Models:

* :class:`PaperCost`: the paper's. OST -> sink unit cost = used KiB
  (``TotalKB - KB_available``), one linear arc. Within a round every stripe goes to the
  currently emptiest OSTs; the OSS load term only breaks near-ties, since used KiB
  (10^6..10^10) dwarfs percentages.
* :class:`ConvexCost`: parallel OST -> sink arcs with rising unit cost (the standard
  Firmament construction for convex costs). Slot ``k`` of OST ``j`` costs its fill
  relative to the mean *after* ``k+1`` more stripes of the round's expected size, plus
  its write queue after ``k`` more stripes. The k-th stripe on the same OST costs more
  than the first on the next-emptiest one, so a round spreads instead of piling on.

Integer scaling: percentages are multiplied by :data:`PERCENT_SCALE` before rounding,
so 0.01 percentage point is the cost resolution (OR-Tools needs integer costs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

PERCENT_SCALE = 100
"""Integer cost units per percentage point."""
PAPER_ALPHA = 0.5
PAPER_BETA = 0.5
"""Weights of OSS CPU% and memory% (Section III-C1: "We assign both values as 0.5")."""


@dataclass(frozen=True)
class OstArrays:
    """The state of the candidate OSTs of one round, as parallel arrays of shape (N,).

    Attributes:
        index: OST index.
        oss: OSS number (position in the round's OSS list).
        kbytes_total: KiB.
        kbytes_avail: KiB usable by new objects.
        pending_bytes: bytes this mapper already placed there that the statistics
            do not show yet (decaying estimate; :class:`mapper.policies.mcmf.McmfPolicy`).
        cpu_percent, mem_percent, lnet_load: the OSS's load, 0..100, per OST.
        queue: write requests queued at the OST (``write_latency / base latency - 1``
            plus stripes placed since the last sample), >= 0.
    """
    index: np.ndarray
    oss: np.ndarray
    kbytes_total: np.ndarray
    kbytes_avail: np.ndarray
    pending_bytes: np.ndarray
    cpu_percent: np.ndarray
    mem_percent: np.ndarray
    lnet_load: np.ndarray
    queue: np.ndarray

    @property
    def used_fraction(self) -> np.ndarray:
        """``(total - avail) * 1024 + pending`` over ``total * 1024``, in [0, 1]."""
        total = np.maximum(self.kbytes_total.astype(float) * 1024, 1.0)
        used = (self.kbytes_total - self.kbytes_avail) * 1024.0 + self.pending_bytes
        return np.clip(used / total, 0.0, 1.0)


class CostModel(Protocol):
    """Integer arc costs for one round."""
    name: str

    def request_arc_costs(self, osts: OstArrays) -> np.ndarray:
        """Cost of request -> OST arcs, int64 shape (N,) (one per OST, same for every request)."""
        ...

    def unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float,
                   rows: np.ndarray | None = None) -> np.ndarray:
        """OST -> sink unit cost of stripe slot ``k``, int64 shape (len(rows), K) with
        ``K <= slots``, non-decreasing along axis 1; ``K == 1`` is a linear cost for every
        slot. ``rows`` selects OSTs (default all); normalisations still use all N."""
        ...


def oss_load_cost(osts: OstArrays, alpha: float, beta: float, lnet_weight: float) -> np.ndarray:
    """``alpha*CPU% + beta*Mem% + lnet_weight*LNet%`` of each OST's OSS, in cost units."""
    load = alpha * osts.cpu_percent + beta * osts.mem_percent + lnet_weight * osts.lnet_load
    return np.rint(np.clip(load, 0.0, None) * PERCENT_SCALE).astype(np.int64)


@dataclass(frozen=True)
class PaperCost:
    """The paper's cost model (Section III-C1): OSS load on request arcs, used KiB on
    OST -> sink arcs (one linear arc per OST).

    Args:
        alpha: weight of OSS CPU%.
        beta: weight of OSS memory%.
        lnet_weight: weight of the LNet term (the paper adds it unweighted: 1).
    """
    alpha: float = PAPER_ALPHA
    beta: float = PAPER_BETA
    lnet_weight: float = 1.0
    name: str = "paper"

    def request_arc_costs(self, osts: OstArrays) -> np.ndarray:
        return oss_load_cost(osts, self.alpha, self.beta, self.lnet_weight)

    def unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float,
                   rows: np.ndarray | None = None) -> np.ndarray:
        used_kib = osts.kbytes_total - osts.kbytes_avail + osts.pending_bytes // 1024
        used_kib = np.maximum(used_kib, 0).astype(np.int64)
        return (used_kib if rows is None else used_kib[rows]).reshape(-1, 1)


@dataclass(frozen=True)
class ConvexCost:
    """Convex OST -> sink costs: fill relative to the mean and write queue, per slot.

    Unit cost of slot ``k`` on OST ``j``, in points (times PERCENT_SCALE)::

        space_weight * 100 * f_j(k) / mean f(0)  +  queue_weight * (q_j + k)

    with ``f_j(k)`` the used fraction after ``k + 1`` more stripes of
    ``bytes_per_stripe`` and ``q_j`` the OST's write queue (requests). Both terms rise
    with ``k``: convex. The fill term is relative to the mean because the balance
    metric is max/mean (Section IV-B): an OST at 1.05x the mean fill costs 5 points more
    than an average one, the same as ``5 / queue_weight`` more queued writes.

    Request -> OST arcs carry the paper's OSS load. The network gets an OSS layer
    (OST -> OSS -> sink) whose slots cost ``oss_queue_weight`` points per write queued on
    the OSS, averaged over its OSTs, after ``k`` more stripes of the round
    (:meth:`oss_unit_costs`): the round spreads over servers, not only over OSTs, and
    two idle OSTs of a busy server look worse than an idle OST of an idle one.

    Args:
        alpha, beta, lnet_weight: the paper's OSS load weights.
        space_weight: points per percent of relative fill.
        queue_weight: points per queued write on the OST.
        oss_queue_weight: points per queued write (mean per OST) on the OSS.
        space_cap_points: if set, the fill term is clipped to the mean +- this many
            points (load first, space second).
    """
    alpha: float = PAPER_ALPHA
    beta: float = PAPER_BETA
    lnet_weight: float = 1.0
    space_weight: float = 1.0
    queue_weight: float = 20.0
    oss_queue_weight: float = 20.0
    space_cap_points: float | None = None
    name: str = "convex"

    def request_arc_costs(self, osts: OstArrays) -> np.ndarray:
        return oss_load_cost(osts, self.alpha, self.beta, self.lnet_weight)

    def oss_unit_costs(self, osts: OstArrays, slots: int) -> np.ndarray:
        """OSS slot ``k`` cost, int64 (n_oss, slots): ``oss_queue_weight * (Q_s + k) / n_s``
        points, ``Q_s`` the queued writes on the OSS's ``n_s`` OSTs."""
        n_oss = int(osts.oss.max()) + 1
        queued = np.bincount(osts.oss, osts.queue, minlength=n_oss)
        count = np.maximum(np.bincount(osts.oss, minlength=n_oss), 1)
        k = np.arange(max(1, slots), dtype=float)
        cost = self.oss_queue_weight * (queued[:, None] + k[None, :]) / count[:, None]
        return np.rint(cost * PERCENT_SCALE).astype(np.int64)

    def unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float,
                   rows: np.ndarray | None = None) -> np.ndarray:
        k = np.arange(max(1, slots), dtype=float)
        total = np.maximum(osts.kbytes_total.astype(float) * 1024, 1.0)
        fill0 = osts.used_fraction
        mean_fill = max(float(fill0.mean()), 1e-6)
        q = osts.queue.astype(float)
        if rows is not None:
            total, fill0, q = total[rows], fill0[rows], q[rows]
        step = max(bytes_per_stripe, 0.0) / total
        fill = fill0[:, None] + step[:, None] * (k[None, :] + 1.0)
        space = self.space_weight * 100.0 * fill / mean_fill
        if self.space_cap_points is not None:
            # Bounded: fill only orders OSTs within +-cap points of the mean, so one
            # more queued write (queue_weight) outweighs any fill difference.
            cap = self.space_cap_points
            space = 100.0 * self.space_weight + np.clip(space - 100.0 * self.space_weight,
                                                        -cap, cap)
        queue = self.queue_weight * (q[:, None] + k[None, :])
        return np.rint((space + queue) * PERCENT_SCALE).astype(np.int64)


COST_MODELS = {"paper": PaperCost, "convex": ConvexCost}


def make_cost_model(name: str, **params: float) -> CostModel:
    """A cost model by name (``paper`` or ``convex``).

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
