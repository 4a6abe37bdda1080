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
it placed itself:

* *pending bytes* per OST: expected bytes of the stripes it placed there, minus the
  growth of the OST's used space seen since (data that landed is in ``kbytesavail``
  now). Expected bytes that never come (a smaller file than announced) would stay
  forever, so the estimate also decays with a half-life of ``pending_half_life_s``.
* *pending stripes* per OST: stripes placed since the OST's last statistics sample
  (``sample_time_s``); a new sample's write latency includes them, so they reset.
  Without sample times (a static view) they decay with the same half-life.

The policy does not gate itself on MDS CPU: :class:`mapper.policies.gate.GatedPolicy` does
(``needs_gate``), in the simulator and in the service alike.
"""
from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mapper.state.cluster_state import ClusterSnapshot, OstFlag, OstState
from mapper.flow.rates import OstRateTracker
from mapper.policies.regime import FLOW, ROUND_ROBIN, Regime, RegimeThresholds, classify
from mapper.policies.round_robin import RoundRobin
from mapper.flow.costs import PERCENT_SCALE, TIME_UNIT_S, OstArrays, make_cost_model
from mapper.flow.network import RoundRequest, build_network
from mapper.flow.solver import SOLVERS
from mapper.predictor.markov import MarkovConfig, MarkovPredictor
from mapper.predictor.markov_store import load_predictor, save_predictor
from mapper.state.ost_health import is_usable, pool_members, resolve_stripe_count
from mapper.policies.placement import AllocationError, BatchPolicy, CreateRequest, NoSpaceError, Placement
from mapper.flow.stragglers import (STRAGGLER_FACTOR, STRAGGLER_MAX_FRACTION, STRAGGLER_MIN_EXCESS_S,
                               find_stragglers, slowest_outliers)

DEFAULT_STRIPE_SIZE = 1 << 20


@dataclass
class _Predicted:
    """An OST list chosen for a predicted request, waiting for the real one."""
    made_s: float
    stripe_count: int
    stripe_size: int
    pool: str | None
    osts: tuple[int, ...]
    probability: float
    bytes_per_stripe: float = 0.0


@dataclass(slots=True)
class AppStripes:
    """Stripes one application received recently, per OST index (the per-application
    spreading term, ``app_weight``), decayed with ``app_half_life_s`` up to ``as_of_s``
    (seconds on the policy's pending clock)."""
    as_of_s: float
    per_ost: dict[int, float] = field(default_factory=dict)


@dataclass
class _View:
    """Per-snapshot-version state of a round: usable OSTs, stragglers, candidate rows,
    their arrays, and per pool the usable count and candidate mask."""
    usable_count: int
    stragglers: set[int]
    candidates: list[OstState]
    row_of: dict[int, int]
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
                mask = np.zeros(len(self.candidates), dtype=bool)
                n_usable = 0
                for o in members:
                    if is_usable(o):
                        n_usable += 1
                        r = self.row_of.get(o.index)
                        if r is not None:
                            mask[r] = True
                hit = (n_usable, mask)
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
            creation (appends; the mapper only sees the first write) do not pile up,
            and files read back together do not share OSTs beyond need. With the
            ``rate`` cost the unit is one stripe time on the median-rate OST.
        app_half_life_s: decay of that count, s.
        predict_mode: ``"joint"`` (the paper: current and predicted requests in one
            flow) or ``"after"`` (current requests first, then the predicted ones in a
            second flow on the state the current ones left).
        rate_smoothing: weight of a new sample in each OST's smoothed write rate
            (:mod:`mapper.flow.rates`; the ``rate`` cost model's ``r_j``).
        latency_smoothing: weight of a new sample in the smoothed brw_stats RPC time the
            ``rate`` cost sees (1: the last sample).
        predict_min_accuracy: predict an application's requests only while the share of
            its predicted lists that were used is at least this (0: always predict).
        predict_min_trials: lists judged before the accuracy is trusted.
        predict_window: outcomes after which the counts halve; also the probe period
            of an application below the threshold.
        regime: switch to Lustre's round-robin while load is uniform and space within
            the band (:mod:`mapper.policies.regime`), the flow otherwise.
        regime_params: :class:`mapper.policies.regime.RegimeThresholds` fields.
        space_cost_model, space_cost_params: with ``regime``, the cost model of the flow
            while load is uniform but space is not (None: ``cost_model`` always).
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
                 predict_mode: str = "joint", rate_smoothing: float = 0.05,
                 latency_smoothing: float = 1.0, regime: bool = False,
                 predict_min_accuracy: float = 0.0, predict_min_trials: int = 8,
                 predict_window: int = 32, regime_params: dict[str, float] | None = None,
                 space_cost_model: str | None = None,
                 space_cost_params: dict[str, float] | None = None):
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
        if not 0 <= predict_min_accuracy <= 1 or predict_min_trials < 0 or predict_window < 1:
            raise ValueError("predict_min_accuracy must be in [0, 1], predict_min_trials >= 0, "
                             "predict_window >= 1")
        self.predict_min_accuracy = predict_min_accuracy
        self.predict_min_trials = predict_min_trials
        self.predict_window = predict_window
        self.app_accuracy: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._probe: dict[str, int] = {}
        self.regime_thresholds = RegimeThresholds(**(regime_params or {}))
        self._rr = RoundRobin(seed=seed)
        self.predict_k = predict_k
        self.markov_config = MarkovConfig(**(markov or {}))
        self.predictor = MarkovPredictor(self.markov_config)
        self.solve = SOLVERS[solver]
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
        self.pending_bytes: dict[int, float] = {}
        self.pending_stripes: dict[int, float] = {}
        self._pending_time_s = -math.inf
        self._seen_used_kib: dict[int, int] = {}
        self._seen_sample_s: dict[int, float | None] = {}
        self._pos: dict[int, int] = {}
        self._pos_key: tuple[int, int] | None = None
        self._view_key: tuple[int, int] | None = None
        self._view_cache: _View | None = None
        self.predicted: dict[str, deque[_Predicted]] = {}
        # Stripes of predicted lists not yet handed out count as queued writes, so
        # other applications' rounds do not pick the same OSTs meanwhile.
        self.reserved_stripes: dict[int, float] = {}
        self._last_sweep_s = -math.inf
        self.stats = {"rounds": 0, "predicted_hits": 0, "predicted_misses": 0,
                      "predicted_dropped": 0, "clipped": 0, "stragglers_excluded": 0,
                      "regime_rr_requests": 0}
        self.last_stragglers: set[int] = set()

    def predicted_load(self) -> dict[int, float]:
        """Per-OST bytes this mapper placed that the statistics do not show yet, plus the
        expected bytes of predicted lists kept for upcoming requests; OST index -> bytes.
        (The service exports it as a metric.)"""
        load = dict(self.pending_bytes)
        for queue in self.predicted.values():
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
        self._decay_pending(now)
        self._absorb_samples(snapshot)
        self._expire_predicted(now)
        view = self._view(snapshot)
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
            return self._round_robin(snapshot, requests)
        self._round_cost = (self.space_cost_model if self.regime and self.space_cost_model
                            and view.regime.load_uniform else self.cost_model)
        out: list[Placement | AllocationError | None] = [None] * len(requests)
        groups: dict[tuple[str | None, str], int] = {}  # (pool, job or "") -> group
        masks: list[np.ndarray] = []
        group_apps: list[str] = []
        current: list[_Current] = []
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
            if req.expected_bytes > 0:
                self.predictor.observe(req.job_id, req.expected_bytes)
            hit = self._take_predicted(req, count, snapshot, stragglers, now)
            if hit is not None:
                out[pos] = hit
                continue
            # Requests share a group (candidate set) unless per-application costs differ.
            key = (req.pool, req.job_id if self.app_weight else "")
            if key not in groups:
                groups[key] = len(masks)
                masks.append(mask)
                group_apps.append(req.job_id)
            current.append(_Current(pos, req, count, groups[key]))
        if current:
            self._round(snapshot, view, masks, group_apps, current, stragglers, out, now)
        return out  # type: ignore[return-value]

    def _round_robin(self, snapshot: ClusterSnapshot,
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
                              snapshot)
            out.append(Placement(got.osts, self.name, note="regime round_robin"))
        return out

    def _view(self, snapshot: ClusterSnapshot) -> "_View":
        """What this round derives from the OSTs alone; kept while ``snapshot.version``
        says nothing changed (never kept for an unversioned snapshot)."""
        key = None if snapshot.version is None else (id(snapshot), snapshot.version)
        if key is not None and key == self._view_key:
            return self._view_cache
        usable_all = [o for o in snapshot.osts if is_usable(o)]
        self.rate_tracker.update(usable_all)
        self.rate_tracker.update_oss(usable_all, snapshot.osses)
        if getattr(self.cost_model, "name", "") == "rate":
            # The rate cost has each OST's load in its cost; a straggler is an OST whose
            # measured rate is far off, not one that is merely busy now.
            idx = [o.index for o in usable_all]
            per_byte = 1.0 / self.rate_tracker.rates(idx)
            stragglers = slowest_outliers(zip(per_byte.tolist(), idx), self.straggler_factor,
                                          0.0, self.straggler_max_fraction)
        else:
            stragglers = find_stragglers(usable_all, self.straggler_factor,
                                         self.straggler_min_excess_s, self.straggler_max_fraction)
        candidates = [o for o in usable_all if o.index not in stragglers]
        base = self.base_arrays(snapshot, candidates)
        if self.rate_tracker.latency_smoothing < 1.0:
            base = replace(base, write_latency_s=self.rate_tracker.latencies(base.index))
        base = replace(base, rate_bytes_s=self.rate_tracker.rates(base.index),
                       oss_limit_bytes_s=self.rate_tracker.oss_limits([o.oss for o in candidates]),
                       degraded=np.array([bool(o.flags & OstFlag.DEGRADED) for o in candidates],
                                         dtype=bool),
                       extra_stripes=np.zeros(len(candidates)))
        view = _View(len(usable_all), stragglers, candidates,
                     {o.index: r for r, o in enumerate(candidates)}, base)
        self._view_key, self._view_cache = key, view
        return view

    # -- predicted lists -------------------------------------------------------------
    def _take_predicted(self, req: CreateRequest, count: int, snapshot: ClusterSnapshot,
                        stragglers: set[int], now: float) -> Placement | None:
        queue = self.predicted.get(req.job_id)
        if not queue:
            return None
        while queue and now - queue[0].made_s >= self.cache_ttl_s:
            self._release([queue.popleft()])
            self._score(req.job_id, False)
        if not queue:
            return None
        head = queue[0]
        stripe_size = req.stripe_size or DEFAULT_STRIPE_SIZE
        if (head.stripe_count != count or head.stripe_size != stripe_size
                or head.pool != req.pool):
            self.stats["predicted_misses"] += 1
            self._score(req.job_id, False)
            self._release(queue)
            queue.clear()
            return None
        pos = self._positions(snapshot)
        osts = snapshot.osts
        if any(i in stragglers or i not in pos or not is_usable(osts[pos[i]]) for i in head.osts):
            self._release(queue)
            queue.clear()
            return None
        self._release([queue.popleft()])
        self.stats["predicted_hits"] += 1
        self._score(req.job_id, True)
        self._add_pending(head.osts, self._bytes_per_stripe(req, count), req.job_id, snapshot)
        return Placement(head.osts, self.name, note="predicted")

    # -- the flow round --------------------------------------------------------------
    def _round(self, snapshot: ClusterSnapshot, view: "_View", masks: list[np.ndarray],
               group_apps: list[str], current: list[_Current], stragglers: set[int],
               out: list[Placement | AllocationError | None], now: float) -> None:
        self.stats["rounds"] += 1
        self.stats["stragglers_excluded"] += len(stragglers)
        candidates = view.candidates
        osts = self._arrays(view)
        round_reqs = [RoundRequest(c.count, c.group, 0) for c in current]
        predicted: list[tuple[_Current, Any]] = []
        if self.predict_k:
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
        for k, c in enumerate(current):
            rows = got[k]
            if not rows:
                out[c.pos] = NoSpaceError(
                    f"no OST has room for a {c.request.stripe_size}-byte stripe")
                continue
            ordered = self._stripe_order(rows, osts, candidates)
            note = ""
            if len(rows) < c.count:
                self.stats["clipped"] += 1
                note = f"clipped: stripe count {c.count} -> {len(rows)} (space)"
            self._add_pending(ordered, expected[k], c.request.job_id, snapshot)
            out[c.pos] = Placement(ordered, self.name, note=note)
        if predicted and self.predict_mode == "after":
            # The predicted requests get their own round, on the state the current
            # requests just left (their stripes now count as pending).
            osts = self._arrays(view)
            later = self._solve(osts, round_reqs[len(current):], masks, stripe_size,
                                float(np.mean(expected)), group_costs)
            got = got[:len(current)] + later
        # Keep fully served predicted requests, per application in step order.
        fresh: dict[str, list[tuple[int, _Predicted]]] = {}
        for j, (c, p) in enumerate(predicted, start=len(current)):
            rows = got[j]
            if len(rows) < round_reqs[j].stripes:
                self.stats["predicted_dropped"] += 1
                continue
            fresh.setdefault(p.job_id, []).append((p.step, _Predicted(
                now, round_reqs[j].stripes, c.request.stripe_size or DEFAULT_STRIPE_SIZE,
                c.request.pool, self._stripe_order(rows, osts, candidates), p.probability,
                p.bytes / round_reqs[j].stripes)))
        for job, items in fresh.items():
            items.sort(key=lambda sp: sp[0])
            self._release(self.predicted.get(job, ()))
            self.predicted[job] = deque(p for _, p in items)
            for _, p in items:
                self._reserve(p.osts, 1.0)
        for c in current:
            if c.request.job_id not in fresh:
                self._release(self.predicted.pop(c.request.job_id, ()))

    def _solve(self, osts: OstArrays, reqs: list[RoundRequest], masks: list[np.ndarray],
               stripe_size: int, bytes_per_stripe: float,
               group_costs: list[np.ndarray | None]) -> list[list[int]]:
        """Build and solve one network; the OST rows each request got."""
        net = build_network(osts, reqs, masks, self._round_cost, stripe_size, bytes_per_stripe,
                            prune=self.prune, group_costs=group_costs)
        sol = self.solve(net)
        used = sol.flows[net.assign_arc] > 0
        got: list[list[int]] = [[] for _ in reqs]
        for req_no, row in zip(net.assign_request[used].tolist(), net.assign_ost[used].tolist()):
            got[req_no].append(row)
        return got

    @staticmethod
    def base_arrays(snapshot: ClusterSnapshot, candidates: list[OstState]) -> OstArrays:
        """The flow network's per-OST inputs for ``candidates`` (OSTs of ``snapshot``, in
        row order) from the snapshot alone, nothing this mapper placed: the arrays of
        :class:`~mapper.flow.costs.OstArrays`, shape (len(candidates),); ``queue`` is each
        OST's write latency over the fastest known one, minus 1 (0 when unknown)."""
        oss_names = {name: s for s, name in enumerate(dict.fromkeys(o.oss for o in candidates))}
        nan = math.nan
        rows = [(o.index, oss_names[o.oss], o.kbytes_total, o.kbytes_avail,
                 nan if o.write_latency_s is None else o.write_latency_s) for o in candidates]
        table = np.array(rows, dtype=float).reshape(-1, 5)
        server = {name: (st.cpu_percent, st.mem_percent, st.lnet_load)
                  for name, st in snapshot.osses.items()}
        load = np.array([server[o.oss] for o in candidates], dtype=float).reshape(-1, 3)
        lat = table[:, 4]
        ok = np.isfinite(lat) & (lat > 0)
        base = float(lat[ok].min()) if ok.any() else 1.0
        return OstArrays(
            index=table[:, 0].astype(np.int64), oss=table[:, 1].astype(np.int64),
            kbytes_total=table[:, 2].astype(np.int64), kbytes_avail=table[:, 3].astype(np.int64),
            pending_bytes=np.zeros(len(candidates)), cpu_percent=load[:, 0],
            mem_percent=load[:, 1], lnet_load=load[:, 2],
            queue=np.where(ok, lat / base - 1.0, 0.0), write_latency_s=lat)

    def _arrays(self, view: "_View") -> OstArrays:
        """The round's arrays: the view's, plus what this mapper placed or reserved."""
        base = view.base
        pb, ps, rs = self.pending_bytes, self.pending_stripes, self.reserved_stripes
        if not (pb or ps or rs):
            return base
        pending = base.pending_bytes.copy()
        extra = np.zeros(len(pending))
        row_of = view.row_of
        for i, v in pb.items():
            r = row_of.get(i)
            if r is not None:
                pending[r] = v
        for table in (ps, rs):
            for i, v in table.items():
                r = row_of.get(i)
                if r is not None:
                    extra[r] += v
        return replace(base, pending_bytes=pending, queue=np.maximum(base.queue + extra, 0.0),
                       extra_stripes=np.maximum(extra, 0.0))

    @staticmethod
    def _stripe_order(rows: list[int], osts: OstArrays, candidates: list[OstState]) -> tuple[int, ...]:
        """Interleave the chosen OSTs across their OSSes (least-used OST first in each),
        OSS by OSS in the order of their emptiest chosen OST."""
        by_oss: dict[int, list[int]] = {}
        fill = osts.used_fraction
        for r in sorted(rows, key=lambda r: (fill[r], osts.index[r])):
            by_oss.setdefault(int(osts.oss[r]), []).append(r)
        lanes = list(by_oss.values())
        ordered: list[int] = []
        depth = 0
        while len(ordered) < len(rows):
            for lane in lanes:
                if depth < len(lane):
                    ordered.append(int(osts.index[lane[depth]]))
            depth += 1
        return tuple(ordered)

    # -- pending estimate ------------------------------------------------------------
    @staticmethod
    def _bytes_per_stripe(req: CreateRequest, count: int) -> float:
        if req.expected_bytes > 0:
            return req.expected_bytes / count
        return float(req.stripe_size or DEFAULT_STRIPE_SIZE)

    def _decay_pending(self, now: float) -> None:
        if self._pending_time_s == -math.inf or now < self._pending_time_s:
            self._pending_time_s = now
            return
        factor = 0.5 ** ((now - self._pending_time_s) / self.pending_half_life_s)
        self._pending_time_s = now
        if factor >= 1.0:
            return
        for table in (self.pending_bytes, self.pending_stripes):
            for k in list(table):
                v = table[k] * factor
                if v < 1e-3:
                    del table[k]
                else:
                    table[k] = v

    def _positions(self, snapshot: ClusterSnapshot) -> dict[int, int]:
        """OST index -> position in ``snapshot.osts`` (cached while the list is the same)."""
        osts = snapshot.osts
        key = (id(osts), len(osts))
        if key != self._pos_key:
            self._pos = {o.index: p for p, o in enumerate(osts)}
            self._pos_key = key
        return self._pos

    def _absorb_samples(self, snapshot: ClusterSnapshot) -> None:
        """Remove from the pending estimates what the statistics now show (only OSTs
        with something pending are looked at)."""
        osts = snapshot.osts
        pos = self._positions(snapshot)
        pb, ps = self.pending_bytes, self.pending_stripes
        seen_used, seen_sample = self._seen_used_kib, self._seen_sample_s
        for i in list(pb):
            p = pos.get(i)
            if p is None or osts[p].index != i:
                del pb[i]
                continue
            o = osts[p]
            used = o.kbytes_total - o.kbytes_avail
            before = seen_used.get(i, used)
            seen_used[i] = used
            if used > before:
                left = pb[i] - (used - before) * 1024.0
                if left > 0:
                    pb[i] = left
                else:
                    del pb[i]
        for i in list(ps):
            p = pos.get(i)
            if p is None or osts[p].index != i:
                del ps[i]
                continue
            t = osts[p].sample_time_s
            if t is not None and seen_sample.get(i) != t:
                del ps[i]

    def _expire_predicted(self, now: float) -> None:
        """Drop predicted lists past their TTL (at most once per second of clock)."""
        if now - self._last_sweep_s < 1.0 and now >= self._last_sweep_s:
            return
        self._last_sweep_s = now
        for job in list(self.predicted):
            queue = self.predicted[job]
            while queue and now - queue[0].made_s >= self.cache_ttl_s:
                self._release([queue.popleft()])
                self._score(job, False)
            if not queue:
                del self.predicted[job]

    # -- per-application prediction accuracy --------------------------------------
    def _score(self, job_id: str, hit: bool) -> None:
        """Count one predicted list of ``job_id`` as used (hit) or wasted (a mismatched
        or expired list). Counts decay by half every ``predict_window`` outcomes, so
        the accuracy follows the application's recent behaviour."""
        h, n = self.app_accuracy.get(job_id, (0.0, 0.0))
        if n >= self.predict_window:
            h, n = h / 2, n / 2
        self.app_accuracy[job_id] = (h + (1.0 if hit else 0.0), n + 1.0)
        while len(self.app_accuracy) > self.markov_config.max_apps:
            self.app_accuracy.pop(next(iter(self.app_accuracy)))

    def _may_predict(self, job_id: str) -> bool:
        """Predicted requests of ``job_id`` join the round only while its measured
        accuracy (used lists / lists made) is at least ``predict_min_accuracy``; an
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

    def _reserve(self, osts: Sequence[int], sign: float) -> None:
        for i in osts:
            v = self.reserved_stripes.get(i, 0.0) + sign
            if v > 1e-9:
                self.reserved_stripes[i] = v
            else:
                self.reserved_stripes.pop(i, None)

    def _release(self, entries) -> None:
        """Predicted lists that will not be handed out free their reservation."""
        for e in entries:
            self._reserve(e.osts, -1.0)

    def _app_costs(self, job_id: str, osts: OstArrays,
                   unit: float = PERCENT_SCALE) -> np.ndarray | None:
        """Per-application spreading term: ``app_weight`` points per stripe this
        application received on the OST recently (decaying with ``app_half_life_s``)."""
        app = self.app_stripes.get(job_id)
        if app is None or self.app_weight == 0:
            return None
        placed = app.per_ost
        factor = 0.5 ** ((self._pending_time_s - app.as_of_s) / self.app_half_life_s)
        for k in placed:
            placed[k] *= factor
        app.as_of_s = self._pending_time_s
        counts = np.array([placed.get(int(i), 0.0) for i in osts.index])
        return np.rint(self.app_weight * counts * unit).astype(np.int64)

    def _add_pending(self, osts: Sequence[int], bytes_per_stripe: float, job_id: str,
                     snapshot: ClusterSnapshot) -> None:
        state = snapshot.osts
        pos = self._positions(snapshot)
        for i in osts:
            o = state[pos[i]]
            if i not in self.pending_bytes:
                self._seen_used_kib[i] = o.kbytes_total - o.kbytes_avail
            self._seen_sample_s[i] = o.sample_time_s
        if self.app_weight:
            app = self.app_stripes.get(job_id)
            if app is None:
                app = self.app_stripes[job_id] = AppStripes(self._pending_time_s)
            placed = app.per_ost
            self.app_stripes.move_to_end(job_id)
            for i in osts:
                placed[i] = placed.get(i, 0.0) + 1.0
            while len(self.app_stripes) > self.markov_config.max_apps:
                self.app_stripes.popitem(last=False)
        for i in osts:
            self.pending_bytes[i] = self.pending_bytes.get(i, 0.0) + bytes_per_stripe
            self.pending_stripes[i] = self.pending_stripes.get(i, 0.0) + 1.0


class McmfFlowOnly(McmfPolicy):
    """MCMF without the predictor (``predict_k=0``): every request is solved in its own
    round with the current state. Registered as ``mcmf_flow`` so a scenario can compare
    it with the paper's ``mcmf`` in the same run (docs/placement.md)."""
    name = "mcmf_flow"

    def __init__(self, seed: int = 0, **params: Any):
        params.setdefault("predict_k", 0)
        super().__init__(seed=seed, **params)
