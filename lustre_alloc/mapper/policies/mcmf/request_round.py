"""One MCMF request round (Paul et al. 2017, Section III-C): the requests no kept or planned
list answered, plus the next predicted requests of their applications, in one min-cost
flow over the view's candidates (or over a shortlist of them).

Current requests are served first; when the round does not fit, predicted requests are
dropped least likely first (the network's priority bonus, :mod:`lustre_alloc.mapper.flow.network`); a
current request that still cannot get all its stripes gets fewer, as Lustre clips a stripe
count, and the placement's note says so. Current requests get their OSTs in stripe order
interleaved across OSSes; predicted requests that got all their stripes are kept for the
requests that follow (:mod:`lustre_alloc.mapper.policies.mcmf.kept_lists`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from lustre_alloc.common.lustre import DEFAULT_STRIPE_SIZE_BYTES
from lustre_alloc.mapper.flow.costs import PERCENT_SCALE
from lustre_alloc.mapper.flow.network import RoundRequest
from lustre_alloc.mapper.flow.ost_lists import StripeOrder, solve_rows
from lustre_alloc.mapper.policies.mcmf.kept_lists import KeptList, KeptLists
from lustre_alloc.mapper.policies.mcmf.params import McmfParams
from lustre_alloc.mapper.policies.mcmf.placed_books import PlacedBooks
from lustre_alloc.mapper.policies.placement import AllocationError, CreateRequest, NoSpaceError, Placement
from lustre_alloc.mapper.policies.mcmf.prediction_gate import PredictionGate
from lustre_alloc.mapper.policies.mcmf.ost_view import RoundView
from lustre_alloc.mapper.predictor.markov import MarkovPredictor
from lustre_alloc.mapper.state.arrays import OstArrays
from lustre_alloc.mapper.state.pending import PendingOverlay


@dataclass
class CurrentRequest:
    """A request of the round: its position in the batch, the request, its resolved
    stripe count and its eligibility group."""
    pos: int
    request: CreateRequest
    count: int
    group: int


def round_arrays(pending: PendingOverlay, view: RoundView, rows: np.ndarray | None = None) -> OstArrays:
    """The round's arrays: the view's (or its rows ``rows``: O(len(rows))), plus what this
    mapper placed or reserved (the rate cost's ``p_j`` in ``extra_stripes``)."""
    base = view.base if rows is None else view.base.take(rows)
    osts = pending.overlay(base)
    if osts is base:
        return osts
    return replace(osts, extra_stripes=np.maximum(osts.queue - base.queue, 0.0))


class RequestRound:
    """Solves a round's current requests (and, inline, their predicted successors).

    Args:
        params: the policy's parameters.
        books: where every list handed out is booked.
        kept: the kept predicted lists.
        gate: the per-application prediction accuracy gate.
        predictor: returns the current Markov predictor (it is replaced on load).
        count: called with a statistic's name and an increment.
        solved: called with the placement cost (Eq. 1, bonuses removed) of each flow solved.
        name: the policy's name, in the placements.
    """

    def __init__(self, params: McmfParams, books: PlacedBooks, kept: KeptLists,
                 gate: PredictionGate, predictor: Callable[[], MarkovPredictor],
                 count: Callable[[str, int], None], solved: Callable[[int], None], name: str):
        self.params = params
        self.books = books
        self.kept = kept
        self.prediction_gate = gate
        self.predictor = predictor
        self.count = count
        self.solved = solved
        self.name = name

    def run(self, view: RoundView, masks: list[np.ndarray], group_apps: list[str],
            current: list[CurrentRequest], out: list[Placement | AllocationError | None],
            now: float, predict: bool, rows: np.ndarray | None = None) -> None:
        """Solve ``current`` in one flow over the view's candidates, or over the rows
        ``rows`` of them only (a missed request's small flow); write each request's
        placement or error into ``out`` at its position. ``predict``: add the predicted
        requests of their applications (the inline planner's way; the service plans
        predictions in the background)."""
        p = self.params
        self.count("rounds", 1)
        self.count("stragglers_excluded", len(view.stragglers))
        osts = round_arrays(self.books.pending, view, rows)
        if rows is not None:
            self.count("shortlist_rounds", 1)
            masks = [m[rows] for m in masks]
        round_reqs = [RoundRequest(c.count, c.group, 0) for c in current]
        predicted = self._predicted(current, masks) if predict and p.predict_k else []
        tier, last_p = 0, None
        for c, pr in predicted:
            if pr.probability != last_p:
                tier, last_p = tier + 1, pr.probability
            round_reqs.append(RoundRequest(max(1, pr.stripe_count), c.group, tier))
        stripe_size = max((c.request.stripe_size or DEFAULT_STRIPE_SIZE_BYTES) for c in current)
        expected = [c.request.bytes_per_stripe(c.count) for c in current]
        mean_bytes = float(np.mean(expected))
        unit = float(PERCENT_SCALE)
        cost = view.cost
        if cost.time_unit_s is not None and osts.rate_bytes_s is not None and len(osts.index):
            # In a time cost, app_weight counts in stripe times on the median OST.
            unit = mean_bytes / float(np.median(osts.rate_bytes_s)) / cost.time_unit_s
        group_costs = [self.books.app_costs(app, osts, unit) for app in group_apps]
        joint = p.predict_mode == "joint" or not predicted
        got = self._solve(view, osts, round_reqs if joint else round_reqs[:len(current)],
                          masks, stripe_size, mean_bytes, group_costs)
        order = StripeOrder(osts)
        for k, c in enumerate(current):
            chosen = got[k]
            if not chosen:
                out[c.pos] = NoSpaceError(
                    f"no OST has room for a {c.request.stripe_size}-byte stripe")
                continue
            ordered = order(chosen)
            note = ""
            if len(chosen) < c.count:
                self.count("clipped", 1)
                note = f"clipped: stripe count {c.count} -> {len(chosen)} (space)"
            self.books.book(ordered, expected[k], c.request.jobid, view.table)
            out[c.pos] = Placement(ordered, self.name, note=note)
        if predicted and not joint:
            # The predicted requests get their own round, on the state the current
            # requests just left (their stripes now count as pending).
            osts = round_arrays(self.books.pending, view)
            later = self._solve(view, osts, round_reqs[len(current):], masks, stripe_size,
                                mean_bytes, group_costs)
            order = StripeOrder(osts)
            got = got[:len(current)] + later
        self._keep(predicted, round_reqs, got, current, order, now)

    def _predicted(self, current: list[CurrentRequest], masks: list[np.ndarray]) -> list[Any]:
        """(request, prediction) of the current requests' applications, most likely first."""
        predictor = self.predictor()
        predicted = []
        seen: set[str] = set()
        for c in current:
            job = c.request.jobid
            if job in seen:
                continue
            seen.add(job)
            if not self.prediction_gate.may_predict(job):
                continue
            for pr in predictor.predict(job, self.params.predict_k,
                                        c.request.stripe_size or DEFAULT_STRIPE_SIZE_BYTES,
                                        c.count, int(masks[c.group].sum())):
                predicted.append((c, pr))
        predicted.sort(key=lambda cp: (-cp[1].probability, cp[1].step))
        return predicted

    def _keep(self, predicted: list[Any], round_reqs: list[RoundRequest], got: list[list[int]],
              current: list[CurrentRequest], order: StripeOrder, now: float) -> None:
        """Keep fully served predicted requests, per application in step order."""
        fresh: dict[str, list[tuple[int, KeptList]]] = {}
        for j, (c, pr) in enumerate(predicted, start=len(current)):
            chosen = got[j]
            if len(chosen) < round_reqs[j].stripes:
                self.count("predicted_dropped", 1)
                continue
            fresh.setdefault(pr.jobid, []).append((pr.step, KeptList(
                now, round_reqs[j].stripes, c.request.stripe_size or DEFAULT_STRIPE_SIZE_BYTES,
                c.request.pool, order(chosen), pr.probability,
                pr.bytes / round_reqs[j].stripes)))
        for job, items in fresh.items():
            items.sort(key=lambda sp: sp[0])
            self.kept.replace(job, [e for _, e in items])
        for c in current:
            if c.request.jobid not in fresh:
                self.kept.drop(c.request.jobid)

    def _solve(self, view: RoundView, osts: OstArrays, reqs: list[RoundRequest],
               masks: list[np.ndarray], stripe_size: int, bytes_per_stripe: float,
               group_costs: list[np.ndarray | None]) -> list[list[int]]:
        """Build and solve one network with the view's cost; the OST rows each request got."""
        got, cost = solve_rows(osts, reqs, masks, view.cost, stripe_size, bytes_per_stripe,
                               prune=self.params.prune, solver=self.params.solver,
                               group_costs=group_costs)
        self.solved(cost)
        return got


def shortlist_rows(view: RoundView, current: list[CurrentRequest],
                   shortlists: dict[str | None, np.ndarray]) -> np.ndarray | None:
    """Rows of the view's candidates a missed round may use: the current requests'
    pools' shortlists (still candidates), or None (the full round) when a pool has none
    yet or too few OSTs for a request's stripe count."""
    lists = []
    for c in current:
        short = shortlists.get(c.request.pool)
        if short is None:
            return None
        lists.append(short)
    idx = np.unique(np.concatenate(lists))
    cand = view.candidates
    pos = np.minimum(np.searchsorted(cand, idx), max(len(cand) - 1, 0))
    rows = pos[cand[pos] == idx] if len(cand) else pos[:0]
    if len(rows) < 2 * max(c.count for c in current):
        return None
    return rows
