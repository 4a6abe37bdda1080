"""The MCMF placement policy: Markov prediction + min-cost max-flow (Paul et al. 2017, Section III).

One round (``allocate_batch``):

1. Every request is checked as Lustre would (pool, usable OSTs, stripe count clipped to
   them: :mod:`mapper.state.ost_health`). Stragglers (:mod:`mapper.flow.stragglers`) leave the round.
2. Each request's bytes teach the application's Markov chain (Section III-B). A request
   that matches the head of its application's *predicted* OST lists (same stripe count,
   stripe size and pool; lists still usable; younger than ``cache_ttl_s``) is answered
   at once from it: that list was chosen in an earlier round, counting this request.
3. The other requests, plus the next ``predict_k`` predicted requests of each of their
   applications, form the flow network (:mod:`mapper.flow.network`, costs from
   :mod:`mapper.flow.costs`), solved by OR-Tools (:mod:`mapper.flow.solver`). Current
   requests are served first; when the round does not fit, predicted requests are
   dropped least likely first; a current request that still cannot get all its stripes
   gets fewer, as Lustre clips a stripe count, and the placement's note says so.
4. Current requests get their OSTs in stripe order interleaved across OSSes (like
   Lustre's round-robin, consecutive stripes on different servers). Predicted requests
   that got all their stripes are kept for step 2.

Between statistics samples the mapper would otherwise decide every round from the same
numbers and pile stripes on the OSTs that looked best 5 s ago; it therefore counts what
it placed itself (:class:`mapper.state.pending.PendingOverlay`: pending bytes and stripes
per OST, and the reservations of kept lists, :mod:`mapper.policies.kept_lists`). The
per-OST state comes from :class:`mapper.state.arrays.OstTable` (kept in place by the
state store; rebuilt per snapshot version otherwise), so a round derives its candidate
arrays with numpy indexing, never a Python loop over OSTs.

The policy does not gate itself on MDS CPU: :class:`mapper.policies.gate.GatedPolicy` does
(``needs_gate``), in the simulator and in the service alike.
"""
from __future__ import annotations

from collections import OrderedDict, deque
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mapper.state.arrays import OstArrays
from mapper.flow.costs import PERCENT_SCALE, TIME_UNIT_S, make_cost_model
from mapper.flow.rates import OstRateTracker
from mapper.policies.regime import FLOW, ROUND_ROBIN, Regime, RegimeThresholds, classify
from mapper.policies.round_robin import RoundRobin
from mapper.flow.network import RoundRequest, build_network
from mapper.flow.round_solve import (PlanJob, PlanSolution, StripeOrder, slot_cap, solve_plan,
                                     solve_rows)
from mapper.flow.solver import SOLVERS
from mapper.flow.stragglers import (STRAGGLER_FACTOR, STRAGGLER_MAX_FRACTION, STRAGGLER_MIN_EXCESS_S,
                                    slowest_outliers, straggler_indices)
from mapper.policies.kept_lists import KeptList, KeptLists
from mapper.policies.plan_queues import ClassKey, PlanQueues, bytes_band, stripe_size_band
from mapper.policies.placement import (AllocationError, BatchPolicy, CreateRequest, NoSpaceError,
                                       Placement)
from mapper.predictor.markov import MarkovConfig, MarkovPredictor
from mapper.predictor.markov_store import load_predictor, save_predictor
from mapper.state.arrays import OstTable, TableSync, ost_arrays
from mapper.state.cluster_state import ClusterSnapshot
from mapper.state.ost_health import pool_members, resolve_stripe_count
from mapper.state.pending import PendingOverlay

DEFAULT_STRIPE_SIZE = 1 << 20
PLAN_MAX_APPS = 4
LEARN_QUEUE_MAX = 1 << 16
PREDICT_ROUND_S = 0.02
"""Default of :attr:`McmfPolicy.predict_round_s`: a planning round for predicted
applications runs at most this often, s; the other rounds plan the classes' lists. The
service's planner raises it to 9 x the last such round's duration (a round has a fixed
O(OSTs) cost: at 3600 OSTs, rounds every few ms for four applications' predictions kept a
core busy), so predictions take at most a tenth of its time."""
"""Requests waiting for the planner thread to teach their chain, at most; the oldest are
dropped beyond (a planner that cannot keep up loses samples, never memory)."""
"""Applications whose predicted requests one planning round plans, at most."""


@dataclass(slots=True)
class AppStripes:
    """Stripes one application received recently, per OST index (the per-application
    spreading term, ``app_weight``), decayed with ``app_half_life_s`` up to ``as_of_s``
    (seconds on the policy's pending clock)."""
    as_of_s: float
    per_ost: dict[int, float] = field(default_factory=dict)


@dataclass
class _View:
    """Per-snapshot-version state of a round: usable OSTs, stragglers, candidate OST
    indices (ascending), their arrays, and per pool the usable count and candidate mask."""
    table: OstTable
    usable_count: int
    stragglers: set[int]
    candidates: np.ndarray
    base: OstArrays
    pools: dict[str | None, tuple[int, np.ndarray]] = field(default_factory=dict)
    regime: Any = None

    def pool(self, snapshot: ClusterSnapshot, pool: str | None) -> tuple[int, np.ndarray]:
        """(usable OSTs in the pool, mask over candidates). Raises InvalidRequestError
        for an unknown pool (never cached)."""
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


@dataclass
class _Current:
    pos: int                  # position in the batch
    request: CreateRequest
    count: int                # resolved stripe count
    group: int


class McmfPolicy(BatchPolicy):
    """Prediction + min-cost max-flow placement.

    Args:
        seed: unused (the policy is deterministic); accepted like every policy's.
        cost_model: ``"rate"`` (default: expected completion time from measured rates),
            ``"convex"`` (space and queue) or ``"paper"`` (:mod:`mapper.flow.costs`).
        cost_params: parameters of the cost model (alpha, beta, weights).
        predict_k: predicted requests per application per round (0 disables prediction).
        markov: :class:`MarkovConfig` fields.
        solver: ``"ortools"`` (default) or ``"networkx"`` (the paper's; slow).
        prune: exact candidate pruning (:mod:`mapper.flow.network`).
        straggler_factor, straggler_min_excess_s, straggler_max_fraction: the straggler
            rule (:mod:`mapper.flow.stragglers`).
        pending_half_life_s: half-life of the placed-but-not-yet-visible estimate, s.
        cache_ttl_s: how long a predicted request's OST list stays valid, s (0: never
            answer from predicted lists; predictions then only shape each round).
        app_weight: points per stripe an application already has on an OST (recently),
            added to its request arcs: an application's files spread over OSTs the way
            round-robin spreads them, so that files which keep growing after their
            creation (appends; the mapper only sees the first write) do not pile up.
        app_half_life_s: decay of that count, s.
        predict_mode: ``"joint"`` (the paper: current and predicted requests in one
            flow) or ``"after"`` (current requests first, then the predicted ones in a
            second flow on the state the current ones left).
        plan_ahead: keep per request class a queue of OST lists planned by the flow
            ahead of the requests (:mod:`mapper.policies.plan_queues`); a request that
            no kept prediction answers pops its class's list in O(stripe count).
        plan_ttl_s, plan_horizon_s, plan_max_depth: the plan queues' TTL (s), planning
            horizon (s) and depth cap (:class:`~mapper.policies.plan_queues.PlanQueues`).
        plan_inline: run the planner synchronously at the end of a request that missed
            or named a predictable application (the simulator); False when a background
            planner calls :meth:`plan` (the service).
        plan_aggregate: plan every class's lists as one flow request dealt into lists
            (same optimum, much smaller network at thousands of OSTs); off by default:
            on paper-32ost it balanced worse (OST max/mean 1.46 vs 1.33, docs/placement.md).
        plan_aggregate_above: a class lacking more lists than this is planned as one
            aggregated request with at most :func:`~mapper.flow.round_solve.slot_cap`
            stripes per OST (a deep queue at thousands of requests/s would otherwise be
            hundreds of request nodes x thousands of OSTs).
        rate_smoothing: weight of a new sample in each OST's smoothed write rate
            (:mod:`mapper.flow.rates`; the ``rate`` cost model's ``r_j``).
        latency_smoothing: weight of a new sample in the smoothed brw_stats RPC time the
            ``rate`` cost sees (1: the last sample).
        regime: switch to Lustre's round-robin while load is uniform and space within
            the band (:mod:`mapper.policies.regime`), the flow otherwise.
        regime_params: :class:`mapper.policies.regime.RegimeThresholds` fields.
        space_cost_model, space_cost_params: with ``regime``, the cost model of the flow
            while load is uniform but space is not (None: ``cost_model`` always).
        predict_min_accuracy: predict an application's requests only while the share of
            its predicted lists that were used is at least this (0: always predict).
        predict_min_trials: lists judged before the accuracy is trusted.
        predict_window: outcomes after which the counts halve; also the probe period
            of an application below the threshold.
    """
    name = "mcmf"
    needs_gate = True

    def __init__(self, seed: int = 0, cost_model: str = "rate",
                 cost_params: dict[str, float] | None = None, predict_k: int = 4,
                 markov: dict[str, Any] | None = None, solver: str = "ortools", prune: bool = True,
                 straggler_factor: float = STRAGGLER_FACTOR,
                 straggler_min_excess_s: float = STRAGGLER_MIN_EXCESS_S,
                 straggler_max_fraction: float = STRAGGLER_MAX_FRACTION,
                 pending_half_life_s: float = 300.0, cache_ttl_s: float = 5.0,
                 app_weight: float = 0.0, app_half_life_s: float = 3600.0,
                 predict_mode: str = "joint", plan_ahead: bool = True,
                 plan_ttl_s: float = 2.5, plan_horizon_s: float = 1.0,
                 plan_max_depth: int = 1024, plan_inline: bool = True,
                 plan_aggregate: bool = False, plan_aggregate_above: int = 8,
                 rate_smoothing: float = 0.05,
                 latency_smoothing: float = 1.0, regime: bool = False,
                 regime_params: dict[str, float] | None = None,
                 space_cost_model: str | None = None,
                 space_cost_params: dict[str, float] | None = None,
                 predict_min_accuracy: float = 0.0, predict_min_trials: int = 8,
                 predict_window: int = 32):
        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r}; known: {', '.join(SOLVERS)}")
        if type(predict_k) is not int or predict_k < 0:
            raise ValueError(f"predict_k must be an integer >= 0, got {predict_k!r}")
        if pending_half_life_s <= 0 or cache_ttl_s < 0:
            raise ValueError("pending_half_life_s must be > 0 and cache_ttl_s >= 0")
        self.cost_model = make_cost_model(cost_model, **(cost_params or {}))
        self.space_cost_model = (make_cost_model(space_cost_model, **(space_cost_params or {}))
                                 if space_cost_model else None)
        self._round_cost = self.cost_model
        self.rate_tracker = OstRateTracker(rate_smoothing, latency_smoothing=latency_smoothing)
        self.regime = regime
        self.regime_thresholds = RegimeThresholds(**(regime_params or {}))
        self._rr = RoundRobin(seed=seed)
        if not 0 <= predict_min_accuracy <= 1 or predict_min_trials < 0 or predict_window < 1:
            raise ValueError("predict_min_accuracy must be in [0, 1], predict_min_trials >= 0, "
                             "predict_window >= 1")
        self.predict_min_accuracy = predict_min_accuracy
        self.predict_min_trials = predict_min_trials
        self.predict_window = predict_window
        self.app_accuracy: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._probe: dict[str, int] = {}
        self.predict_k = predict_k
        self.markov_config = MarkovConfig(**(markov or {}))
        self.predictor = MarkovPredictor(self.markov_config)
        self.solver = solver
        self.prune = prune
        self.straggler_factor = straggler_factor
        self.straggler_min_excess_s = straggler_min_excess_s
        self.straggler_max_fraction = straggler_max_fraction
        self.pending_half_life_s = pending_half_life_s
        self.cache_ttl_s = cache_ttl_s
        self.app_weight = app_weight
        if predict_mode not in ("joint", "after"):
            raise ValueError(f"predict_mode must be 'joint' or 'after', got {predict_mode!r}")
        self.predict_mode = predict_mode
        self.app_half_life_s = app_half_life_s
        self.app_stripes: OrderedDict[str, AppStripes] = OrderedDict()
        self.pending = PendingOverlay(pending_half_life_s)
        self.kept = KeptLists(self.pending, cache_ttl_s)
        self.plans = (PlanQueues(self.pending, plan_ttl_s, plan_horizon_s, plan_max_depth)
                      if plan_ahead else None)
        self.plan_inline = plan_inline
        self.plan_aggregate = plan_aggregate
        if plan_aggregate_above < 1:
            raise ValueError(f"plan_aggregate_above must be >= 1, got {plan_aggregate_above!r}")
        self.plan_aggregate_above = plan_aggregate_above
        # Requests whose Markov learning waits for the planner (service): (job, bytes,
        # pool, stripe count, stripe size, usable OSTs). Inline (simulator), learning
        # happens in the request's round, as before.
        # pool -> the last planning round's cheapest candidate OSTs: where a request that
        # finds no planned list is solved (a small flow instead of one over every OST).
        self.shortlists: dict[str | None, np.ndarray] = {}
        self._predicted_round_s = -np.inf
        self.predict_round_s = PREDICT_ROUND_S
        self.last_plan_predicted = False
        """True when the last :meth:`plan_prepare` made a round for predictions."""
        self._to_learn: deque[tuple[str, int, str | None, int, int, int]] = deque(
            maxlen=LEARN_QUEUE_MAX)
        # application -> (pool, stripe count, stripe size) of its last request, for the
        # background planner to plan its predicted requests (not used inline)
        self._want_predictions: dict[str, tuple[str | None, int, int]] = {}
        self._tables = TableSync()
        self._view_key: tuple[int, int] | None = None
        self._view_cache: _View | None = None
        self.stats = {"rounds": 0, "predicted_hits": 0, "predicted_misses": 0,
                      "predicted_dropped": 0, "clipped": 0, "stragglers_excluded": 0,
                      "regime_rr_requests": 0}
        self.last_stragglers: set[int] = set()
        self.last_solve_cost = 0
        """Placement cost (Eq. 1, bonuses removed) of the last flow solved."""

    @property
    def predicted(self) -> dict[str, Any]:
        """Application -> its queue of kept :class:`~mapper.policies.kept_lists.KeptList`."""
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
        (The service exports it as a metric.)"""
        load = self.pending.bytes_by_ost()
        for queue in self.kept.values():
            for entry in queue:
                for i in entry.osts:
                    load[i] = load.get(i, 0.0) + entry.bytes_per_stripe
        return load

    # -- persistence -----------------------------------------------------------------
    def save_state(self, path: str | Path) -> Path:
        """Write the learned predictor to ``path`` atomically (:mod:`mapper.predictor.markov_store`)."""
        return save_predictor(self.predictor, path)

    def load_state(self, path: str | Path) -> None:
        """Replace the predictor with the one saved at ``path``.

        Raises:
            PredictorStateError: missing, corrupt or incompatible file.
        """
        self.predictor = load_predictor(path, self.markov_config)

    # -- the policy ------------------------------------------------------------------
    def allocate_batch(self, snapshot: ClusterSnapshot,
                       requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
        """One round: a :class:`Placement` or the :class:`AllocationError` of each request."""
        now = snapshot.time_s
        view = self._view(snapshot)
        self.pending.decay(now)
        self.pending.absorb(view.table, self._view_key)
        self.kept.expire(now)
        stragglers = view.stragglers
        self.last_stragglers = stragglers
        if self.regime and view.regime is None:
            # Stragglers are uneven load by definition (and Lustre's RR would use them).
            view.regime = (classify(view.base, self.regime_thresholds) if not stragglers
                           else Regime(FLOW, False, True))
            key = (f"regime_{view.regime.mode}_load_{'uniform' if view.regime.load_uniform else 'uneven'}"
                   f"_space_{'in' if view.regime.space_in_band else 'out'}")
            self.stats[key] = self.stats.get(key, 0) + 1
        if self.regime and view.regime.mode == ROUND_ROBIN:
            return self._round_robin(snapshot, view, requests)
        self._round_cost = (self.space_cost_model if self.regime and self.space_cost_model
                            and view.regime.load_uniform else self.cost_model)
        out: list[Placement | AllocationError | None] = [None] * len(requests)
        groups: dict[tuple[str | None, str], int] = {}  # (pool, job or "") -> group
        masks: list[np.ndarray] = []
        group_apps: list[str] = []
        current: list[_Current] = []
        plans = self.plans
        missed: set[ClassKey] = set()
        for pos, req in enumerate(requests):
            try:
                n_usable, mask = view.pool(snapshot, req.pool)
                count = resolve_stripe_count(req.stripe_count, n_usable)
            except AllocationError as e:
                out[pos] = e
                continue
            if count == 0:
                out[pos] = NoSpaceError(f"no usable OST in pool {req.pool!r}" if req.pool
                                        else "no usable OST")
                continue
            size = req.stripe_size or DEFAULT_STRIPE_SIZE
            if plans is not None and not self.plan_inline:
                # The chain learns in the planner's thread (off the request path).
                self._to_learn.append((req.job_id, req.expected_bytes, req.pool, count, size,
                                       n_usable))
            elif req.expected_bytes > 0:
                self.predictor.observe(req.job_id, req.expected_bytes)
            hit = self._take_predicted(req, count, view.table, stragglers, now)
            if hit is not None:
                out[pos] = hit
                continue
            # An application whose chain predicts gets its own lists (the class
            # "application where predictions exist"): the planner plans its next
            # requests; this request takes its class's list meanwhile.
            if plans is not None:
                if self.plan_inline:
                    self._want_if_predicts(req.job_id, req.pool, count, size, n_usable)
                bps = self._bytes_per_stripe(req, count)
                key = (req.pool, count, stripe_size_band(size), bytes_band(bps))
                plans.note(key, now, size, bps)
                osts = plans.take(key, view.table, stragglers, now)
                if osts is not None:
                    self._add_pending(osts, bps, req.job_id, view.table)
                    out[pos] = Placement(osts, self.name, note="planned")
                    continue
                missed.add(key)
            # Requests share a group (candidate set) unless per-application costs differ.
            key = (req.pool, req.job_id if self.app_weight else "")
            if key not in groups:
                groups[key] = len(masks)
                masks.append(mask)
                group_apps.append(req.job_id)
            current.append(_Current(pos, req, count, groups[key]))
        if current:
            rows = None if self.plan_inline else self._shortlist_rows(view, current)
            self._round(snapshot, view, masks, group_apps, current, stragglers, out, now,
                        rows)
        if self.plan_inline and (missed or self._want_predictions):
            self.plan(snapshot)             # the planner, run synchronously
        return out  # type: ignore[return-value]

    # -- planning ahead --------------------------------------------------------------
    def learn(self, most: int | None = None) -> int:
        """Teach the Markov chains the requests queued by the request path, at most
        ``most`` of them (None: all); returns how many. The service's planner calls it
        under the service lock, in slices, so the request loop waits for one slice."""
        n = 0
        queue = self._to_learn
        while queue and (most is None or n < most):
            job, nbytes, pool, count, size, n_usable = queue.popleft()
            if nbytes > 0:
                self.predictor.observe(job, nbytes)
            self._want_if_predicts(job, pool, count, size, n_usable)
            n += 1
        return n

    def _want_if_predicts(self, job: str, pool: str | None, count: int, size: int,
                          n_usable: int) -> None:
        if self.predict_k and self.predictor.predict(job, 1, size, count, n_usable):
            self._want_predictions.pop(job, None)     # most recent last
            self._want_predictions[job] = (pool, count, size)

    def plan(self, snapshot: ClusterSnapshot, only: set[ClassKey] | None = None,
             lock: Any = None, solve: Any = solve_plan) -> int:
        """Refill the plan queues: one flow over the lists every class (or the classes
        in ``only``) lacks for its target depth, on the current state plus everything
        placed, predicted or planned. Returns the lists queued.

        With ``lock`` (the service's planner thread), the state is read and the lists
        queued under it, but the flow is built and solved outside it by ``solve`` (a
        :class:`~mapper.flow.round_solve.PlanJob` -> :class:`~mapper.flow.round_solve.PlanSolution`
        function: :func:`~mapper.flow.round_solve.solve_plan` here, or the service's
        planner process), so requests keep being answered meanwhile (lists are checked
        again when handed out)."""
        if self.plans is None:
            return 0
        guard = lock if lock is not None else nullcontext()
        with guard:
            if lock is None:
                self.learn()        # the service's planner learned before, in slices
            prepared = self.plan_prepare(snapshot, only)
        if prepared is None:
            return 0
        job, keys, now = prepared
        solution = solve(job)
        with guard:
            return self.plan_commit(job, keys, now, solution)

    def plan_commit(self, job: PlanJob, keys: list[Any], now: float,
                    solution: PlanSolution) -> int:
        """Queue a solved planning round's lists (call under the service lock); the
        lists queued."""
        self.last_solve_cost = solution.placement_cost
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
                kept.setdefault(p.job_id, []).append((p.step, KeptList(
                    now, stripes, size, pool, made[0][1], p.probability, p.bytes / stripes)))
        for key, items in ranked.items():
            if parts[key] > 1:      # a class planned as several requests: merge by rank
                items.sort(key=lambda c: c[0])
            self.plans.add(key, [osts for _, osts in items], now)
        for k, req in enumerate(job.requests):
            if req.group < len(solution.shortlists):
                pool = keys[k][0] if req.tier == 0 else keys[k][1]
                self.shortlists[pool] = solution.shortlists[req.group]
        for job_id, items in kept.items():
            if not self.kept.by_job.get(job_id):
                items.sort(key=lambda sp: sp[0])
                self.kept.replace(job_id, [e for _, e in items])
        return sum(len(v) for v in ranked.values()) + sum(len(v) for v in kept.values())

    def plan_prepare(self, snapshot: ClusterSnapshot, only: set[ClassKey] | None = None
                     ) -> tuple[PlanJob, list[Any], float] | None:
        """The next planning round as a :class:`~mapper.flow.round_solve.PlanJob`, with
        each request's class key (or predicted request) and the planning time; None
        when nothing is lacking. Call under the service lock."""
        plans = self.plans
        if plans is None:
            return None
        now = snapshot.time_s
        view = self._view(snapshot)
        self.pending.decay(now)
        self.pending.absorb(view.table, self._view_key)
        plans.expire(now)
        # A round plans either the classes' lists or the predicted applications' next
        # requests, never both: pruning keeps as many candidates per request as the
        # round has stripes, so a few predicted requests in a round of a thousand
        # planned stripes would each get arcs to every OST (at 3600 OSTs such mixed
        # rounds took 0.2-0.5 s against 30 ms for the classes alone).
        want = list(self._want_predictions.items())[-PLAN_MAX_APPS:]
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
        groups: dict[str | None, int] = {}
        masks: list[np.ndarray] = []
        reqs: list[RoundRequest] = []
        lists: list[int] = []
        keys: list[Any] = []
        sizes: list[int] = []
        bytes_: list[float] = []

        def group(pool: str | None) -> int | None:
            if pool not in groups:
                try:
                    _, mask = view.pool(snapshot, pool)
                except AllocationError:
                    return None
                groups[pool] = len(masks)
                masks.append(mask)
            return groups[pool]
        for d in demand:
            g = group(d.pool)
            if g is None:
                continue
            if self.plan_aggregate or d.lists > self.plan_aggregate_above:
                # The class's lists as one request: d.lists x count stripes, dealt into
                # lists after the solve (RoundRequest.per_ost). plan_aggregate keeps the
                # exact bound (d.lists per OST); a deep automatic one is capped.
                stripes = d.lists * d.stripe_count
                per_ost = d.lists if self.plan_aggregate else min(
                    d.lists, slot_cap(stripes, int(masks[g].sum())))
                reqs.append(RoundRequest(stripes, g, 0, per_ost=per_ost))
                lists.append(d.lists)
                keys.append(d.key)
            else:
                reqs.extend(RoundRequest(d.stripe_count, g, 0) for _ in range(d.lists))
                lists.extend([1] * d.lists)
                keys.extend([d.key] * d.lists)
            sizes.append(d.stripe_size)
            bytes_.append(d.bytes_per_stripe)
        # Applications with predictions and no kept lists left: their next requests.
        # Most recently seen first, at most PLAN_MAX_APPS per round (the rest wait for
        # the next round: a planning round stays a few milliseconds).
        if want:
            self._want_predictions.clear()  # older ones are out of date by now
        predicted = []
        for job, (pool, count, size) in want:
            if self.kept.by_job.get(job):
                continue
            g = group(pool)
            if g is None:
                continue
            n_usable = view.pool(snapshot, pool)[0]
            if not self._may_predict(job):
                continue
            for p in self.predictor.predict(job, self.predict_k, size, count, n_usable):
                predicted.append((p, pool, size, g))
        predicted.sort(key=lambda x: (-x[0].probability, x[0].step))
        tier, last_p = 0, None
        for p, pool, size, g in predicted:
            if p.probability != last_p:
                tier, last_p = tier + 1, p.probability
            reqs.append(RoundRequest(max(1, p.stripe_count), g, tier))
            lists.append(1)
            keys.append((p, pool, size))
            sizes.append(size)
            bytes_.append(p.bytes / max(1, p.stripe_count))
        if not reqs:
            return None
        # An automatically aggregated round: at most slot_cap of its stripes on one OST
        # over all its classes (each class's cap alone would add up per OST).
        capped = any(n > 1 for n in lists) and not self.plan_aggregate
        max_slots = (slot_cap(sum(r.stripes for r in reqs), int(np.logical_or.reduce(masks).sum()))
                     if capped else None)
        job = PlanJob(self._arrays(view), tuple(reqs), tuple(lists), tuple(masks), max(sizes),
                      float(np.mean(bytes_)), self.cost_model, self.prune, self.solver,
                      max_slots)
        return job, keys, now

    def _view(self, snapshot: ClusterSnapshot) -> "_View":
        """What this round derives from the OSTs alone; kept while ``snapshot.version``
        says nothing changed (never kept for an unversioned snapshot). Vectorized over
        the snapshot's :class:`~mapper.state.arrays.OstTable`."""
        key = None if snapshot.version is None else (id(snapshot), snapshot.version)
        if key is not None and key == self._view_key and self._view_cache is not None:
            return self._view_cache
        table = self._tables.table(snapshot)
        usable = table.usable_indices()
        usable_set = set(usable.tolist())
        usable_osts = [o for o in snapshot.osts if o.index in usable_set]
        self.rate_tracker.update(usable_osts)
        self.rate_tracker.update_oss(usable_osts, snapshot.osses)
        if getattr(self.cost_model, "name", "") == "rate":
            # The rate cost has each OST's load in its cost; a straggler is an OST whose
            # measured rate is far off, not one that is merely busy now.
            per_byte = 1.0 / self.rate_tracker.rates(usable)
            stragglers = slowest_outliers(zip(per_byte.tolist(), usable.tolist()),
                                          self.straggler_factor, 0.0,
                                          self.straggler_max_fraction)
        else:
            stragglers = straggler_indices(usable, table.latency_s[usable],
                                           table.latency_known[usable], self.straggler_factor,
                                           self.straggler_min_excess_s,
                                           self.straggler_max_fraction)
        candidates = usable
        if stragglers:
            candidates = usable[~np.isin(usable, np.fromiter(stragglers, dtype=np.int64))]
        base = ost_arrays(table, candidates)
        if self.rate_tracker.latency_smoothing < 1.0:
            base = replace(base, write_latency_s=self.rate_tracker.latencies(base.index))
        oss_of = {o.index: o.oss for o in usable_osts}
        base = replace(base, rate_bytes_s=self.rate_tracker.rates(base.index),
                       oss_limit_bytes_s=self.rate_tracker.oss_limits(
                           [oss_of[int(i)] for i in base.index]),
                       degraded=table.degraded[candidates].astype(bool),
                       extra_stripes=np.zeros(len(candidates)))
        view = _View(table, len(usable), stragglers, candidates, base)
        self._view_key, self._view_cache = key, view
        return view

    # -- predicted lists -------------------------------------------------------------
    def _take_predicted(self, req: CreateRequest, count: int, table: OstTable,
                        stragglers: set[int], now: float) -> Placement | None:
        head, missed = self.kept.take(req.job_id, count, req.stripe_size or DEFAULT_STRIPE_SIZE,
                                      req.pool, table, stragglers, now)
        if missed:
            self.stats["predicted_misses"] += 1
            self._score(req.job_id, False)
        if head is None:
            return None
        self.stats["predicted_hits"] += 1
        self._score(req.job_id, True)
        self._add_pending(head.osts, self._bytes_per_stripe(req, count), req.job_id, table)
        return Placement(head.osts, self.name, note="predicted")

    # -- the flow round --------------------------------------------------------------
    def _round(self, snapshot: ClusterSnapshot, view: "_View", masks: list[np.ndarray],
               group_apps: list[str], current: list[_Current], stragglers: set[int],
               out: list[Placement | AllocationError | None], now: float,
               rows: np.ndarray | None = None) -> None:
        """Solve ``current`` in one flow over the view's candidates, or over the rows
        ``rows`` of them only (a missed request's small flow)."""
        self.stats["rounds"] += 1
        self.stats["stragglers_excluded"] += len(stragglers)
        osts = self._arrays(view, rows)
        if rows is not None:
            self.stats["shortlist_rounds"] = self.stats.get("shortlist_rounds", 0) + 1
            masks = [m[rows] for m in masks]
        round_reqs = [RoundRequest(c.count, c.group, 0) for c in current]
        predicted: list[tuple[_Current, Any]] = []
        # With a background planner, predictions are planned there: a missed request's
        # round stays small (the request path's budget).
        if self.predict_k and (self.plans is None or self.plan_inline):
            seen: set[str] = set()
            for c in current:
                if c.request.job_id in seen:
                    continue
                seen.add(c.request.job_id)
                if not self._may_predict(c.request.job_id):
                    continue
                for p in self.predictor.predict(c.request.job_id, self.predict_k,
                                                c.request.stripe_size or DEFAULT_STRIPE_SIZE,
                                                c.count, int(masks[c.group].sum())):
                    predicted.append((c, p))
            predicted.sort(key=lambda cp: (-cp[1].probability, cp[1].step))
            tier = 0
            last_p = None
            for c, p in predicted:
                if p.probability != last_p:
                    tier += 1
                    last_p = p.probability
                round_reqs.append(RoundRequest(max(1, p.stripe_count), c.group, tier))
        stripe_size = max((c.request.stripe_size or DEFAULT_STRIPE_SIZE) for c in current)
        expected = [self._bytes_per_stripe(c.request, c.count) for c in current]
        unit = float(PERCENT_SCALE)
        if getattr(self._round_cost, "name", "") == "rate" and osts.rate_bytes_s is not None \
                and len(osts.index):
            # In the rate cost, app_weight counts in stripe times on the median OST.
            unit = float(np.mean(expected)) / float(np.median(osts.rate_bytes_s)) / TIME_UNIT_S
        group_costs = [self._app_costs(app, osts, unit) for app in group_apps]
        if self.predict_mode == "joint" or not predicted:
            got = self._solve(osts, round_reqs, masks, stripe_size, float(np.mean(expected)),
                              group_costs)
        else:
            got = self._solve(osts, round_reqs[:len(current)], masks, stripe_size,
                              float(np.mean(expected)), group_costs)
        order = StripeOrder(osts)
        for k, c in enumerate(current):
            rows = got[k]
            if not rows:
                out[c.pos] = NoSpaceError(
                    f"no OST has room for a {c.request.stripe_size}-byte stripe")
                continue
            ordered = order(rows)
            note = ""
            if len(rows) < c.count:
                self.stats["clipped"] += 1
                note = f"clipped: stripe count {c.count} -> {len(rows)} (space)"
            self._add_pending(ordered, expected[k], c.request.job_id, view.table)
            out[c.pos] = Placement(ordered, self.name, note=note)
        if predicted and self.predict_mode == "after":
            # The predicted requests get their own round, on the state the current
            # requests just left (their stripes now count as pending).
            osts = self._arrays(view)
            later = self._solve(osts, round_reqs[len(current):], masks, stripe_size,
                                float(np.mean(expected)), group_costs)
            order = StripeOrder(osts)
            got = got[:len(current)] + later
        # Keep fully served predicted requests, per application in step order.
        fresh: dict[str, list[tuple[int, _Predicted]]] = {}
        for j, (c, p) in enumerate(predicted, start=len(current)):
            rows = got[j]
            if len(rows) < round_reqs[j].stripes:
                self.stats["predicted_dropped"] += 1
                continue
            fresh.setdefault(p.job_id, []).append((p.step, KeptList(
                now, round_reqs[j].stripes, c.request.stripe_size or DEFAULT_STRIPE_SIZE,
                c.request.pool, order(rows), p.probability,
                p.bytes / round_reqs[j].stripes)))
        for job, items in fresh.items():
            items.sort(key=lambda sp: sp[0])
            self.kept.replace(job, [p for _, p in items])
        for c in current:
            if c.request.job_id not in fresh:
                self.kept.drop(c.request.job_id)

    def _solve(self, osts: OstArrays, reqs: list[RoundRequest], masks: list[np.ndarray],
               stripe_size: int, bytes_per_stripe: float,
               group_costs: list[np.ndarray | None]) -> list[list[int]]:
        """Build and solve one network; the OST rows each request got."""
        got, self.last_solve_cost = solve_rows(
            osts, reqs, masks, self._round_cost, stripe_size, bytes_per_stripe,
            prune=self.prune, solver=self.solver, group_costs=group_costs)
        return got

    def _arrays(self, view: "_View", rows: np.ndarray | None = None) -> OstArrays:
        """The round's arrays: the view's (or its rows ``rows``: O(len(rows))), plus
        what this mapper placed or reserved."""
        base = view.base if rows is None else view.base.take(rows)
        osts = self.pending.overlay(base)
        if osts is base:
            return osts
        # What this mapper placed or reserved since the samples: the rate cost's p_j.
        return replace(osts, extra_stripes=np.maximum(osts.queue - base.queue, 0.0))

    def _shortlist_rows(self, view: "_View", current: list[_Current]) -> np.ndarray | None:
        """Rows of the view's candidates a missed round may use: the current requests'
        pools' shortlists (still candidates), or None (the full round) when a pool has
        none yet or too few OSTs for a request's stripe count."""
        lists = []
        for c in current:
            short = self.shortlists.get(c.request.pool)
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

    # -- pending estimate ------------------------------------------------------------
    @staticmethod
    def _bytes_per_stripe(req: CreateRequest, count: int) -> float:
        if req.expected_bytes > 0:
            return req.expected_bytes / count
        return float(req.stripe_size or DEFAULT_STRIPE_SIZE)

    def _app_costs(self, job_id: str, osts: OstArrays,
                   unit: float = PERCENT_SCALE) -> np.ndarray | None:
        """Per-application spreading term: ``app_weight`` points per stripe this
        application received on the OST recently (decaying with ``app_half_life_s``)."""
        app = self.app_stripes.get(job_id)
        if app is None or self.app_weight == 0:
            return None
        placed = app.per_ost
        factor = 0.5 ** ((self.pending.time_s - app.as_of_s) / self.app_half_life_s)
        for k in placed:
            placed[k] *= factor
        app.as_of_s = self.pending.time_s
        counts = np.array([placed.get(int(i), 0.0) for i in osts.index])
        return np.rint(self.app_weight * counts * unit).astype(np.int64)

    # -- the round-robin regime ----------------------------------------------------
    def _round_robin(self, snapshot: ClusterSnapshot, view: "_View",
                     requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
        """The round-robin regime: Lustre's RR for every request; the predictor still
        learns and the placed stripes still count as pending (the flow may take over
        at the next sample)."""
        out: list[Placement | AllocationError] = []
        for req in requests:
            try:
                got = self._rr.allocate(snapshot, req)
            except AllocationError as e:
                out.append(e)
                continue
            if req.expected_bytes > 0:
                self.predictor.observe(req.job_id, req.expected_bytes)
            self.stats["regime_rr_requests"] += 1
            self._add_pending(got.osts, self._bytes_per_stripe(req, len(got.osts)), req.job_id,
                              view.table)
            out.append(Placement(got.osts, self.name, note="regime round_robin"))
        return out

    # -- per-application prediction accuracy --------------------------------------
    def _score(self, job_id: str, hit: bool) -> None:
        """Count one predicted list of ``job_id`` as used (hit) or wasted (its request
        did not match). Counts halve every ``predict_window`` outcomes, so the accuracy
        follows the application's recent behaviour."""
        h, n = self.app_accuracy.get(job_id, (0.0, 0.0))
        if n >= self.predict_window:
            h, n = h / 2, n / 2
        self.app_accuracy[job_id] = (h + (1.0 if hit else 0.0), n + 1.0)
        while len(self.app_accuracy) > self.markov_config.max_apps:
            self.app_accuracy.pop(next(iter(self.app_accuracy)))

    def _may_predict(self, job_id: str) -> bool:
        """Predicted requests of ``job_id`` join the round only while its measured
        accuracy (used lists / lists judged) is at least ``predict_min_accuracy``; an
        application is trusted until ``predict_min_trials`` lists were judged, and one
        below the threshold is probed every ``predict_window``-th round so it can earn
        its place back."""
        if self.predict_min_accuracy <= 0:
            return True
        h, n = self.app_accuracy.get(job_id, (0.0, 0.0))
        if n < self.predict_min_trials or h / n >= self.predict_min_accuracy:
            return True
        probe = self._probe.get(job_id, 0) + 1
        self._probe[job_id] = probe % self.predict_window
        if len(self._probe) > self.markov_config.max_apps:
            self._probe.pop(next(iter(self._probe)))
        return probe >= self.predict_window

    def _add_pending(self, osts: Sequence[int], bytes_per_stripe: float, job_id: str,
                     table: OstTable) -> None:
        if self.app_weight:
            app = self.app_stripes.get(job_id)
            if app is None:
                app = self.app_stripes[job_id] = AppStripes(self.pending.time_s)
            placed = app.per_ost
            self.app_stripes.move_to_end(job_id)
            for i in osts:
                placed[i] = placed.get(i, 0.0) + 1.0
            while len(self.app_stripes) > self.markov_config.max_apps:
                self.app_stripes.popitem(last=False)
        self.pending.add(osts, bytes_per_stripe, table)


class McmfFlowOnly(McmfPolicy):
    """MCMF without the predictor (``predict_k=0``) and without plan queues: every request
    is solved in its own round with the current state. Registered as ``mcmf_flow`` so a scenario can compare
    it with the paper's ``mcmf`` in the same run (docs/placement.md)."""
    name = "mcmf_flow"

    def __init__(self, seed: int = 0, **params: Any):
        params.setdefault("predict_k", 0)
        params.setdefault("plan_ahead", False)
        super().__init__(seed=seed, **params)
