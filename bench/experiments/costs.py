"""Cost models that lost, kept for studies: the paper's (Paul et al. 2017, Section III-C1) and
a convex cost of fill and queue (the default before the rate cost). docs/placement.md, "What
was tried", has their results: convex 8-14% slower than round-robin on the uniform worlds;
the paper's cost piled bandwidth onto a few OSTs until the next statfs.

They are not installed. A study registers them before it builds a policy::

    from bench.experiments.costs import register
    register()          # cost_model = "convex" or "paper" in [policy_params.mcmf.experimental]

(the simulator's seed workers are forked, so they inherit the registration).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from lustre_alloc.mapper.flow.costs import COST_MODELS, PERCENT_SCALE, STRAGGLERS_BY_LATENCY
from lustre_alloc.mapper.state.arrays import OstArrays

PAPER_ALPHA = 0.5
PAPER_BETA = 0.5
"""Weights of OSS CPU% and memory% (Section III-C1: "We assign both values as 0.5")."""


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
    time_unit_s = None
    straggler_rule = STRAGGLERS_BY_LATENCY
    has_oss_layer = False

    def request_arc_costs(self, osts: OstArrays) -> np.ndarray:
        return oss_load_cost(osts, self.alpha, self.beta, self.lnet_weight)

    def unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float,
                   rows: np.ndarray | None = None) -> np.ndarray:
        used_kib = osts.kbytes_total - osts.kbytes_avail + osts.pending_bytes // 1024
        used_kib = np.maximum(used_kib, 0).astype(np.int64)
        return (used_kib if rows is None else used_kib[rows]).reshape(-1, 1)

    def oss_unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float = 0.0) -> np.ndarray:
        """The paper's network has no OSS layer (:attr:`has_oss_layer` is False).

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("the paper's cost model has no OSS layer")


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
    time_unit_s = None
    straggler_rule = STRAGGLERS_BY_LATENCY
    has_oss_layer = True

    def request_arc_costs(self, osts: OstArrays) -> np.ndarray:
        return oss_load_cost(osts, self.alpha, self.beta, self.lnet_weight)

    def oss_unit_costs(self, osts: OstArrays, slots: int, bytes_per_stripe: float = 0.0) -> np.ndarray:
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


LOST = {"paper": PaperCost, "convex": ConvexCost}


def register() -> None:
    """Make ``paper`` and ``convex`` names :func:`lustre_alloc.mapper.flow.costs.make_cost_model`
    knows (idempotent)."""
    for name, cls in LOST.items():
        COST_MODELS.setdefault(name, cls)


@contextmanager
def registered() -> Iterator[None]:
    """``paper`` and ``convex`` known inside the block only (tests: nothing leaks)."""
    register()
    try:
        yield
    finally:
        for name in LOST:
            COST_MODELS.pop(name, None)
