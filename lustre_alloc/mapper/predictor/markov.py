"""Online order-m Markov chain predictor of each application's next create requests.

Paul et al. 2017, Section III-B and Algorithm 1. For every application (Lustre job id) the
predictor learns the sequence of its requests' write bytes (0 for a read) and predicts the
next ``k`` requests: their bytes, the stripe count those bytes need at the application's
fixed stripe size, and the probability of the predicted transition path. The mapper
service calls :meth:`MarkovPredictor.observe` then :meth:`MarkovPredictor.predict` once per
arriving create; the simulator's MCMF policy does the same.

How we read the paper (details and reasons in ``docs/predictor.md``):

* **States** (``assignStates`` / ``statesToPrediction``): exactly Algorithm 1, see
  :mod:`lustre_alloc.mapper.predictor.markov_states`.
* **mu and sd** are the mean and population standard deviation of the application's last
  ``history`` requests (default 64; the per-application history cap), *including* the
  request being quantised, kept exactly with integer running sums (O(1) per request).
  Algorithm 1's "set of current requests" S is ambiguous between the training sequence
  (<= 16 requests), all history and something between: a <= 16 window makes the band
  edges jitter with every request so the same byte count changes state back and forth;
  all history never forgets an application's earlier phase. A bounded history in between
  is stable within a phase and adapts across phases.
* **States are assigned once**, when a request arrives, with the statistics of that
  moment ("every request that arrives is stored as a key with value as the requests that
  follow"). Nothing is re-quantised later; stale early states age out of the training
  sequence (<= 16 requests) quickly.
* **Transition counts** (``trainModel``) are kept per candidate training-sequence length
  L: the counts of (m previous states -> next state) over the transitions inside the last
  L requests (L - m transitions). Each arriving request adds one transition and removes
  the one that left each window: dynamic learning, no retraining.
* **Training-sequence length by least MSE**: candidate lengths are 2, 4, 8, 16 (the
  paper's "e.g., 2, 4, etc.", capped at 16) restricted to L > m, so (4, 8, 16) for
  order 3. Before each request arrives every candidate has made its one-step prediction;
  when it arrives the squared error in bytes updates that candidate's exponentially
  weighted MSE (weight ``mse_decay``, default 1/8, i.e. about the last 8 requests). The
  candidate with the least MSE (ties: the longer length) is the one :meth:`predict` uses,
  so the length is re-chosen on every request as the application's behaviour changes.
* **predictModel**: from the current context (the last m states) follow the most likely
  next state k times (greedy path; ties go to the most recently seen next state). The
  probability of a predicted request is the product of the transition probabilities along
  the path up to it, so it never increases with the step: "drop least likely first" drops
  from the far end. A context that does not occur in the training sequence backs off to
  its longest shorter suffix that does (order m-1, ..., 1), then to the frequency of next
  states over the whole training sequence (order 0); ``backoff=False`` goes straight to
  order 0. The paper does not say; backoff keeps a high order from predicting worse than
  a low one right after an application changes phase (bench/markov_table2.py).

Defined behaviour for odd input, none of which raises: an unknown application, or one
with fewer than m + 1 requests, gets no prediction (``[]``); zero variance predicts mu;
NaN, infinite or negative bytes are not learned (counted in :attr:`PredictorStats.rejected`)
and ``observe`` returns False. Invalid use of the API (an empty job id, ``k < 0``, a
stripe size <= 0, a non-numeric byte count) raises :class:`PredictorUsageError`.

Memory is bounded: at most ``max_apps`` applications (least recently observed evicted)
and ``history`` byte counts plus ``max(L) - m + 1`` transitions per application.
"""
from __future__ import annotations

import logging
import math
import numbers
import operator
from collections import OrderedDict, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from lustre_alloc.mapper.predictor.markov_states import N_STATES, predicted_write_bytes, state_index

log = logging.getLogger("lustre_alloc.mapper.predictor.markov")

PAPER_ORDER = 3
"""Order the paper settles on (Section III-B, Table II)."""
PAPER_MAX_TRAIN_LENGTH = 16
"""Cap on the training-sequence length (Section III-B: "We limit the length to 16")."""


class PredictorError(Exception):
    """Base class of the predictor's errors."""


class PredictorConfigError(PredictorError, ValueError):
    """An invalid :class:`MarkovConfig` value (the message names the field)."""


class PredictorUsageError(PredictorError, ValueError):
    """Invalid use of the API: a bad argument (the message names it and its value)."""


class PredictorStateError(PredictorError):
    """A state file that cannot be loaded. ``str()`` is ``path: reason``."""

    def __init__(self, path: str | Path, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"{self.path}: {reason}")


@dataclass(frozen=True)
class MarkovConfig:
    """Predictor configuration (one dataclass, read once at start; see docs/predictor.md).

    Attributes:
        order: m, the number of previous requests a prediction depends on (Section III-B;
            3 in the paper, Table II).
        train_lengths: candidate training-sequence lengths, in requests, each in
            (order, max_train_length]. Empty = the paper's doubling 2, 4, 8, 16 restricted
            to lengths > order (always including max_train_length).
        max_train_length: cap on a training sequence, requests (16 in the paper).
        history: requests per application whose bytes define mu and sd (the per-app
            history cap); >= max_train_length.
        max_apps: applications tracked at once; the least recently observed is evicted.
        mse_decay: weight of the newest squared error in each candidate length's
            exponentially weighted MSE, in (0, 1].
        backoff: when the last ``order`` states never occur as a context in the training
            sequence, predict from the longest shorter suffix that does (order - 1, ...,
            1), then from the next-state frequencies (order 0). False: straight to
            order 0. The paper does not say; see docs/predictor.md.
    """
    order: int = PAPER_ORDER
    train_lengths: tuple[int, ...] = ()
    max_train_length: int = PAPER_MAX_TRAIN_LENGTH
    history: int = 64
    max_apps: int = 4096
    mse_decay: float = 0.125
    backoff: bool = True

    def __post_init__(self) -> None:
        def need_int(name: str, value: Any, minimum: int) -> None:
            if type(value) is not int or value < minimum:
                raise PredictorConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
        need_int("order", self.order, 1)
        need_int("max_train_length", self.max_train_length, 2)
        need_int("max_apps", self.max_apps, 1)
        if self.order >= self.max_train_length:
            raise PredictorConfigError(
                f"order {self.order} needs a training sequence longer than the order, "
                f"but max_train_length is {self.max_train_length}")
        if not isinstance(self.train_lengths, tuple):
            object.__setattr__(self, "train_lengths", tuple(self.train_lengths))
        for length in self.train_lengths:
            if type(length) is not int or not self.order < length <= self.max_train_length:
                raise PredictorConfigError(
                    f"train_lengths: {length!r} is not an integer in "
                    f"({self.order}, {self.max_train_length}] (longer than the order, capped)")
        if len(set(self.train_lengths)) != len(self.train_lengths):
            raise PredictorConfigError(f"train_lengths has duplicates: {self.train_lengths}")
        need_int("history", self.history, self.max_train_length)
        if not isinstance(self.mse_decay, (int, float)) or not 0.0 < self.mse_decay <= 1.0:
            raise PredictorConfigError(f"mse_decay must be in (0, 1], got {self.mse_decay!r}")
        if type(self.backoff) is not bool:
            raise PredictorConfigError(f"backoff must be true or false, got {self.backoff!r}")

    @property
    def lengths(self) -> tuple[int, ...]:
        """The candidate training-sequence lengths actually used, ascending."""
        if self.train_lengths:
            return tuple(sorted(self.train_lengths))
        doubling = {2 << i for i in range(self.max_train_length.bit_length())}
        doubling = {n for n in doubling if self.order < n < self.max_train_length}
        return tuple(sorted(doubling | {self.max_train_length}))

    def as_dict(self) -> dict[str, Any]:
        """Plain values for logs and the state file."""
        d = asdict(self)
        d["train_lengths"] = list(self.train_lengths)
        return d


class PredictedRequest(NamedTuple):
    """One predicted future create request of an application.

    Attributes:
        job_id: the application.
        step: 1 for the next request, 2 for the one after, ...
        state: predicted Markov state, -2..+2 (Algorithm 1).
        bytes: predicted write bytes (``statesToPrediction``, rounded, >= 0).
        stripe_count: stripes those bytes need at the given stripe size, clipped to the
            maximum and to the usable OSTs (>= 1).
        probability: probability of the predicted path up to and including this step,
            in (0, 1]; non-increasing in ``step``.
    """
    jobid: str
    step: int
    state: int
    bytes: int
    stripe_count: int
    probability: float


@dataclass
class PredictorStats:
    """Counters since the predictor was created (or loaded)."""
    observed: int = 0
    rejected: int = 0
    evicted: int = 0
    skipped_on_load: int = 0
    """Application records of the state file that were malformed and skipped."""


@dataclass(frozen=True)
class AppModelInfo:
    """What the predictor knows about one application (for logs, metrics and tests).

    Attributes:
        requests: requests learned from this application (since it was last evicted).
        mean_bytes, sd_bytes: mu and sd over the last ``history`` requests, bytes.
        train_length: the training-sequence length predictions use now, requests.
        mse_by_length: {candidate length: exponentially weighted one-step MSE, bytes^2}.
        last_states: states -2..+2 of the last ``order`` requests, oldest first.
    """
    requests: int
    mean_bytes: float
    sd_bytes: float
    train_length: int
    mse_by_length: dict[int, float] = field(default_factory=dict)
    last_states: tuple[int, ...] = ()


# A row of a transition table: counts of next states 0..4, their total, last next state seen.
_TOTAL = N_STATES
_LAST = N_STATES + 1


def _new_row() -> list[int]:
    return [0] * (N_STATES + 2)


def _lookup(levels: list[dict[int, list[int]]], mods: tuple[int, ...], marg: list[int],
            ctx: int) -> list[int]:
    """The row of the longest suffix of context ``ctx`` seen in the training sequence,
    else the order-0 row ``marg`` (backoff; with ``backoff=False`` only the full context)."""
    for table, mod in zip(levels, mods):
        row = table.get(ctx % mod)
        if row is not None:
            return row
    return marg


def _most_likely(row: list[int]) -> tuple[int, int]:
    """(state index, its count) of a row's most frequent next state; ties -> most recent."""
    top = max(row[:N_STATES])
    last = row[_LAST]
    if row[last] == top:
        return last, top
    return row.index(top), top


class _AppModel:
    """The learned state of one application. All fields are derived from ``hist``,
    ``trans``, ``ctx``, ``n_obs`` and the MSE (which is what the state file stores)."""
    __slots__ = ("hist", "s1", "s2", "mu", "sd", "n_obs", "ctx", "trans", "tables", "margs",
                 "pend", "mse", "mse_n", "best")

    def __init__(self, history: int, n_lengths: int, n_levels: int, trans_cap: int):
        self.hist: deque[int] = deque(maxlen=history)
        self.s1 = 0                 # sum of hist, bytes (exact)
        self.s2 = 0                 # sum of squares of hist, bytes^2 (exact)
        self.mu = 0.0
        self.sd = 0.0
        self.n_obs = 0              # requests learned
        self.ctx = 0                # base-5 code of the last `order` state indices
        self.trans: deque[int] = deque(maxlen=trans_cap)  # ctx * 5 + next, oldest first
        # per candidate length: one table per context length, order first (backoff)
        self.tables: list[list[dict[int, list[int]]]] = [
            [{} for _ in range(n_levels)] for _ in range(n_lengths)]
        self.margs: list[list[int]] = [_new_row() for _ in range(n_lengths)]
        self.pend: list[float] | None = None   # each length's prediction for the next request
        self.mse = [0.0] * n_lengths
        self.mse_n = 0
        self.best = n_lengths - 1


class _Learner:
    """The learning step of every application's chain: the constants derived from a
    :class:`MarkovConfig` (candidate lengths' windows, context moduli) and the update."""

    def __init__(self, config: "MarkovConfig"):
        self.mse_decay = config.mse_decay
        self.order = config.order
        self.windows = tuple(n - config.order for n in config.lengths)  # transitions per length
        self.ctx_mod = N_STATES ** config.order
        # context lengths tables are kept for, longest (the order) first
        levels = range(config.order, 0, -1) if config.backoff else (config.order,)
        self.level_mods = tuple(N_STATES ** j for j in levels)

    def learn(self, app: _AppModel, x: int) -> None:
        """Teach ``app`` one request of ``x`` bytes (Algorithm 1's update, incremental)."""
        # Score the pending one-step predictions (Section III-B: least mean square error).
        pend = app.pend
        if pend is not None:
            mse = app.mse
            if app.mse_n == 0:
                for i, p in enumerate(pend):
                    mse[i] = (p - x) * (p - x)
            else:
                a = self.mse_decay
                for i, p in enumerate(pend):
                    e = p - x
                    mse[i] += a * (e * e - mse[i])
            app.mse_n += 1
        # mu and sd over the last `history` requests, including this one (Algorithm 1).
        hist = app.hist
        if len(hist) == hist.maxlen:
            old = hist[0]
            app.s1 -= old
            app.s2 -= old * old
        hist.append(x)
        app.s1 += x
        app.s2 += x * x
        n = len(hist)
        s1 = app.s1
        mu = app.mu = s1 / n
        sd = app.sd = math.sqrt(n * app.s2 - s1 * s1) / n
        s = state_index(x, mu, sd)
        # trainModel, incrementally: add this transition, drop the one leaving each window.
        order = self.order
        ctx = app.ctx
        if app.n_obs >= order:
            trans = app.trans
            trans.append(ctx * N_STATES + s)
            nt = len(trans)
            tables = app.tables
            margs = app.margs
            mods = self.level_mods
            for c, window in enumerate(self.windows):
                levels = tables[c]
                for table, mod in zip(levels, mods):
                    key = ctx % mod
                    row = table.get(key)
                    if row is None:
                        row = table[key] = _new_row()
                    row[s] += 1
                    row[_TOTAL] += 1
                    row[_LAST] = s
                marg = margs[c]
                marg[s] += 1
                marg[_TOTAL] += 1
                marg[_LAST] = s
                if nt > window:
                    old_ctx, old_s = divmod(trans[-window - 1], N_STATES)
                    for table, mod in zip(levels, mods):
                        key = old_ctx % mod
                        old_row = table[key]
                        old_row[old_s] -= 1
                        old_row[_TOTAL] -= 1
                        if old_row[_TOTAL] == 0:
                            del table[key]
                    marg[old_s] -= 1
                    marg[_TOTAL] -= 1
        ctx = app.ctx = (ctx * N_STATES + s) % self.ctx_mod
        app.n_obs += 1
        if app.n_obs > order:
            self.refresh_predictions(app)

    def refresh_predictions(self, app: _AppModel) -> None:
        """Each candidate's one-step prediction (bytes) and the least-MSE candidate."""
        ctx, mu, sd = app.ctx, app.mu, app.sd
        margs = app.margs
        mods = self.level_mods
        pend = []
        for c, levels in enumerate(app.tables):
            s, _ = _most_likely(_lookup(levels, mods, margs[c], ctx))
            pend.append(predicted_write_bytes(s, mu, sd))
        app.pend = pend
        if app.mse_n:
            mse = app.mse
            best = len(mse) - 1
            for c in range(best - 1, -1, -1):
                if mse[c] < mse[best]:
                    best = c
            app.best = best


class MarkovPredictor:
    """Per-application online Markov chain request predictor (Section III-B, Algorithm 1).

    Construct with a :class:`MarkovConfig`, or with its fields as keywords::

        p = MarkovPredictor(order=3, max_apps=10_000)
        p.observe("ior.4242", 64 << 20)
        p.predict("ior.4242", k=4, stripe_size=1 << 20, max_stripe_count=16, usable_osts=40)

    Not thread-safe: its callers serialise the changes. In the service the planner thread
    teaches it under the service lock (off the request path), and the request loop reads
    only membership (``jobid in p``, one dict lookup) and, inline, predictions under that
    lock.
    """

    def __init__(self, config: MarkovConfig | None = None, **fields: Any):
        if config is None:
            config = MarkovConfig(**fields)
        elif fields:
            raise PredictorUsageError(f"give a MarkovConfig or keyword fields, not both: {sorted(fields)}")
        elif not isinstance(config, MarkovConfig):
            raise PredictorUsageError(f"config must be a MarkovConfig, got {type(config).__name__}")
        self.config = config
        self.stats = PredictorStats()
        self._learner = learner = _Learner(config)
        self._lengths = config.lengths
        self._order, self._windows = learner.order, learner.windows
        self._ctx_mod, self._level_mods = learner.ctx_mod, learner.level_mods
        self._apps: OrderedDict[str, _AppModel] = OrderedDict()

    # ------------------------------------------------------------------ learning
    def observe(self, jobid: str, write_bytes: int | float) -> bool:
        """Learn one request of ``jobid`` that writes ``write_bytes`` bytes (0 for a read).

        Updates mu/sd, assigns the request its state, adds its transition to every
        candidate training sequence (dropping the one that fell out) and scores each
        candidate's prediction for this request. Cost O(number of candidate lengths).

        Returns:
            True if learned; False if ``write_bytes`` is NaN, infinite or negative (not
            learned, counted in ``stats.rejected``).
        Raises:
            PredictorUsageError: ``job_id`` is not a non-empty str, or ``write_bytes`` is
                not a real number.
        """
        if type(jobid) is not str or not jobid:
            raise PredictorUsageError(f"job_id must be a non-empty str, got {jobid!r}")
        if type(write_bytes) is int:
            x = write_bytes
            if x < 0:
                return self._reject(jobid, write_bytes)
        else:
            x = _coerce_bytes(write_bytes)
            if x is None:
                return self._reject(jobid, write_bytes)
        apps = self._apps
        app = apps.get(jobid)
        if app is None:
            app = apps[jobid] = self._new_app()
            if len(apps) > self.config.max_apps:
                evicted, _ = apps.popitem(last=False)
                self.stats.evicted += 1
                log.debug("evicted jobid %s", evicted,
                          extra={"event": "markov_evict", "job_id": evicted, "apps": len(apps)})
        else:
            apps.move_to_end(jobid)
        self._learner.learn(app, x)
        self.stats.observed += 1
        return True

    def _new_app(self) -> _AppModel:
        return _AppModel(self.config.history, len(self._lengths), len(self._level_mods),
                         self._windows[-1] + 1)

    def _reject(self, jobid: str, value: Any) -> bool:
        self.stats.rejected += 1
        log.debug("jobid %s: size %r rejected (not finite or negative)", jobid, value,
                  extra={"event": "markov_reject", "job_id": jobid, "write_bytes": repr(value),
                         "reason": "not_finite_or_negative"})
        return False

    # ---------------------------------------------------------------- prediction
    def predict(self, jobid: str, k: int, stripe_size: int, max_stripe_count: int,
                usable_osts: int) -> list[PredictedRequest]:
        """The next ``k`` requests of ``job_id`` as the chain predicts them (predictModel).

        Args:
            job_id: the application.
            k: requests to predict (>= 0).
            stripe_size: the application's fixed stripe size, bytes (> 0; Section III-B).
            max_stripe_count: ceiling on a predicted stripe count (>= 1).
            usable_osts: OSTs usable now (>= 0); also a ceiling on the stripe count.
        Returns:
            Up to ``k`` :class:`PredictedRequest`, step 1 first, probabilities
            non-increasing. Empty for an unknown application, one with fewer than
            ``order + 1`` requests, ``k == 0`` or ``usable_osts == 0``.
        Raises:
            PredictorUsageError: an argument of the wrong type or out of range.
        """
        if type(k) is not int or k < 0:
            raise PredictorUsageError(f"k must be an integer >= 0, got {k!r}")
        if type(stripe_size) is not int or stripe_size <= 0:
            raise PredictorUsageError(f"stripe_size must be an integer > 0 (bytes), got {stripe_size!r}")
        if type(max_stripe_count) is not int or max_stripe_count < 1:
            raise PredictorUsageError(f"max_stripe_count must be an integer >= 1, got {max_stripe_count!r}")
        if type(usable_osts) is not int or usable_osts < 0:
            raise PredictorUsageError(f"usable_osts must be an integer >= 0, got {usable_osts!r}")
        app = self._apps.get(jobid)
        if app is None or app.n_obs <= self._order or k == 0 or usable_osts == 0:
            if type(jobid) is not str or not jobid:
                raise PredictorUsageError(f"job_id must be a non-empty str, got {jobid!r}")
            return []
        ceiling = min(max_stripe_count, usable_osts)
        c = app.best
        levels = app.tables[c]
        mods = self._level_mods
        marg = app.margs[c]
        mu, sd = app.mu, app.sd
        ctx = app.ctx
        mod = self._ctx_mod
        p = 1.0
        out = []
        for step in range(1, k + 1):
            row = _lookup(levels, mods, marg, ctx)
            s, count = _most_likely(row)
            p *= count / row[_TOTAL]
            nbytes = predicted_write_bytes(s, mu, sd)
            stripes = -(-nbytes // stripe_size) if nbytes > stripe_size else 1
            out.append(PredictedRequest(jobid, step, s - 2, nbytes,
                                        stripes if stripes < ceiling else ceiling, p))
            ctx = (ctx * N_STATES + s) % mod
        return out

    # ------------------------------------------------------------ bookkeeping
    def forget(self, jobid: str) -> bool:
        """Drop what was learned about ``job_id`` (e.g. the job ended). True if it was known."""
        return self._apps.pop(jobid, None) is not None

    def __len__(self) -> int:
        return len(self._apps)

    def __contains__(self, jobid: object) -> bool:
        return jobid in self._apps

    def jobids(self) -> list[str]:
        """Tracked applications, least recently observed first (the eviction order)."""
        return list(self._apps)

    def app_info(self, jobid: str) -> AppModelInfo | None:
        """What is known about ``job_id``, or None if it is not tracked."""
        app = self._apps.get(jobid)
        if app is None:
            return None
        digits = []
        ctx = app.ctx
        for _ in range(min(self._order, app.n_obs)):
            ctx, d = divmod(ctx, N_STATES)
            digits.append(d - 2)
        return AppModelInfo(
            requests=app.n_obs, mean_bytes=app.mu, sd_bytes=app.sd,
            train_length=self._lengths[app.best],
            mse_by_length=dict(zip(self._lengths, app.mse)),
            last_states=tuple(reversed(digits)))

    # ------------------------------------------------------- persistence hooks
    def export_apps(self, jobids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The learned state of every application (or of those of ``job_ids`` still tracked,
        in that order), least recently observed first, as plain values (what
        :mod:`lustre_alloc.mapper.predictor.markov_store` writes)."""
        apps = self._apps
        items = apps.items() if jobids is None else \
            ((j, apps[j]) for j in jobids if j in apps)
        return [{"job_id": jobid, "n_obs": app.n_obs, "ctx": app.ctx,
                 "hist": list(app.hist), "trans": list(app.trans),
                 "mse": list(app.mse), "mse_n": app.mse_n}
                for jobid, app in items]

    def import_app(self, rec: dict[str, Any]) -> None:
        """Restore one application exported by :meth:`export_apps` (as most recently used).

        The transition tables, mu/sd and pending predictions are rebuilt from the stored
        requests and transitions, so the result predicts exactly what the exporter did.

        Raises:
            PredictorUsageError: the record is malformed or inconsistent with this
                predictor's configuration (the message says which field).
        """
        try:
            jobid, n_obs, ctx = rec["job_id"], rec["n_obs"], rec["ctx"]
            hist, trans, mse, mse_n = rec["hist"], rec["trans"], rec["mse"], rec["mse_n"]
        except (KeyError, TypeError) as exc:
            raise PredictorUsageError(f"application record lacks field {exc}") from None
        order, n_len = self._order, len(self._lengths)
        trans_cap = self._windows[-1] + 1
        if type(jobid) is not str or not jobid:
            raise PredictorUsageError(f"job_id: not a non-empty str: {jobid!r}")
        where = f"application {jobid!r}"

        def ints(name: str, values: Any, limit: int | None, max_len: int) -> None:
            if not isinstance(values, list) or len(values) > max_len:
                raise PredictorUsageError(f"{where}: {name}: not a list of at most {max_len}")
            for v in values:
                if type(v) is not int or v < 0 or (limit is not None and v >= limit):
                    raise PredictorUsageError(f"{where}: {name}: bad value {v!r}")
        ints("hist", hist, None, self.config.history)
        ints("trans", trans, self._ctx_mod * N_STATES, trans_cap)
        if (type(n_obs) is not int or len(hist) != min(n_obs, self.config.history)
                or len(trans) != min(trans_cap, max(0, n_obs - order))):
            raise PredictorUsageError(
                f"{where}: n_obs {n_obs!r} inconsistent with {len(hist)} requests "
                f"and {len(trans)} transitions")
        if type(ctx) is not int or not 0 <= ctx < self._ctx_mod or (
                trans and ctx % N_STATES != trans[-1] % N_STATES):
            raise PredictorUsageError(f"{where}: ctx {ctx!r} out of range or inconsistent")
        if (not isinstance(mse, list) or len(mse) != n_len
                or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in mse)):
            raise PredictorUsageError(f"{where}: mse must be {n_len} finite numbers >= 0")
        if type(mse_n) is not int or mse_n < 0:
            raise PredictorUsageError(f"{where}: mse_n {mse_n!r} is not an integer >= 0")
        app = self._new_app()
        for x in hist:
            app.hist.append(x)
        app.s1 = sum(app.hist)
        app.s2 = sum(x * x for x in app.hist)
        if hist:
            n = len(app.hist)
            app.mu = app.s1 / n
            app.sd = math.sqrt(n * app.s2 - app.s1 * app.s1) / n
        app.n_obs, app.ctx = n_obs, ctx
        app.mse, app.mse_n = [float(v) for v in mse], mse_n
        for code in trans:
            app.trans.append(code)
        for c, window in enumerate(self._windows):
            levels, marg = app.tables[c], app.margs[c]
            for code in list(app.trans)[-window:]:
                prev, s = divmod(code, N_STATES)
                rows = [marg]
                for table, mod in zip(levels, self._level_mods):
                    row = table.get(prev % mod)
                    if row is None:
                        row = table[prev % mod] = _new_row()
                    rows.append(row)
                for r in rows:
                    r[s] += 1
                    r[_TOTAL] += 1
                    r[_LAST] = s
        if n_obs > order:
            self._learner.refresh_predictions(app)
        self._apps[jobid] = app
        self._apps.move_to_end(jobid)
        while len(self._apps) > self.config.max_apps:
            self._apps.popitem(last=False)
            self.stats.evicted += 1


def _coerce_bytes(value: Any) -> int | None:
    """A byte count from any real number: an int, or None if NaN/infinite/negative."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PredictorUsageError(
            f"write_bytes must be a real number, got {type(value).__name__} {value!r}")
    try:
        x = operator.index(value)
    except TypeError:
        f = float(value)
        if not math.isfinite(f) or f < 0:
            return None
        return int(f + 0.5)
    return x if x >= 0 else None
