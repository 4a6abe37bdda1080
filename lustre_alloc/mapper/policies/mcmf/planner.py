"""The MCMF policy's plan-ahead planner: keeps per request class a queue of OST
lists planned by the flow ahead of the requests, and the next predicted requests of the
applications whose chains predict (Section III-B/C).

A round plans either the classes' lists or the predicted applications' next requests,
never both: pruning keeps as many candidates per request as the round has stripes, so a
few predicted requests in a round of a thousand planned stripes would each get arcs to
every OST (at 3600 OSTs such mixed rounds took 0.2-0.5 s against 30 ms for the classes
alone). Prediction rounds run at most every ``predict_round_s``.

Inline (the simulator) the policy calls :meth:`McmfPlanner.plan` at the end of a request
round that missed; in the service a background thread does
(:mod:`lustre_alloc.mapper.service.background_planner`), and the Markov chains learn there too, off the request
path, from the requests the rounds queued (:meth:`McmfPlanner.learn`).
"""
from __future__ import annotations

import time
from collections import deque
from contextlib import nullcontext
from typing import Any, Callable

import numpy as np

from lustre_alloc.mapper.flow.network import RoundRequest
from lustre_alloc.mapper.flow.ost_lists import PlanJob, PlanSolution, slot_cap, solve_plan
from lustre_alloc.mapper.policies.mcmf.request_round import round_arrays
from lustre_alloc.mapper.policies.mcmf.kept_lists import KeptList, KeptLists
from lustre_alloc.mapper.policies.mcmf.params import McmfParams
from lustre_alloc.mapper.policies.placement import AllocationError
from lustre_alloc.mapper.policies.mcmf.plan_queues import ClassKey, PlanQueues
from lustre_alloc.mapper.policies.mcmf.prediction_gate import PredictionGate
from lustre_alloc.mapper.policies.mcmf.ost_view import RoundView
from lustre_alloc.mapper.predictor.markov import MarkovPredictor
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.pending import PendingOverlay

PLAN_MAX_APPS = 4
"""Applications whose predicted requests one planning round plans, at most."""
LEARN_QUEUE_MAX = 1 << 16
"""Requests waiting for the planner thread to teach their chain, at most; the oldest are
dropped beyond (a planner that cannot keep up loses samples, never memory)."""
PREDICT_ROUND_S = 0.02
"""Default of :attr:`McmfPlanner.predict_round_s`: a planning round for predicted
applications runs at most this often, s; the other rounds plan the classes' lists. In the
background the planner raises it to 9 x the last such round's duration (a round has a
fixed O(OSTs) cost: at 3600 OSTs, rounds every few ms for four applications' predictions
kept a core busy), so predictions take at most a tenth of its time."""


class McmfPlanner:
    """Plan queues, the learn queue and the prediction wishes of one MCMF policy.

    Args:
        params: the policy's parameters.
        plans: the plan queues.
        pending: the pending overlay (decayed and absorbed before a plan).
        kept: the kept predicted lists (a planned prediction lands there).
        gate: the per-application prediction accuracy gate.
        predictor: returns the current Markov predictor (it is replaced on load).
        view: returns the round view of a snapshot.
        solved: called with the placement cost of each planning round committed.
    """

    def __init__(self, params: McmfParams, plans: PlanQueues, pending: PendingOverlay,
                 kept: KeptLists, gate: PredictionGate, predictor: Callable[[], MarkovPredictor],
                 view: Callable[[ClusterSnapshot], RoundView], solved: Callable[[int], None]):
        self.params = params
        self.plans = plans
        self.pending = pending
        self.kept = kept
        self.prediction_gate = gate
        self.predictor = predictor
        self.view = view
        self.inline = params.plan_inline
        self.shortlists: dict[str | None, np.ndarray] = {}
        """pool -> the last planning round's cheapest candidate OSTs: where a request that
        finds no planned list is solved (a small flow instead of one over every OST)."""
        self.predict_round_s = PREDICT_ROUND_S
        self.last_plan_predicted = False
        """True when the last :meth:`plan_prepare` made a round for predictions."""
        self.solved = solved
        self._predicted_round_s = -np.inf
        # (jobid, bytes, pool, stripe count, stripe size, usable OSTs) the background
        # planner teaches the chains (inline, the request round learns itself)
        self._to_learn: deque[tuple[str, int, str | None, int, int, int]] = deque(
            maxlen=LEARN_QUEUE_MAX)
        # jobid -> (pool, stripe count, stripe size) of its last request, for planning its
        # predicted requests
        self.want_predictions: dict[str, tuple[str | None, int, int]] = {}

    # -- learning ----------------------------------------------------------------------
    def queue_learning(self, jobid: str, nbytes: int, pool: str | None, count: int, size: int,
                       n_usable: int) -> None:
        """A request answered: its chain learns it later, in :meth:`learn`."""
        self._to_learn.append((jobid, nbytes, pool, count, size, n_usable))

    def learn(self, most: int | None = None) -> int:
        """Teach the Markov chains the queued requests, at most ``most`` of them (None:
        all); returns how many. The service's planner calls it under the service lock, in
        slices, so the request loop waits for one slice."""
        n = 0
        queue = self._to_learn
        predictor = self.predictor()
        while queue and (most is None or n < most):
            job, nbytes, pool, count, size, n_usable = queue.popleft()
            if count == 0:                  # a file's size at close (queue_size)
                predictor.observe(job, nbytes)
            else:
                if nbytes > 0:
                    predictor.observe(job, nbytes)
                self.want_if_predicts(job, pool, count, size, n_usable)
            n += 1
        return n

    def queue_size(self, jobid: str, nbytes: int) -> None:
        """A file of ``jobid`` closed at ``nbytes`` bytes: its chain learns it later, in
        :meth:`learn`."""
        self._to_learn.append((jobid, nbytes, None, 0, 0, 0))

    def want_if_predicts(self, job: str, pool: str | None, count: int, size: int,
                         n_usable: int) -> None:
        """Remember ``job``'s request class when its chain predicts a next request."""
        if self.params.predict_k and self.predictor().predict(job, 1, size, count, n_usable):
            self.want_predictions.pop(job, None)     # most recent last
            self.want_predictions[job] = (pool, count, size)

    # -- planning ----------------------------------------------------------------------
    def plan(self, snapshot: ClusterSnapshot, only: set[ClassKey] | None = None,
             lock: Any = None, solve: Callable[[PlanJob], PlanSolution] = solve_plan) -> int:
        """Refill the plan queues: one flow over the lists every class (or the classes in
        ``only``) lacks for its target depth, on the current state plus everything placed,
        predicted or planned. Returns the lists queued.

        With ``lock`` (the service's planner thread), the state is read and the lists
        queued under it, but the flow is built and solved outside it by ``solve`` (a
        :class:`~lustre_alloc.mapper.flow.ost_lists.PlanJob` -> :class:`~lustre_alloc.mapper.flow.ost_lists.PlanSolution`
        function: :func:`~lustre_alloc.mapper.flow.ost_lists.solve_plan` here, or the service's
        planner process), so requests keep being answered meanwhile (lists are checked
        again when handed out). In the background, a prediction round's wall time sets
        :attr:`predict_round_s` (9 x, at least :data:`PREDICT_ROUND_S`)."""
        guard = lock if lock is not None else nullcontext()
        with guard:
            if lock is None:
                self.learn()        # the service's planner learned before, in slices
            prepared = self.plan_prepare(snapshot, only)
        if prepared is None:
            return 0
        job, keys, now = prepared
        t0 = time.perf_counter()
        solution = solve(job)
        if not self.inline and self.last_plan_predicted:
            self.predict_round_s = max(PREDICT_ROUND_S, 9.0 * (time.perf_counter() - t0))
        with guard:
            return self.plan_commit(job, keys, now, solution)

    def plan_commit(self, job: PlanJob, keys: list[Any], now: float,
                    solution: PlanSolution) -> int:
        """Queue a solved planning round's lists (call under the service lock); the
        lists queued."""
        self.solved(solution.placement_cost)
        ranked: dict[ClassKey, list[tuple[int, tuple[int, ...]]]] = {}
        kept: dict[str, list[tuple[int, KeptList]]] = {}
        parts: dict[ClassKey, int] = {}
        for k, made in enumerate(solution.lists):
            if not made:
                continue
            if job.requests[k].tier == 0:
                ranked.setdefault(keys[k], []).extend(made)
                parts[keys[k]] = parts.get(keys[k], 0) + 1
            else:
                p, pool, size = keys[k]
                stripes = job.requests[k].stripes
                kept.setdefault(p.jobid, []).append((p.step, KeptList(
                    now, stripes, size, pool, made[0][1], p.probability, p.bytes / stripes)))
        for key, items in ranked.items():
            if parts[key] > 1:      # a class planned as several requests: merge by rank
                items.sort(key=lambda c: c[0])
            self.plans.add(key, [osts for _, osts in items], now)
        for k, req in enumerate(job.requests):
            if req.group < len(solution.shortlists):
                pool = keys[k][0] if req.tier == 0 else keys[k][1]
                self.shortlists[pool] = solution.shortlists[req.group]
        for jobid, items in kept.items():
            if not self.kept.by_job.get(jobid):
                items.sort(key=lambda sp: sp[0])
                self.kept.replace(jobid, [e for _, e in items])
        return sum(len(v) for v in ranked.values()) + sum(len(v) for v in kept.values())

    def plan_prepare(self, snapshot: ClusterSnapshot, only: set[ClassKey] | None = None
                     ) -> tuple[PlanJob, list[Any], float] | None:
        """The next planning round as a :class:`~lustre_alloc.mapper.flow.ost_lists.PlanJob`, with
        each request's class key (or predicted request) and the planning time; None
        when nothing is lacking. Call under the service lock."""
        plans = self.plans
        now = snapshot.time_s
        view = self.view(snapshot)
        self.pending.decay(now)
        self.pending.absorb(view.table, view.key)
        plans.expire(now)
        want = list(self.want_predictions.items())[-PLAN_MAX_APPS:]
        self.last_plan_predicted = False
        if want and now - self._predicted_round_s >= self.predict_round_s:
            demand = []
            self._predicted_round_s = now
            self.last_plan_predicted = True
        else:
            want = []
            demand = plans.demand(now, only)
            if not demand:
                return None
        rounds = _PlanRound(snapshot, view)
        for d in demand:
            rounds.add_class(d, self.params)
        if want:
            self.want_predictions.clear()  # older ones are out of date by now
            rounds.add_predictions(self._predictions(snapshot, view, rounds, want))
        if not rounds.reqs:
            return None
        return rounds.job(round_arrays(self.pending, view), view, self.params), rounds.keys, now

    def _predictions(self, snapshot: ClusterSnapshot, view: RoundView, rounds: "_PlanRound",
                     want: list[tuple[str, tuple[str | None, int, int]]]) -> list[Any]:
        """(prediction, pool, stripe size, group) of the applications in ``want`` with no
        kept lists left, most likely first. Most recently seen first, at most
        :data:`PLAN_MAX_APPS` per round (the rest wait: a planning round stays a few ms)."""
        predicted = []
        predictor = self.predictor()
        for job, (pool, count, size) in want:
            if self.kept.by_job.get(job):
                continue
            g = rounds.group(pool)
            if g is None:
                continue
            n_usable = view.pool(snapshot, pool)[0]
            if not self.prediction_gate.may_predict(job):
                continue
            for p in predictor.predict(job, self.params.predict_k, size, count, n_usable):
                predicted.append((p, pool, size, g))
        predicted.sort(key=lambda x: (-x[0].probability, x[0].step))
        return predicted


class _PlanRound:
    """The requests of one planning round under construction."""

    def __init__(self, snapshot: ClusterSnapshot, view: RoundView):
        self.snapshot = snapshot
        self.view = view
        self.groups: dict[str | None, int] = {}
        self.masks: list[np.ndarray] = []
        self.reqs: list[RoundRequest] = []
        self.lists: list[int] = []
        self.keys: list[Any] = []
        self.sizes: list[int] = []
        self.bytes: list[float] = []

    def group(self, pool: str | None) -> int | None:
        """The eligibility group of ``pool`` (None for a pool that no longer exists)."""
        if pool not in self.groups:
            try:
                _, mask = self.view.pool(self.snapshot, pool)
            except AllocationError:
                return None
            self.groups[pool] = len(self.masks)
            self.masks.append(mask)
        return self.groups[pool]

    def add_class(self, d: Any, params: McmfParams) -> None:
        """The lists class demand ``d`` lacks: one request per list, or one aggregated
        request dealt into lists after the solve (``RoundRequest.per_ost``)."""
        g = self.group(d.pool)
        if g is None:
            return
        if d.lists > params.plan_aggregate_above:
            # a deep class: one aggregated request, its stripes per OST capped
            stripes = d.lists * d.stripe_count
            per_ost = min(d.lists, slot_cap(stripes, int(self.masks[g].sum())))
            self.reqs.append(RoundRequest(stripes, g, 0, per_ost=per_ost))
            self.lists.append(d.lists)
            self.keys.append(d.key)
        else:
            self.reqs.extend(RoundRequest(d.stripe_count, g, 0) for _ in range(d.lists))
            self.lists.extend([1] * d.lists)
            self.keys.extend([d.key] * d.lists)
        self.sizes.append(d.stripe_size)
        self.bytes.append(d.bytes_per_stripe)

    def add_predictions(self, predicted: list[Any]) -> None:
        """Predicted requests, one tier per distinct probability (most likely first)."""
        tier, last_p = 0, None
        for p, pool, size, g in predicted:
            if p.probability != last_p:
                tier, last_p = tier + 1, p.probability
            self.reqs.append(RoundRequest(max(1, p.stripe_count), g, tier))
            self.lists.append(1)
            self.keys.append((p, pool, size))
            self.sizes.append(size)
            self.bytes.append(p.bytes / max(1, p.stripe_count))

    def job(self, osts: Any, view: RoundView, params: McmfParams) -> PlanJob:
        # An automatically aggregated round: at most slot_cap of its stripes on one OST
        # over all its classes (each class's cap alone would add up per OST).
        capped = any(n > 1 for n in self.lists)
        max_slots = (slot_cap(sum(r.stripes for r in self.reqs),
                              int(np.logical_or.reduce(self.masks).sum())) if capped else None)
        return PlanJob(osts, tuple(self.reqs), tuple(self.lists), tuple(self.masks),
                       max(self.sizes), float(np.mean(self.bytes)), view.cost, params.prune,
                       params.solver, max_slots)
