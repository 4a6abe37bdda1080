"""Weighted max-min fair sharing of resources (links and OSTs) by progressive filling.

The flow-level network model (:mod:`lustre_alloc.simulator.network.model`, ``model = "flow"``) and the
joint disk/network sharing both reduce to one problem: flows ``f`` use resources ``r``
(a client link, an LNet router link, an OSS link, an OST's disk) with a coefficient
``a[f, r]`` (bytes through ``r`` per unit of the flow's level), each resource has a
capacity ``c[r]`` (bytes/s), and every flow's level ``x[f]`` is raised together until a
resource saturates; the flows through it freeze, and the rest keep rising (progressive
filling, or "water-filling": Bertsekas and Gallager, *Data Networks*, 2nd ed., Section
6.5.2). The result is the max-min fair allocation: no ``x[f]`` can grow without
shrinking an ``x[g] <= x[f]``.

Each round is a handful of vectorised numpy calls over the sparse entries (one entry per
flow and resource it uses); the number of rounds is the number of distinct bottleneck
levels, usually a few, never more than the number of resources.
"""
from __future__ import annotations

import numpy as np

REL_TOL = 1e-9
"""Resources whose saturation level is within this relative distance of the round's
minimum saturate in the same round (ties, and float noise of the subtraction)."""


def max_min_levels(entry_flow: np.ndarray, entry_res: np.ndarray, entry_coef: np.ndarray,
                   flow_count: int, capacity: np.ndarray,
                   flow_cap: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair levels ``x`` (shape (F,)) subject to ``sum_f a[f,r] x[f] <= c[r]``.

    Args:
        entry_flow: flow index of each entry, shape (E,), int.
        entry_res: resource index of each entry, shape (E,), int in ``[0, R)``.
        entry_coef: coefficient ``a[f, r]`` of each entry, shape (E,), > 0. Several
            entries with the same (flow, resource) add up.
        flow_count: F, the number of flows.
        capacity: ``c[r]``, shape (R,), >= 0 (``inf`` = never a bottleneck).
        flow_cap: optional per-flow upper bound on ``x[f]``, shape (F,) (``inf`` = none);
            a private resource of each flow.
    Returns:
        x, shape (F,), float. A flow with no entries and no cap gets ``inf``.
    """
    x = np.zeros(flow_count)
    if flow_count == 0:
        return x
    res_count = capacity.shape[0]
    residual = capacity.astype(float).copy()
    fcap = np.full(flow_count, np.inf) if flow_cap is None else np.asarray(flow_cap, float).copy()
    live = np.ones(flow_count, dtype=bool)
    e_live = np.ones(entry_flow.shape[0], dtype=bool)
    coef = entry_coef.astype(float)
    while live.any():
        demand = np.bincount(entry_res, coef * e_live, minlength=res_count)
        used = demand > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            t_res = np.where(used, residual / np.where(used, demand, 1.0), np.inf)
        t_flow = np.where(live, fcap - x, np.inf)
        t = min(float(t_res.min()) if res_count else np.inf, float(t_flow.min()))
        if not np.isfinite(t):
            x[live] = np.inf
            break
        t = max(t, 0.0)
        x[live] += t
        residual -= t * demand
        limit = t * (1.0 + REL_TOL) + 1e-12
        sat = used & (t_res <= limit)
        frozen = np.bincount(entry_flow, sat[entry_res] & e_live, minlength=flow_count) > 0
        frozen |= live & (t_flow <= limit)
        live &= ~frozen
        e_live = live[entry_flow]
    return x
