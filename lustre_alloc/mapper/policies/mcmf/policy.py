"""The MCMF placement policy: Markov prediction + min-cost max-flow (Paul et al. 2017, Section III).

Orchestration of small parts (Firmament's split of cost model, graph and solver, one level
up; ``../docs/architecture.md``):

* :mod:`lustre_alloc.mapper.policies.mcmf.params`: the parameters, read from ``[policy.mcmf]``;
* :mod:`lustre_alloc.mapper.policies.mcmf.ost_view`: what a round derives from the OSTs (usable OSTs,
  stragglers, rates, regime, the round's one cost model), per snapshot version;
* :mod:`lustre_alloc.mapper.policies.mcmf.placed_books`: what this mapper placed that the samples do not show
  yet (and each application's recent stripes);
* :mod:`lustre_alloc.mapper.policies.mcmf.prediction_gate`: whether an application's predictions are used;
* :mod:`lustre_alloc.mapper.policies.mcmf.request_round`: the request round itself;
* :mod:`lustre_alloc.mapper.policies.mcmf.planner`: lists planned ahead, and off-path learning.

One round (:meth:`McmfPolicy.allocate_batch`):

1. Every request is checked as Lustre would (pool, usable OSTs, stripe count clipped to
   them: :mod:`lustre_alloc.mapper.state.ost_health`). Stragglers leave the round.
2. Each request's bytes teach the application's Markov chain (Section III-B; in the
   service, off the request path). A request that matches the head of its application's
   kept predicted lists is answered at once from it; else a list planned ahead for its
   class (pool, stripe count, stripe size band, size band), if any.
3. The rest form one request round (:class:`~lustre_alloc.mapper.policies.mcmf.request_round.RequestRound`).

While load is uniform and space within the band (``regime``), Lustre's round-robin answers
instead; the chain still learns and the stripes still count as pending. A leased class is
then left to Lustre's own allocator (``alike_to_lustre``, :meth:`McmfPolicy.leaves_to_lustre`):
its creates get no list at all. The policy does
not gate itself on MDS CPU: :class:`lustre_alloc.mapper.policies.gate.GatedPolicy` does (``needs_gate``),
in the simulator and in the service alike.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lustre_alloc.common.lustre import DEFAULT_STRIPE_SIZE_BYTES
from lustre_alloc.mapper.flow.costs import CostModel, make_cost_model
from lustre_alloc.mapper.flow.ost_lists import PlanJob, PlanSolution, solve_plan
from lustre_alloc.mapper.policies.mcmf.request_round import CurrentRequest, RequestRound, shortlist_rows
from lustre_alloc.mapper.policies.mcmf.kept_lists import KeptLists
from lustre_alloc.mapper.policies.mcmf.learned_state import learned_extras, load_learned, save_learned
from lustre_alloc.mapper.policies.mcmf.params import McmfParams
from lustre_alloc.mapper.policies.mcmf.planner import PREDICT_ROUND_S, McmfPlanner
from lustre_alloc.mapper.policies.mcmf.placed_books import PlacedBooks
from lustre_alloc.mapper.policies.placement import (AllocationError, BatchPolicy, CreateRequest, NoSpaceError,
                                       Placement)
from lustre_alloc.mapper.policies.mcmf.plan_queues import ClassKey, PlanQueues, bytes_band, stripe_size_band
from lustre_alloc.mapper.policies.mcmf.prediction_gate import PredictionGate
from lustre_alloc.mapper.policies.mcmf.regime import ROUND_ROBIN
from lustre_alloc.mapper.policies.mcmf.returned_lists import ReturnedLists
from lustre_alloc.mapper.policies.round_robin import RoundRobin
from lustre_alloc.mapper.policies.mcmf.ost_view import RoundView, RoundViews
from lustre_alloc.mapper.predictor.markov import MarkovConfig, MarkovPredictor
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import resolve_stripe_count
from lustre_alloc.mapper.state.pending import PendingOverlay

__all__ = ["PREDICT_ROUND_S", "McmfFlowOnly", "McmfParams", "McmfPolicy"]


class McmfPolicy(BatchPolicy):
    """Prediction + min-cost max-flow placement.

    Args:
        seed: seed of the round-robin regime's walk (the flow itself is deterministic).
        params: :class:`~lustre_alloc.mapper.policies.mcmf.params.McmfParams` fields (``[policy.mcmf]``).

    Raises:
        TypeError: an unknown parameter.
        ValueError: a parameter out of range (the message names it).
    """
    name = "mcmf"
    needs_gate = True

    def __init__(self, seed: int = 0, **params: Any):
        self.params = p = McmfParams(**params)
        self.cost_model: CostModel = make_cost_model(p.cost_model, **(p.cost_params or {}))
        space = (make_cost_model(p.space_cost_model, **(p.space_cost_params or {}))
                 if p.space_cost_model else None)
        self.stats: dict[str, int] = {"rounds": 0, "predicted_hits": 0, "predicted_misses": 0,
                                      "predicted_dropped": 0, "clipped": 0,
                                      "stragglers_excluded": 0, "regime_rr_requests": 0,
                                      "sized_by_job_stats": 0}
        self.views = RoundViews(p, self.cost_model, space, lambda k: self._count(k, 1))
        self.markov_config = MarkovConfig(**(p.markov or {}))
        self.predictor = MarkovPredictor(self.markov_config)
        self.prediction_gate = PredictionGate(p.predict_min_accuracy, p.predict_min_trials,
                                   p.predict_window, self.markov_config.max_apps)
        self.pending = PendingOverlay(p.pending_half_life_s)
        self.books = PlacedBooks(self.pending, p.app_weight, p.app_half_life_s,
                                 self.markov_config.max_apps)
        self.kept = KeptLists(self.pending, p.cache_ttl_s)
        self.last_solve_cost = 0
        """Placement cost (Eq. 1, bonuses removed) of the last flow solved, request round
        or planning round."""
        self.request_round = RequestRound(p, self.books, self.kept, self.prediction_gate, lambda: self.predictor,
                                self._count, self._solved, self.name)
        self.planner = (McmfPlanner(p, PlanQueues(self.pending, p.plan_ttl_s, p.plan_horizon_s,
                                                  p.plan_max_depth),
                                    self.pending, self.kept, self.prediction_gate, lambda: self.predictor,
                                    self.views.view, self._solved)
                        if p.plan_ahead else None)
        self._rr = RoundRobin(seed=seed)
        self.returned = ReturnedLists(p.plan_ttl_s)
        """Lists leased and given back unused: the round-robin regime hands them out again
        first (:mod:`lustre_alloc.mapper.policies.mcmf.returned_lists`)."""
        self._members_memo: dict[tuple, frozenset[int]] = {}
        self.last_stragglers: set[int] = set()

    def _solved(self, cost: int) -> None:
        self.last_solve_cost = cost

    def _count(self, key: str, n: int) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    # -- what the service and the simulator read -------------------------------------
    @property
    def plans(self) -> PlanQueues | None:
        """The plan queues (None without plan ahead)."""
        return None if self.planner is None else self.planner.plans

    @property
    def kept_lists(self) -> dict[str, Any]:
        """jobid -> its queue of kept :class:`~lustre_alloc.mapper.policies.mcmf.kept_lists.KeptList`."""
        return self.kept.by_job

    @property
    def pending_bytes(self) -> dict[int, float]:
        """OST index -> bytes placed that the statistics do not show yet."""
        return self.pending.bytes_by_ost()

    @property
    def pending_stripes(self) -> dict[int, float]:
        """OST index -> stripes placed since the OST's last statistics sample."""
        return self.pending.stripes_by_ost()

    @property
    def reserved_stripes(self) -> dict[int, float]:
        """OST index -> stripes of kept lists not handed out yet."""
        return self.pending.reserved_by_ost()

    def predicted_load(self) -> dict[int, float]:
        """Per-OST bytes this mapper placed that the statistics do not show yet, plus the
        expected bytes of predicted lists kept for upcoming requests; OST index -> bytes.
        (The service exports it as a metric: :class:`~lustre_alloc.mapper.policies.placement.BooksPlacements`.)"""
        load = self.pending.bytes_by_ost()
        for queue in self.kept.values():
            for entry in queue:
                for i in entry.osts:
                    load[i] = load.get(i, 0.0) + entry.bytes_per_stripe
        return load

    def book_observed(self, snapshot: ClusterSnapshot, osts: Sequence[int],
                      bytes_per_stripe: float, jobid: str) -> None:
        """A layout Lustre's allocator chose (a shadow report): its bytes are pending on
        those OSTs until the samples show them, as a list this mapper handed out would be."""
        self.books.book(list(osts), bytes_per_stripe, jobid, self.views.view(snapshot).table)

    def unbook(self, osts: Sequence[int], bytes_per_stripe: float) -> None:
        """A list handed out and never used (a lease returned or expired): off the books."""
        self.books.unbook(list(osts), bytes_per_stripe)

    def lease_returned(self, osts: Sequence[int]) -> None:
        """A leased list given back unused: kept for the round-robin regime to hand out
        again (:mod:`lustre_alloc.mapper.policies.mcmf.returned_lists`). Not a shadow
        decision Lustre's layout replaced: that one was Lustre's choice to make."""
        self.returned.give_back(osts)

    def straggler_osts(self) -> list[int]:
        """OSTs the last round left out as stragglers (:mod:`lustre_alloc.mapper.flow.stragglers`)."""
        return sorted(int(i) for i in self.last_stragglers)

    def ost_speed_ratios(self) -> dict[int, float]:
        """Each measured OST's speed estimate over the median (:mod:`lustre_alloc.mapper.speed.rates`)."""
        return self.views.rate_tracker.ratios_to_median()

    def forget_ost_speeds(self, osts: Sequence[int]) -> list[int]:
        """Forget ``osts``' speed estimates (:meth:`lustre_alloc.mapper.speed.rates.OstRateTracker.forget`);
        the next round builds its view afresh. Returns the indices that had one."""
        forgotten = self.views.rate_tracker.forget(osts)
        self.views.invalidate()
        return forgotten

    def tracks_jobid(self, jobid: str) -> bool:
        """True when the predictor holds a chain for ``jobid`` (the service's bound on
        new applications per client reads it)."""
        return jobid in self.predictor

    # -- persistence (PersistsState) -------------------------------------------------
    def save_state(self, path: str | Path) -> Path:
        """Write the learned predictor and the OST rate memory to ``path`` atomically
        (:mod:`lustre_alloc.mapper.policies.mcmf.learned_state`)."""
        return save_learned(self.predictor, self.views.rate_tracker, path)

    def load_state(self, path: str | Path) -> int:
        """Replace the predictor with the one saved at ``path`` and restore the OST rate
        memory saved with it; returns the records skipped as unusable
        (:func:`lustre_alloc.mapper.policies.mcmf.learned_state.load_learned`).

        Raises:
            PredictorStateError: missing, corrupt or incompatible file.
        """
        self.predictor, skipped = load_learned(path, self.markov_config, self.views.rate_tracker)
        return skipped

    def learned_extras(self) -> dict[str, Any]:
        """The OST rate memory, saved beside the predictor's records."""
        return learned_extras(self.views.rate_tracker)

    def learned_predictor(self) -> MarkovPredictor:
        """The predictor (the service saves it in slices, :mod:`lustre_alloc.mapper.service.persist`)."""
        return self.predictor

    # -- the policy ------------------------------------------------------------------
    def allocate_batch(self, snapshot: ClusterSnapshot,
                       requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
        """One round: a :class:`Placement` or the :class:`AllocationError` of each request."""
        now = snapshot.time_s
        self.returned.stamp(now)
        view = self.views.view(snapshot)
        self.pending.decay(now)
        self.pending.absorb(view.table, view.key)
        self.kept.expire(now)
        self.last_stragglers = view.stragglers
        if view.regime is not None and view.regime.mode == ROUND_ROBIN:
            return self._round_robin(snapshot, view, requests, self._sized(snapshot, requests))
        out: list[Placement | AllocationError | None] = [None] * len(requests)
        groups: dict[tuple[str | None, str], int] = {}  # (pool, jobid or "") -> group
        masks: list[np.ndarray] = []
        group_apps: list[str] = []
        current: list[CurrentRequest] = []
        missed = False
        sized = self._sized(snapshot, requests)
        for pos, req in enumerate(sized):
            answer = self._answer(snapshot, view, req, now, requests[pos].expected_bytes)
            if answer is None:
                missed = True
                answer = self._join_round(view, snapshot, req, pos, groups, masks, group_apps,
                                          current)
            if answer is not None:
                out[pos] = answer
        planner = self.planner
        inline = planner is None or planner.inline
        if current:
            rows = None if inline else shortlist_rows(view, current, planner.shortlists)
            self.request_round.run(view, masks, group_apps, current, out, now, inline, rows)
        if planner is not None and planner.inline and (missed or planner.want_predictions):
            self.plan(snapshot)             # the planner, run synchronously
        return out  # type: ignore[return-value]

    def leaves_to_lustre(self, snapshot: ClusterSnapshot, request: CreateRequest) -> str:
        """``"regime round_robin"`` while the regime finds the OSTs alike and
        ``alike_to_lustre`` is on: Lustre's own rotation is what the regime would emulate,
        so a leased class's creates may be left to it (no list, nothing booked: the load
        shows in the next samples; the gate adds that Lustre must be placing round-robin,
        :meth:`lustre_alloc.mapper.policies.gate.GatedPolicy.leaves_to_lustre`); ""
        otherwise. Nothing is learned from such a class's lease
        requests: they say how many layouts a client wants, not what its files hold."""
        if not (self.params.regime and self.params.alike_to_lustre):
            return ""
        regime = self.views.view(snapshot).regime
        if regime is None or regime.mode != ROUND_ROBIN:
            return ""
        return "regime round_robin"

    def prepare(self, snapshot: ClusterSnapshot) -> None:
        """Build the round view of ``snapshot`` (OST table, speed estimates, stragglers)
        and the round-robin regime's arrays; the first round reuses them while the
        snapshot's version holds."""
        self.views.view(snapshot)
        self._rr.prepare(snapshot)

    def _answer(self, snapshot: ClusterSnapshot, view: RoundView, req: CreateRequest,
                now: float, announced: int) -> Placement | AllocationError | None:
        """A request's answer without a flow: an error, a kept predicted list or a planned
        list; None when it needs the round (after it learned ``announced``, the bytes the
        request announced: ``req`` may carry a predicted size, never learned)."""
        try:
            n_usable, _ = view.pool(snapshot, req.pool)
            count = resolve_stripe_count(req.stripe_count, n_usable)
        except AllocationError as e:
            return e
        if count == 0:
            return NoSpaceError(f"no usable OST in pool {req.pool!r}" if req.pool
                                else "no usable OST")
        size = req.stripe_size or DEFAULT_STRIPE_SIZE_BYTES
        planner = self.planner
        if planner is not None and not planner.inline:
            # The chain learns in the planner's thread (off the request path).
            planner.queue_learning(req.jobid, announced, req.pool, count, size, n_usable)
        elif announced > 0:
            self.predictor.observe(req.jobid, announced)
        hit = self._take_kept(req, count, view, now)
        if hit is not None:
            return hit
        if planner is None:
            return None
        # An application whose chain predicts gets its own lists: the planner plans its
        # next requests; this request takes its class's list meanwhile.
        if planner.inline:
            planner.want_if_predicts(req.jobid, req.pool, count, size, n_usable)
        bps = req.bytes_per_stripe(count)
        key = (req.pool, count, stripe_size_band(size), bytes_band(bps))
        planner.plans.note(key, now, size, bps)
        osts = planner.plans.take(key, view.table, view.stragglers, now)
        if osts is None:
            return None
        self.books.book(osts, bps, req.jobid, view.table)
        return Placement(osts, self.name, note="planned")

    def _join_round(self, view: RoundView, snapshot: ClusterSnapshot, req: CreateRequest,
                    pos: int, groups: dict[tuple[str | None, str], int], masks: list[np.ndarray],
                    group_apps: list[str], current: list[CurrentRequest]) -> None:
        """Add ``req`` to the round. Requests share a group (candidate set) unless
        per-application costs differ."""
        n_usable, mask = view.pool(snapshot, req.pool)
        count = resolve_stripe_count(req.stripe_count, n_usable)
        key = (req.pool, req.jobid if self.params.app_weight else "")
        if key not in groups:
            groups[key] = len(masks)
            masks.append(mask)
            group_apps.append(req.jobid)
        current.append(CurrentRequest(pos, req, count, groups[key]))

    def _take_kept(self, req: CreateRequest, count: int, view: RoundView,
                   now: float) -> Placement | None:
        """The head of ``req``'s application's kept predicted lists, if it matches."""
        head, missed = self.kept.take(req.jobid, count, req.stripe_size or DEFAULT_STRIPE_SIZE_BYTES,
                                      req.pool, view.table, view.stragglers, now)
        if missed:
            self.stats["predicted_misses"] += 1
            self.prediction_gate.score(req.jobid, False)
        if head is None:
            return None
        self.stats["predicted_hits"] += 1
        self.prediction_gate.score(req.jobid, True)
        self.books.book(head.osts, req.bytes_per_stripe(count), req.jobid, view.table)
        return Placement(head.osts, self.name, note="predicted")

    def _round_robin(self, snapshot: ClusterSnapshot, view: RoundView,
                     requests: Sequence[CreateRequest],
                     sized: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
        """The round-robin regime: Lustre's RR for every request, a list given back unused
        first (:mod:`lustre_alloc.mapper.policies.mcmf.returned_lists`); the predictor still
        learns and the placed stripes (at ``sized``'s bytes) still count as pending (the
        flow may take over at the next sample)."""
        out: list[Placement | AllocationError] = []
        for announced, req in zip(requests, sized):
            try:
                got = self._returned_list(snapshot, view, req) or self._rr.allocate(snapshot,
                                                                                     req)
            except AllocationError as e:
                out.append(e)
                continue
            if announced.expected_bytes > 0:
                self.predictor.observe(req.jobid, announced.expected_bytes)
            self.stats["regime_rr_requests"] += 1
            self.books.book(got.osts, req.bytes_per_stripe(len(got.osts)), req.jobid,
                            view.table)
            out.append(Placement(got.osts, self.name, note="regime round_robin"))
        return out

    def _returned_list(self, snapshot: ClusterSnapshot, view: RoundView,
                       req: CreateRequest) -> Placement | None:
        """The oldest list given back unused that ``req`` may have: its resolved stripe
        count, every OST in its pool, usable and no straggler. None when none is kept."""
        if not len(self.returned):
            return None
        members, count = self._rr.pool_cache.members_and_stripe_count(snapshot, req.pool,
                                                                      req.stripe_count)
        memo_key = (view.key, req.pool)
        allowed = self._members_memo.get(memo_key) if view.key is not None else None
        if allowed is None:         # O(members) once per pool and state version
            allowed = frozenset(o.index for o in members)
            if view.key is not None:
                if len(self._members_memo) > 64:
                    self._members_memo.clear()
                self._members_memo[memo_key] = allowed

        def fits(osts: tuple[int, ...]) -> bool:
            return (allowed.issuperset(osts) and view.table.usable_at(osts)
                    and not any(i in view.stragglers for i in osts))

        osts = self.returned.take(count, fits, snapshot.time_s)
        return None if osts is None else Placement(osts, self._rr.name)

    # -- sizes (LearnsSizes) -------------------------------------------------------
    def learn_sizes(self, jobid: str, sizes: Sequence[int]) -> int:
        """Teach ``jobid``'s chain the sizes its files had at close (bytes, in close order;
        the shim's close reports): through the planner's queue when it learns off the
        request path, else at once. Returns how many were taken (negative sizes are not)."""
        planner = self.planner
        n = 0
        for size in sizes:
            if size < 0:
                continue
            if planner is not None and not planner.inline:
                planner.queue_size(jobid, size)
            else:
                self.predictor.observe(jobid, size)
            n += 1
        return n

    def _sized(self, snapshot: ClusterSnapshot,
               requests: Sequence[CreateRequest]) -> Sequence[CreateRequest]:
        """Each request that announces no size, at its job's bytes per create from job_stats
        (``size_from_job_stats``); unchanged when it does not know."""
        if not self.params.size_from_job_stats:
            return requests
        job_sizes = snapshot.job_sizes
        out = list(requests)
        for i, req in enumerate(requests):
            if req.expected_bytes > 0 or job_sizes is None:
                continue
            size = int(job_sizes.bytes_per_create(req.jobid, snapshot.time_s) or 0)
            if size > 0:
                self.stats["sized_by_job_stats"] += 1
                out[i] = replace(req, expected_bytes=size)
        return out

    # -- planning ahead and learning (PlansAhead) ---------------------------
    def plan_in_background(self) -> None:
        """The service's planner thread plans from now on: rounds no longer plan inline,
        and the chains learn in :meth:`learn`."""
        if self.planner is not None:
            self.planner.inline = False

    def stop_planning(self) -> None:
        """Plan nothing ahead: every request is solved in a round (``plan_ahead = false``
        in the service's configuration)."""
        self.planner = None

    def learn(self, most: int | None = None) -> int:
        """Teach the chains what the request path queued (:meth:`McmfPlanner.learn`)."""
        return 0 if self.planner is None else self.planner.learn(most)

    def plan(self, snapshot: ClusterSnapshot, only: set[ClassKey] | None = None,
             lock: Any = None, solve: Any = solve_plan) -> int:
        """Refill the plan queues (:meth:`McmfPlanner.plan`); 0 without plan ahead."""
        return 0 if self.planner is None else self.planner.plan(snapshot, only, lock, solve)

    def plan_prepare(self, snapshot: ClusterSnapshot, only: set[ClassKey] | None = None
                     ) -> tuple[PlanJob, list[Any], float] | None:
        """The next planning round (:meth:`McmfPlanner.plan_prepare`)."""
        return None if self.planner is None else self.planner.plan_prepare(snapshot, only)

    def plan_commit(self, job: PlanJob, keys: list[Any], now: float,
                    solution: PlanSolution) -> int:
        """Queue a solved planning round's lists (:meth:`McmfPlanner.plan_commit`)."""
        return 0 if self.planner is None else self.planner.plan_commit(job, keys, now, solution)


class McmfFlowOnly(McmfPolicy):
    """MCMF without the predictor (``predict_k=0``), without plan queues and without the
    switch to Lustre's RR (``regime=False``): every request is solved by the flow in its own
    round with the current state. Registered as ``mcmf_flow`` so a scenario can compare it
    with the default ``mcmf`` in the same run (docs/placement.md)."""
    name = "mcmf_flow"

    def __init__(self, seed: int = 0, **params: Any):
        params.setdefault("predict_k", 0)
        params.setdefault("plan_ahead", False)
        params.setdefault("regime", False)
        super().__init__(seed=seed, **params)
