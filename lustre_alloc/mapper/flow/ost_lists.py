"""From a round's arrays to OST lists: build, solve, read the flow, deal and order lists.

One implementation for the three callers of a flow round: the request round of
:class:`lustre_alloc.mapper.policies.mcmf.McmfPolicy` (misses), its inline planner (the simulator) and
the service's planner process (:mod:`lustre_alloc.mapper.service.plan_worker`), which receives a
:class:`PlanJob` by pickle and returns a :class:`PlanSolution`. Everything here is a pure
function of its arguments (no policy state), so the planner process computes exactly
what the inline planner would on the same input.
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.state.arrays import OstArrays
from lustre_alloc.mapper.flow.costs import CostModel
from lustre_alloc.mapper.flow.network import (FlowNetwork, RoundRequest, assemble, check_requests, oss_slots,
                                 select_candidates)
from lustre_alloc.mapper.flow.solver import SOLVERS

SHORTLIST_OSTS = 128
"""Candidates per group a planning round leaves for the small flows of missed requests
(ours: a miss asks for a few stripes; 128 OSTs cover 32 OSSes at 4 OSTs each)."""

PLAN_SLOT_FACTOR = 4
"""An aggregated planning request may put at most ``max(4, ceil(PLAN_SLOT_FACTOR x
stripes / eligible OSTs))`` of its stripes on one OST (ours). Without the cap, a class of
``L`` lists offers every OST ``L`` sink slots (``N x L`` arcs: 3.7 M at 3600 OSTs x 1024
lists); the optimum of a balanced cost model uses one or two. The cap is a bound on the
plan, not on correctness: every list still has distinct OSTs."""


@dataclass(frozen=True)
class PlanJob:
    """One planning round, everything the solve needs (picklable).

    Attributes:
        osts: the round's candidate OSTs, with what is placed or reserved (N rows).
        requests: the round's flow requests (aggregated classes and predicted ones).
        lists: per request, how many OST lists it is dealt into (1 unless aggregated).
        masks: eligibility masks (N,) per group.
        stripe_size: bytes per stripe for OST capacities (the round's largest).
        bytes_per_stripe: expected bytes per stripe (the round's mean).
        cost_model: the policy's cost model.
        prune: exact candidate pruning (:mod:`lustre_alloc.mapper.flow.network`).
        solver: a key of :data:`lustre_alloc.mapper.flow.solver.SOLVERS`.
        max_ost_slots: most stripes of the round on one OST (None: no bound beyond
            the requests'; :func:`slot_cap` for aggregated rounds).
    """
    osts: OstArrays
    requests: tuple[RoundRequest, ...]
    lists: tuple[int, ...]
    masks: tuple[np.ndarray, ...]
    stripe_size: int
    bytes_per_stripe: float
    cost_model: CostModel
    prune: bool = True
    solver: str = "ortools"
    max_ost_slots: int | None = None


@dataclass(frozen=True)
class PlanSolution:
    """What a planning round made.

    Attributes:
        lists: per request of the job: its OST lists in stripe order, each with its
            rank in the round's hand-out order (:func:`handout_ranks`), first first;
            empty when the request did not get all its stripes.
        placement_cost: Eq. 1 of the flow without bonuses (comparable between networks
            of the same round).
        solve_s: wall time of build + solve + deal, s.
        shortlists: per group (mask) of the job, the OST indices of its
            :data:`SHORTLIST_OSTS` cheapest candidates by first-stripe cost, cheapest first:
            where a request that finds no planned list may be solved by a small flow.
    """
    lists: tuple[tuple[tuple[int, tuple[int, ...]], ...], ...]
    placement_cost: int
    solve_s: float
    shortlists: tuple[np.ndarray, ...] = ()


def slot_cap(stripes: int, eligible: int) -> int:
    """Most stripes of an aggregated request of ``stripes`` on one OST among ``eligible``
    (:data:`PLAN_SLOT_FACTOR`)."""
    return max(4, math.ceil(PLAN_SLOT_FACTOR * stripes / max(1, eligible)))


def build_network(osts: OstArrays, requests: Sequence[RoundRequest], eligible: Sequence[np.ndarray],
                  cost_model: CostModel, stripe_size: int, bytes_per_stripe: float,
                  prune: bool = True,
                  group_costs: Sequence[np.ndarray | None] | None = None,
                  max_ost_slots: int | None = None) -> FlowNetwork:
    """Build one round's network: the cost model prices, the graph module lays arcs.

    The steps run one way (Firmament's split: cost model, graph, solver): the OSS slot
    count from the requests (:func:`~lustre_alloc.mapper.flow.network.oss_slots`), the cost model's
    request-arc, first-slot and OSS costs, the pruned candidates
    (:func:`~lustre_alloc.mapper.flow.network.select_candidates`), the cost model's slot costs of the
    OSTs kept, and the arcs (:func:`~lustre_alloc.mapper.flow.network.assemble`).

    Args:
        osts: the usable, non-straggling OSTs of the round (N rows).
        requests: the round's requests (current and predicted).
        eligible: boolean masks of shape (N,), indexed by ``RoundRequest.group``.
        cost_model: the cost model.
        stripe_size: bytes per stripe for the capacity of OST -> sink arcs (the
            round's largest).
        bytes_per_stripe: expected bytes a stripe of this round will hold.
        prune: keep only each request's ``S`` cheapest candidates (exact; see
            :mod:`lustre_alloc.mapper.flow.network`). False builds the dense network (tests, benches).
        group_costs: optional extra request -> OST costs per group, int64 (N,) each
            (None entries: no extra cost).
        max_ost_slots: most stripes of the round on one OST (None: as many as the
            requests allow). A bound on the plan, not exact: the planner's aggregated
            rounds use it (:func:`slot_cap`).
    Raises:
        ValueError: a request with ``stripes < 1`` or an unknown group.
    """
    check_requests(requests, len(eligible))
    req_cost = cost_model.request_arc_costs(osts)
    oss_units = None
    if cost_model.has_oss_layer and len(osts.index):
        oss_units = cost_model.oss_unit_costs(osts, oss_slots(osts, requests, max_ost_slots),
                                              bytes_per_stripe)
    first = req_cost + cost_model.unit_costs(osts, 1, bytes_per_stripe)[:, 0]
    layout = select_candidates(osts, requests, eligible, first,
                               None if oss_units is None else oss_units[:, 0], stripe_size,
                               prune, group_costs, max_ost_slots)
    units = (cost_model.unit_costs(osts, layout.slots_needed, bytes_per_stripe,
                                   rows=layout.used_rows)
             if len(layout.used_rows) else np.zeros((0, 1), dtype=np.int64))
    return assemble(osts, requests, layout, req_cost, units, oss_units, group_costs)


def solve_rows(osts: OstArrays, requests: Sequence[RoundRequest], masks: Sequence[np.ndarray],
               cost_model: CostModel, stripe_size: int, bytes_per_stripe: float, *,
               prune: bool = True, solver: str = "ortools",
               group_costs: Sequence[np.ndarray | None] | None = None,
               max_ost_slots: int | None = None) -> tuple[list[list[int]], int]:
    """Build and solve one network; the OST rows (into ``osts``) each request got, a row
    repeated when an aggregated request put several stripes there, and the placement
    cost (:meth:`~lustre_alloc.mapper.flow.network.FlowNetwork.placement_cost`).

    Raises:
        ValueError: a malformed request (:func:`build_network`).
        SolverError: the solver failed.
    """
    net = build_network(osts, requests, masks, cost_model, stripe_size, bytes_per_stripe,
                        prune=prune, group_costs=group_costs, max_ost_slots=max_ost_slots)
    sol = SOLVERS[solver](net)
    flow = sol.flows[net.assign_arc]
    used = flow > 0
    got: list[list[int]] = [[] for _ in requests]
    for req_no, row, f in zip(net.assign_request[used].tolist(), net.assign_ost[used].tolist(),
                              flow[used].tolist()):
        got[req_no].extend([row] * f)
    return got, net.placement_cost(sol.flows)


class StripeOrder:
    """Lays a request's chosen OSTs out in stripe order: interleaved across their OSSes
    (like Lustre's RR array: consecutive stripes on different servers), least-used OST
    first in each OSS, OSS by OSS in the order of their emptiest chosen OST. The per-row
    columns are read once per round (O(N)), each list costs O(stripes log stripes)."""

    def __init__(self, osts: OstArrays):
        self.fill = osts.used_fraction.tolist()
        self.index = osts.index.tolist()
        self.oss = osts.oss.tolist()

    def __call__(self, rows: Sequence[int]) -> tuple[int, ...]:
        fill, index, oss = self.fill, self.index, self.oss
        by_oss: dict[int, list[int]] = {}
        for r in sorted(rows, key=lambda r: (fill[r], index[r])):
            by_oss.setdefault(oss[r], []).append(r)
        lanes = list(by_oss.values())
        ordered: list[int] = []
        depth = 0
        while len(ordered) < len(rows):
            for lane in lanes:
                if depth < len(lane):
                    ordered.append(index[lane[depth]])
            depth += 1
        return tuple(ordered)


def deal(rows: Sequence[int], lists: int, count: int, cost: np.ndarray) -> list[list[int]]:
    """Split an aggregated class's stripes (``rows``, each OST at most ``lists`` times,
    ``lists * count`` in all) into ``lists`` lists of ``count`` distinct OSTs.

    The stripes are sorted by first-stripe ``cost`` (then row, so an OST's copies are
    adjacent) and dealt like cards: stripe ``p`` goes to list ``p mod lists``. An OST's
    ``m <= lists`` adjacent copies then land in ``m`` different lists, every list gets
    ``count`` stripes, and each list mixes cheap and dear OSTs alike (the flow chose
    all of them for this horizon). O(stripes log stripes) (a list-by-list greedy was
    O(lists x OSTs log OSTs): 0.5 s for 512 lists at 3600 OSTs)."""
    if lists == 1:
        return [list(rows)]
    arr = np.asarray(rows, dtype=np.int64)
    arr = arr[np.lexsort((arr, cost[arr]))]
    return arr.reshape(count, lists).T.tolist()


def handout_ranks(parts: Sequence[Sequence[int]], osts: OstArrays, cost_model: CostModel,
                  bytes_per_stripe: float) -> list[int]:
    """The order in which a planning round's lists should be handed out: the order in
    which one request at a time, each solved on the costs its predecessors left, would
    have taken them. Returns each list's rank (0 first), in ``parts`` order.

    A planning round decides many lists in one flow; which list the next create gets is
    not part of the optimum. Handed out by each list's *first*-stripe cost (this
    function's predecessor), a burst of creates took the cheapest OSTs one after another
    with nothing in between: the copies of one OST back to back, and the OSTs of one OSS
    together (their first-stripe costs are alike), so the burst's writes queued on a few
    OSTs and one server's link. Measured (nersc-edison-real, one seed): 83.9 MiB/s mean
    I/O against 97.0 when every create was solved in its own round and round-robin's 98.0.
    Greedy over marginal costs: repeatedly the list whose stripes' next slot costs (the
    OST's slot ``k`` from :meth:`CostModel.unit_costs`, plus its OSS's next slot from
    :meth:`CostModel.oss_unit_costs` when the model has the OSS layer) sum lowest, then
    those slots are taken; ties go to the earlier list (so on equal OSTs the burst walks
    the OSSes in turn, as Lustre's round-robin does). Costs only rise as slots are taken,
    so a lazy heap is exact: O(P log P) heap operations for P lists, each O(stripes per
    list).

    Args:
        parts: each list's OST rows (into ``osts``).
        osts: the round's arrays.
        cost_model: the round's cost model.
        bytes_per_stripe: as the round's (bytes).
    """
    if not parts:
        return []
    flat = np.fromiter((r for part in parts for r in part), dtype=np.int64)
    used, inverse = np.unique(flat, return_inverse=True)
    copies = np.bincount(inverse)
    base = cost_model.request_arc_costs(osts)[used].astype(np.float64)
    units = cost_model.unit_costs(osts, int(copies.max()), bytes_per_stripe,
                                  rows=used).astype(np.float64)
    # plain lists: the heap loop below reads them one element at a time
    slot_cost = (base[:, None] + units).tolist()       # [len(used)][K]; K == 1: linear
    last_slot = units.shape[1] - 1
    oss_cost, oss_list, last_oss = None, None, 0
    if cost_model.has_oss_layer:
        oss_of = osts.oss.astype(np.int64)[used]
        most = int(np.bincount(oss_of, weights=copies).max())     # stripes on one OSS
        oss_units = cost_model.oss_unit_costs(osts, most, bytes_per_stripe)
        oss_cost, oss_list, last_oss = oss_units.tolist(), oss_of.tolist(), oss_units.shape[1] - 1
    local: list[list[int]] = []
    k = 0
    for part in parts:
        local.append(inverse[k:k + len(part)].tolist())
        k += len(part)
    taken = [0] * len(used)
    oss_taken: dict[int, int] = {}

    def cost(rows: list[int]) -> float:
        c = 0.0
        for u in rows:
            c += slot_cost[u][min(taken[u], last_slot)]
            if oss_list is not None:
                o = oss_list[u]
                c += oss_cost[o][min(oss_taken.get(o, 0), last_oss)]
        return c

    heap = [(cost(rows), n) for n, rows in enumerate(local)]
    heapq.heapify(heap)
    ranks = [0] * len(local)
    rank = 0
    while heap:
        c, n = heapq.heappop(heap)
        now = cost(local[n])
        if heap and (now, n) > heap[0]:      # its slots were taken meanwhile: requeue
            heapq.heappush(heap, (now, n))
            continue
        ranks[n] = rank
        rank += 1
        for u in local[n]:
            taken[u] += 1
            if oss_list is not None:
                oss_taken[oss_list[u]] = oss_taken.get(oss_list[u], 0) + 1
    return ranks


def solve_plan(job: PlanJob) -> PlanSolution:
    """Solve one planning round (in the planner process or inline).

    Raises:
        ValueError, SolverError: as :func:`solve_rows`.
    """
    t0 = time.perf_counter()
    osts = job.osts
    got, cost = solve_rows(osts, job.requests, job.masks, job.cost_model, job.stripe_size,
                           job.bytes_per_stripe, prune=job.prune, solver=job.solver,
                           max_ost_slots=job.max_ost_slots)
    first = (job.cost_model.request_arc_costs(osts)
             + job.cost_model.unit_costs(osts, 1, job.bytes_per_stripe)[:, 0])
    order = StripeOrder(osts)
    dealt: list[list[list[int]] | None] = []
    for req, lists, rows in zip(job.requests, job.lists, got):
        dealt.append(deal(rows, lists, req.stripes // lists, first)
                     if len(rows) >= req.stripes else None)
    # The flow's optimum does not say which list the next create gets: rank them in the
    # order a create-by-create greedy would take them (computed here, in the planner
    # process, not under the service lock).
    ranks = iter(handout_ranks([p for parts in dealt if parts for p in parts], osts,
                               job.cost_model, job.bytes_per_stripe))
    out: list[tuple[tuple[int, tuple[int, ...]], ...]] = []
    for parts in dealt:
        if parts is None:
            out.append(())
            continue
        out.append(tuple(sorted(((next(ranks), order(part)) for part in parts),
                                key=lambda rank_osts: rank_osts[0])))
    shortlists = []
    for mask in job.masks:
        rows = np.flatnonzero(mask)
        if len(rows) > SHORTLIST_OSTS:
            rows = rows[np.argpartition(first[rows], SHORTLIST_OSTS)[:SHORTLIST_OSTS]]
        rows = rows[np.lexsort((rows, first[rows]))]
        shortlists.append(osts.index[rows].astype(np.int64))
    return PlanSolution(tuple(out), cost, time.perf_counter() - t0, tuple(shortlists))


__all__ = ["PLAN_SLOT_FACTOR", "PlanJob", "build_network", "PlanSolution", "StripeOrder", "deal", "slot_cap",
           "handout_ranks", "solve_plan", "solve_rows"]
