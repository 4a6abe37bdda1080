"""The placement flow network of one round (Paul et al. 2017, Section III-C1, Fig. 10).

::

    source --(stripes_i, -bonus_i)--> R_i --(1, oss_cost_j)--> OST_j ==(slots)==> sink

* source -> R_i: capacity = the request's stripe count. The paper's cost is 0; we put a
  *priority bonus* (a negative cost) on it: current requests get the largest, predicted
  ones less the less likely they are. The solver computes a maximum flow of minimum
  cost, so when not every request fits, the flow it gives up is the least likely
  predicted request's first and the current requests' last: in one solve, the paper's
  "remove one of the predicted requests ... and run the algorithm again" (Section
  III-C2). Any flow extends to a maximum flow without lowering flow on a source arc
  (an augmenting path never re-enters the source), so a maximum flow serving every
  current request exists whenever any flow does; the bonus, larger than the most
  expensive path, makes the solver pick it.
* R_i -> OST_j: capacity 1 (a request never gets an OST twice), cost from the cost model.
* OST_j -> sink: one arc with capacity = stripes the OST can hold (linear cost), or
  parallel arcs of capacity 1 with the cost model's rising unit costs (convex cost).
  Unit costs are shifted by their minimum; with the maximum flow fixed this changes
  the objective by a constant and keeps numbers small.

**Candidate pruning (exact).** The dense network has requests x OSTs arcs. Each request
keeps arcs only to its ``S`` cheapest eligible OSTs by first-stripe cost
(``oss_cost_j + unit_cost_j[0]``), ``S`` = total stripes of the round. Proof that the
optimum is unchanged: take an optimal flow where request r uses an OST j outside its
``S`` cheapest. At most ``S`` OSTs carry flow and j is one of them, so one of r's ``S``
cheapest, t, carries none. Moving r's stripe from j to t is feasible (nobody uses t; its
capacity is >= 1 since only OSTs with room are candidates) and changes the cost by
``first(t) - marginal(j) <= first(t) - first(j) <= 0`` (unit costs are non-decreasing).
Repeating reaches an optimal flow inside the pruned network. With an OSS layer (OST ->
OSS -> sink, the OSS slots convex too) the argument is applied twice: within an OSS
(moving a stripe between two of its OSTs leaves the OSS's load alone), keep its ``S``
cheapest OSTs; between OSSes, keep the ``S`` OSSes cheapest by their best OST's first
stripe plus their first slot (at most ``S`` OSSes carry flow, so a kept one is unused,
and its best OST is at least as cheap as the stripe moved). When request arcs carry a
per-group extra cost (the mapper's per-application spreading term), each group ranks its
candidates by its own first-stripe cost and the same argument holds request by request.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.state.arrays import OstArrays

SOURCE = 0
SINK = 1


@dataclass(frozen=True)
class RoundRequest:
    """One request of a round.

    Attributes:
        stripes: stripes wanted (>= 1).
        group: index of its eligibility mask (requests of the same pool share one).
        tier: 0 for a current request; 1, 2, ... for predicted ones, most likely first.
        per_ost: most stripes it may put on one OST (capacity of its request -> OST
            arcs). 1 for a file; ``k`` for ``k`` files of the same class planned as one
            request (the planner deals the stripes into ``k`` lists, each OST at most
            once per list: the optimum is the same as with ``k`` requests of
            capacity 1, since any flow of the aggregate splits into such lists).
    """
    stripes: int
    group: int
    tier: int = 0
    per_ost: int = 1


@dataclass(frozen=True)
class FlowNetwork:
    """Arrays of one round's network, ready for a solver.

    Attributes:
        n_nodes: nodes (0 source, 1 sink, then requests, then OSTs).
        tails, heads, capacities, costs: int64 arrays, one entry per arc.
        supplies: int64 (n_nodes,): total stripes at the source, minus that at the sink.
        assign_arc: indices of the request -> OST arcs in the arc arrays.
        assign_request: request number of each of those arcs.
        assign_ost: OST row (into the round's :class:`OstArrays`) of each.
        n_requests: request nodes (their source arcs are the first ``n_requests`` arcs).
        sink_shift: what was subtracted from every OST -> sink unit cost.
    """
    n_nodes: int
    tails: np.ndarray
    heads: np.ndarray
    capacities: np.ndarray
    costs: np.ndarray
    supplies: np.ndarray
    assign_arc: np.ndarray
    assign_request: np.ndarray
    assign_ost: np.ndarray
    n_requests: int = 0
    sink_shift: int = 0

    def placement_cost(self, flows: np.ndarray) -> int:
        """Eq. 1 of a flow without the priority bonuses and with the shift undone: the
        cost models' own total, comparable between networks of the same round."""
        r = self.n_requests
        body = int(self.costs[r:] @ flows[r:])
        return body + self.sink_shift * int(flows[:r].sum())

    @property
    def n_arcs(self) -> int:
        """Number of arcs."""
        return len(self.tails)


def stripe_capacity(osts: OstArrays, stripe_size: int) -> np.ndarray:
    """Stripes each OST can still hold: available bytes // stripe size (Section III-C1),
    int64 (N,). From ``kbytesavail`` alone: bytes announced but not yet written only
    raise the cost, since an announcement may never be written, and counting it here
    would refuse creates (ENOSPC) on OSTs Lustre still has room on."""
    avail = osts.kbytes_avail.astype(np.int64) * 1024
    return np.maximum(avail, 0) // max(int(stripe_size), 1)


def _prune_by_oss(rows: np.ndarray, rank: np.ndarray, oss: np.ndarray, oss_first: np.ndarray,
                  total: int) -> np.ndarray:
    """Candidates when OSSes carry their own convex cost: the ``total`` cheapest OSSes
    (by their cheapest OST's first-stripe cost plus the OSS's first slot), and in each
    the ``total`` cheapest OSTs. Exact by the module docstring's exchange argument,
    applied twice: within an OSS (its load does not change) and between OSSes (an
    OSS nobody uses is among the kept ones)."""
    order = np.lexsort((rows, rank, oss))          # by OSS, then cost, then index
    rows, rank, oss = rows[order], rank[order], oss[order]
    start = np.r_[0, np.nonzero(np.diff(oss))[0] + 1]
    position = np.arange(len(rows)) - np.repeat(start, np.diff(np.r_[start, len(rows)]))
    keep = position < total
    best = rank[start] + oss_first[oss[start]]
    kept_oss = oss[start][np.lexsort((oss[start], best))[:total]]
    keep &= np.isin(oss, kept_oss)
    return np.sort(rows[keep])


@dataclass(frozen=True)
class CandidateLayout:
    """Which OSTs each request of a round may use, after pruning (the graph's first half).

    Attributes:
        candidates: per eligibility group, the OST rows it keeps (int64, ascending).
        used_rows: OST rows some request may use (ascending): the OST nodes.
        ost_node: per request -> OST arc, the position of its OST in ``used_rows``.
        assign_request, assign_ost: per request -> OST arc, its request and OST row.
        arc_cap: per request -> OST arc, its capacity (the request's ``per_ost``).
        per_ost_requests: per OST node, stripes the requests may put there (slots).
        slots_needed: the most slots any OST node has (columns of its unit costs).
        capacity: per OST row, stripes of ``stripe_size`` it can hold.
    """
    candidates: list[np.ndarray]
    used_rows: np.ndarray
    ost_node: np.ndarray
    assign_request: np.ndarray
    assign_ost: np.ndarray
    arc_cap: np.ndarray
    per_ost_requests: np.ndarray
    slots_needed: int
    capacity: np.ndarray


def check_requests(requests: Sequence[RoundRequest], groups: int) -> None:
    """Raises ValueError for a request with ``stripes < 1``, ``per_ost < 1`` or an unknown
    group (of ``groups`` eligibility masks)."""
    for i, req in enumerate(requests):
        if req.stripes < 1 or req.per_ost < 1 or not 0 <= req.group < groups:
            raise ValueError(f"request {i}: stripes {req.stripes}, group {req.group}")


def oss_slots(osts: OstArrays, requests: Sequence[RoundRequest],
              max_ost_slots: int | None = None) -> int:
    """Slots an OSS node needs: at most (its OSTs) x (stripes one request may put on an
    OST, summed over requests), and never more than the round's stripes (an aggregated
    plan's total can be thousands while an OSS takes a few dozen)."""
    total = sum(req.stripes for req in requests)
    if not len(osts.index):
        return 1
    most_osts = int(np.bincount(osts.oss.astype(np.int64)).max())
    per_ost_sum = sum(req.per_ost for req in requests)
    if max_ost_slots is not None:
        per_ost_sum = min(per_ost_sum, max_ost_slots)
    return max(1, min(total, most_osts * per_ost_sum))


def select_candidates(osts: OstArrays, requests: Sequence[RoundRequest],
                      eligible: Sequence[np.ndarray], first: np.ndarray,
                      oss_first: np.ndarray | None, stripe_size: int, prune: bool = True,
                      group_costs: Sequence[np.ndarray | None] | None = None,
                      max_ost_slots: int | None = None) -> CandidateLayout:
    """The request -> OST arcs of a round, pruned (module docstring).

    Args:
        first: int64 (N,): each OST's first-stripe cost (request arc + first slot).
        oss_first: int64 (n_oss,): each OSS's first slot cost, or None (no OSS layer).
        other arguments: as :func:`lustre_alloc.mapper.flow.ost_lists.build_network`.
    """
    r = len(requests)
    cap = stripe_capacity(osts, stripe_size)
    total = sum(req.stripes for req in requests)
    oss_of = osts.oss.astype(np.int64)
    extra = list(group_costs) if group_costs is not None else [None] * len(eligible)
    cand: list[np.ndarray] = []
    for mask, more in zip(eligible, extra):
        rows = np.nonzero(mask & (cap > 0))[0]
        if prune and len(rows) > total:
            rank = first[rows] if more is None else first[rows] + more[rows]
            if oss_first is None:
                order = np.lexsort((rows, rank))
                rows = np.sort(rows[order[:total]])
            else:
                rows = _prune_by_oss(rows, rank, oss_of[rows], oss_first, total)
        cand.append(rows)
    req_rows = [cand[req.group] for req in requests]
    lens = np.array([len(c) for c in req_rows], dtype=np.int64)
    assign_request = np.repeat(np.arange(r, dtype=np.int64), lens)
    assign_ost = np.concatenate(req_rows) if r else np.zeros(0, dtype=np.int64)
    used_rows, ost_node = np.unique(assign_ost, return_inverse=True)
    m = len(used_rows)
    # OST -> sink (or -> its OSS) arcs: K_j = min(capacity, requests that may use it) slots.
    arc_cap = np.repeat(np.array([req.per_ost for req in requests], dtype=np.int64), lens)
    per_ost_requests = (np.bincount(ost_node, weights=arc_cap, minlength=m).astype(np.int64)
                        if m else np.zeros(0, dtype=np.int64))
    if max_ost_slots is not None:
        per_ost_requests = np.minimum(per_ost_requests, max(1, max_ost_slots))
    slots_needed = int(per_ost_requests.max()) if m else 0
    return CandidateLayout(cand, used_rows, ost_node, assign_request, assign_ost, arc_cap,
                           per_ost_requests, slots_needed, cap)


def assemble(osts: OstArrays, requests: Sequence[RoundRequest], layout: CandidateLayout,
             req_cost: np.ndarray, units: np.ndarray, oss_units: np.ndarray | None,
             group_costs: Sequence[np.ndarray | None] | None = None) -> FlowNetwork:
    """The network of a round from its arcs (``layout``) and costs: ``req_cost`` int64 (N,)
    per request -> OST arc, ``units`` int64 (len(used_rows), K) the used OSTs' slot costs,
    ``oss_units`` int64 (n_oss, K') the OSS slot costs or None (no OSS layer)."""
    r = len(requests)
    total = sum(req.stripes for req in requests)
    used_rows, ost_node = layout.used_rows, layout.ost_node
    assign_request, assign_ost = layout.assign_request, layout.assign_ost
    cap, per_ost_requests = layout.capacity, layout.per_ost_requests
    m = len(used_rows)
    first_ost_node = 2 + r
    oss_of = osts.oss.astype(np.int64)
    shift = int(units.min()) if m else 0
    units = units - shift
    if units.shape[1] == 1:
        sink_tail = np.arange(m, dtype=np.int64)
        sink_cap = np.minimum(cap[used_rows], per_ost_requests)
        sink_cost = units[:, 0]
    else:
        k_j = np.minimum(np.minimum(cap[used_rows], per_ost_requests), units.shape[1])
        slot_mask = np.arange(units.shape[1])[None, :] < k_j[:, None]
        sink_tail = np.nonzero(slot_mask)[0].astype(np.int64)
        sink_cap = np.ones(len(sink_tail), dtype=np.int64)
        sink_cost = units[slot_mask]
    sink_head = np.full(len(sink_tail), SINK, dtype=np.int64)
    oss_tail = oss_head = oss_cap = oss_cost = np.zeros(0, dtype=np.int64)
    n_nodes = first_ost_node + m
    if oss_units is not None and m:
        # OST -> OSS_s -> sink: OSS slots with the cost model's rising unit costs.
        used_oss, oss_node = np.unique(oss_of[used_rows], return_inverse=True)
        first_oss_node = first_ost_node + m
        sink_head = first_oss_node + oss_node[sink_tail]
        through = np.bincount(oss_node, weights=np.bincount(sink_tail, weights=sink_cap, minlength=m),
                              minlength=len(used_oss)).astype(np.int64)
        k_s = np.minimum(np.minimum(through, total), oss_units.shape[1])
        table = oss_units[used_oss]
        oss_shift = int(table.min())
        slot_mask = np.arange(table.shape[1])[None, :] < k_s[:, None]
        oss_tail = first_oss_node + np.nonzero(slot_mask)[0].astype(np.int64)
        oss_head = np.full(len(oss_tail), SINK, dtype=np.int64)
        oss_cap = np.ones(len(oss_tail), dtype=np.int64)
        oss_cost = table[slot_mask] - oss_shift
        shift += oss_shift
        n_nodes = first_oss_node + len(used_oss)
    arc_cost = req_cost[assign_ost]
    extra = list(group_costs) if group_costs is not None else []
    for g, more in enumerate(extra):
        if more is not None:
            sel = np.array([requests[i].group == g for i in range(r)], dtype=bool)[assign_request]
            arc_cost = np.where(sel, arc_cost + more[assign_ost], arc_cost)
    max_path = ((int(arc_cost.max()) if len(arc_cost) else 0)
                + (int(sink_cost.max()) if len(sink_cost) else 0)
                + (int(oss_cost.max()) if len(oss_cost) else 0))
    bonus_unit = max_path + 1
    tiers = np.array([req.tier for req in requests], dtype=np.int64)
    n_tiers = int(tiers.max()) + 1 if r else 1
    src_cost = -(n_tiers - tiers) * bonus_unit
    stripes = np.array([req.stripes for req in requests], dtype=np.int64)
    tails = np.concatenate([np.full(r, SOURCE, dtype=np.int64), 2 + assign_request,
                            first_ost_node + sink_tail, oss_tail])
    heads = np.concatenate([2 + np.arange(r, dtype=np.int64), first_ost_node + ost_node,
                            sink_head, oss_head])
    capacities = np.concatenate([stripes, layout.arc_cap, sink_cap, oss_cap])
    costs = np.concatenate([src_cost, arc_cost, sink_cost, oss_cost]).astype(np.int64)
    supplies = np.zeros(n_nodes, dtype=np.int64)
    supplies[SOURCE] = total
    supplies[SINK] = -total
    return FlowNetwork(n_nodes=n_nodes, tails=tails, heads=heads, capacities=capacities,
                       costs=costs, supplies=supplies,
                       assign_arc=np.arange(r, r + len(assign_ost), dtype=np.int64),
                       assign_request=assign_request, assign_ost=assign_ost.astype(np.int64),
                       n_requests=r, sink_shift=shift)
