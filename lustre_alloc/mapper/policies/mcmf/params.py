"""The parameters of the MCMF policy: one dataclass read from ``[policy.mcmf]`` (the
mapper's TOML) or ``[policy_params.mcmf]`` (a scenario), checked once.

Sources of the defaults: Paul et al. 2017 (Section III) for the predictor and the flow;
measurements (``docs/placement.md``, ``docs/history.md``) for the rate cost and the plan queues.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lustre_alloc.common.settings import settings_of, setting
from lustre_alloc.mapper.flow.solver import SOLVERS
from lustre_alloc.mapper.flow.stragglers import (STRAGGLER_FACTOR, STRAGGLER_MAX_FRACTION,
                                    STRAGGLER_MIN_EXCESS_S)

PREDICT_MODES = ("joint", "after")

EXPERIMENTAL_TABLE = "experimental"


@dataclass(frozen=True)
class McmfParams:
    """Every knob of :class:`lustre_alloc.mapper.policies.mcmf.McmfPolicy`.

    Attributes:
        cost_model: ``"rate"`` (default: expected completion time from measured rates),
            or a model a study registered (``bench/experiments/costs.py``: the paper's and a
            convex one, which lost: docs/placement.md) (:mod:`lustre_alloc.mapper.flow.costs`).
        cost_params: parameters of the cost model (alpha, beta, weights).
        predict_k: predicted requests per application per round (0, the default,
            disables prediction: the chain learns a file's size only from the sizes
            requests announce, and no bundled world announces any, so it never changed
            a placement there; where it had true sizes it cost balance and time:
            docs/placement.md, "The predictor's place"; the paper's value is 4).
        markov: :class:`~lustre_alloc.mapper.predictor.markov.MarkovConfig` fields.
        solver: ``"ortools"`` (default) or ``"networkx"`` (the paper's; slow).
        prune: exact candidate pruning (:mod:`lustre_alloc.mapper.flow.network`).
        straggler_factor, straggler_min_excess_s, straggler_max_fraction: the straggler
            rule (:mod:`lustre_alloc.mapper.flow.stragglers`).
        pending_half_life_s: half-life of the placed-but-not-yet-visible estimate, s.
        cache_ttl_s: how long a predicted request's OST list stays valid, s (0: never
            answer from predicted lists; predictions then only shape each round).
        app_weight: points per stripe an application already has on an OST (recently),
            added to its request arcs (:mod:`lustre_alloc.mapper.policies.mcmf.placed_books`).
        app_half_life_s: decay of that count, s.
        predict_mode: ``"joint"`` (the paper: current and predicted requests in one
            flow) or ``"after"`` (current requests first, then the predicted ones in a
            second flow on the state the current ones left).
        plan_ahead: keep per request class a queue of OST lists planned ahead
            (:mod:`lustre_alloc.mapper.policies.mcmf.plan_queues`).
        plan_ttl_s, plan_horizon_s, plan_max_depth: the plan queues' TTL (s), planning
            horizon (s) and depth cap.
        plan_inline: run the planner at the end of a request round that missed (the
            simulator); the service's background planner turns it off
            (:meth:`~lustre_alloc.mapper.policies.mcmf.McmfPolicy.plan_in_background`).
        plan_aggregate_above: a class lacking more lists than this is planned as one
            aggregated request with at most :func:`~lustre_alloc.mapper.flow.ost_lists.slot_cap`
            stripes per OST.
        rate_smoothing: weight of a new sample in each OST's smoothed write rate
            (:mod:`lustre_alloc.mapper.speed.rates`). 0.3 since the estimate counts the I/Os in
            flight (a busy OST no longer reads slow); 0.05 before, when a busy interval
            had to be averaged away (docs/placement.md, "Lustre's RR unless the
            evidence says otherwise").
        latency_smoothing: weight of a new sample in the smoothed brw_stats RPC time the
            ``rate`` cost sees (1: the last sample).
        regime: switch to Lustre's round-robin while the evidence says the OSTs are
            alike (:mod:`lustre_alloc.mapper.policies.mcmf.regime`: by default no straggler, no OST within
            an RPC of the ENOSPC reserve, no OST served by its failover partner,
            estimated rates within 2x between median and p10), the flow otherwise. On by
            default: the flow's greedy optimum over 5 s-old samples lost 3-11% of job I/O
            time to RR's rotation in worlds where the OSTs are alike (docs/placement.md).
        alike_to_lustre: with ``regime``, while the OSTs look alike (and LOD would place
            round-robin: the gate's test) a leased class's creates are left to Lustre's
            own allocator (the lease desk answers
            ``allocator: "lustre"``; the shim creates plainly): LOD's own rotation, a
            create that costs the MDS what a plain one does, and no layout decided per
            file. Creates asked per create (v1) still get the regime's round-robin list.
        regime_params: :class:`~lustre_alloc.mapper.policies.mcmf.regime.RegimeThresholds` fields (None
            turns a test off; the load and space tests are off by default).
        space_cost_model, space_cost_params: with ``regime``, the cost model of every
            round (planning and requests alike) while load is uniform but space is not
            (None: ``cost_model`` always).
        predict_min_accuracy: predict an application's requests only while the share of
            its predicted lists that were used is at least this (0: always predict).
        predict_min_trials: lists judged before the accuracy is trusted.
        predict_window: outcomes after which the counts halve; also the probe period
            of an application below the threshold.
        rate_relax_s: an OST's speed estimate relaxes toward the others' median with this
            time constant, s, while its samples carry no evidence (0: never;
            :class:`lustre_alloc.mapper.speed.rates.OstRateTracker`).
        rate_busy_s: weigh what a look at the state adds by the evidence in it: the
            estimate over the samples since the last look falls in with weight
            ``1 - (1 - rate_smoothing) ** (busy_s / rate_busy_s)``, ``busy_s`` the seconds
            the OST spent writing in them (brw_stats I/O time over I/Os in flight). None:
            ``rate_smoothing`` per look, whatever it holds (the default).
        rate_first_look_median: the first look's estimates fall from their median by
            ``rate_smoothing`` (as an OST's first sample after others were measured does)
            instead of being taken as they are. Off by default.
        size_from_job_stats: a create that announces no size (``expected_bytes`` 0, the
            shim's default) is priced and
            booked at its job's bytes written per file created over Lustre's job_stats
            window (:mod:`lustre_alloc.mapper.state.job_sizes`: OST ``write_bytes`` over MDT ``mknod``);
            a jobid with fewer than its minimum creates stays unsized. Off by default.

    Raises (on construction):
        ValueError: a value out of range or an unknown name, naming the field.
    """
    cost_model: str = "rate"
    cost_params: dict[str, float] | None = None
    predict_k: int = setting(0, unit="requests", doc=(
        "predicted requests per application per round (0: off; the paper's 4); the chain "
        "learns only from sizes requests announce"),
        source='docs/placement.md, "The predictor\'s place": no bundled world announces sizes',
        shown="0 (off)")
    markov: dict[str, Any] | None = None
    solver: str = "ortools"
    prune: bool = True
    straggler_factor: float = setting(STRAGGLER_FACTOR, unit="x the median", doc=(
        "an OST whose brw_stats write time is this many times its peers' median leaves the "
        "round"), source="healthy OSTs stay within 2x, a degraded RAID shows 5-10x "
                         "(lustre_alloc/mapper/flow/stragglers.py)")
    straggler_min_excess_s: float = STRAGGLER_MIN_EXCESS_S
    straggler_max_fraction: float = setting(STRAGGLER_MAX_FRACTION, unit="share of usable OSTs",
        doc="most OSTs left out as stragglers at once",
        source="when half the system is slow it is busy, not straggling")
    pending_half_life_s: float = setting(300.0, unit="s", doc=(
        "bytes placed but not yet visible in the statistics fade with this half-life"))
    cache_ttl_s: float = 5.0
    app_weight: float = 0.0
    app_half_life_s: float = 3600.0
    predict_mode: str = "joint"
    plan_ahead: bool = True
    plan_ttl_s: float = setting(2.5, unit="s", doc=(
        "the oldest a planned OST list (or a leased layout) may be when handed out"),
        source='half the collectors\' 5 s interval (docs/placement.md, "Staleness bound")')
    plan_horizon_s: float = 1.0
    plan_max_depth: int = 1024
    plan_inline: bool = True
    plan_aggregate_above: int = 8
    rate_smoothing: float = setting(0.3, unit="weight 0..1", doc=(
        "weight of a new sample in each OST's speed estimate; the estimate counts the I/Os in "
        "flight, so a busy OST does not read slow"),
        source='docs/placement.md, "Lustre\'s RR unless the evidence says otherwise"')
    latency_smoothing: float = 1.0
    regime: bool = setting(True, unit="true/false", doc=(
        "Lustre's round-robin while the OSTs look alike, the flow otherwise"),
        source="the flow lost 3-11% of job I/O time to round-robin where the OSTs were alike "
               "(docs/placement.md)")
    alike_to_lustre: bool = setting(True, unit="true/false", doc=(
        "while the OSTs look alike and LOD would place round-robin, leased creates are left "
        "to Lustre's own allocator (a plain create)"),
        source="the control on Lustre 2.17.0 (docs/lustre-vm.md, \"Placement with a slow "
               "OST\")")
    regime_params: dict[str, float | bool] | None = None
    space_cost_model: str | None = None
    space_cost_params: dict[str, float] | None = None
    predict_min_accuracy: float = 0.0
    predict_min_trials: int = 8
    predict_window: int = 32
    rate_relax_s: float = 0.0
    rate_busy_s: float | None = None
    rate_first_look_median: bool = False
    size_from_job_stats: bool = False

    def __post_init__(self) -> None:
        if self.solver not in SOLVERS:
            raise ValueError(f"unknown solver {self.solver!r}; known: {', '.join(SOLVERS)}")
        if type(self.predict_k) is not int or self.predict_k < 0:
            raise ValueError(f"predict_k must be an integer >= 0, got {self.predict_k!r}")
        if self.pending_half_life_s <= 0 or self.cache_ttl_s < 0:
            raise ValueError("pending_half_life_s must be > 0 and cache_ttl_s >= 0")
        if (not 0 <= self.predict_min_accuracy <= 1 or self.predict_min_trials < 0
                or self.predict_window < 1):
            raise ValueError("predict_min_accuracy must be in [0, 1], predict_min_trials >= 0, "
                             "predict_window >= 1")
        if self.predict_mode not in PREDICT_MODES:
            raise ValueError(f"predict_mode must be 'joint' or 'after', got {self.predict_mode!r}")
        if self.rate_relax_s < 0:
            raise ValueError(f"rate_relax_s must be >= 0, got {self.rate_relax_s!r}")
        if self.rate_busy_s is not None and not self.rate_busy_s > 0:
            raise ValueError(f"rate_busy_s must be > 0 or None, got {self.rate_busy_s!r}")
        if self.plan_aggregate_above < 1:
            raise ValueError(f"plan_aggregate_above must be >= 1, got {self.plan_aggregate_above!r}")


ADMIN_SETTINGS: tuple[str, ...] = tuple(f.name for f, _ in settings_of(McmfParams))
"""The keys of an admin's ``[policy.mcmf]``: the fields of :class:`McmfParams` that carry
:func:`~lustre_alloc.common.settings.setting` metadata (unit, default, source). Every other
field is an experiment, read only from ``[policy.mcmf.experimental]`` (the mapper logs a
warning for each)."""


def params_from_table(table: dict[str, Any], where: str = "policy.mcmf"
                      ) -> tuple[dict[str, Any], list[str]]:
    """An admin's or a scenario's ``[<where>]`` table as :class:`McmfParams` keywords: the
    :data:`ADMIN_SETTINGS` at its top, every other field under ``[<where>.experimental]``;
    also the experimental keys set.

    Raises:
        ValueError: one line naming ``<where>.<key>``: an unknown key, an experimental one at
            the top, an admin one under ``experimental``, an ``experimental`` that is not a
            table.
    """
    fields = {f.name for f in dataclasses.fields(McmfParams)}
    out: dict[str, Any] = {}
    experimental: list[str] = []
    for key, value in table.items():
        if key == EXPERIMENTAL_TABLE:
            if not isinstance(value, dict):
                raise ValueError(f"{where}.{EXPERIMENTAL_TABLE} must be a table")
            for sub, sub_value in value.items():
                name = f"{where}.{EXPERIMENTAL_TABLE}.{sub}"
                if sub in ADMIN_SETTINGS:
                    raise ValueError(f"{name}: not an experiment: set it in [{where}]")
                if sub not in fields:
                    raise ValueError(f"{name}: unknown parameter; known experiments: "
                                     f"{', '.join(sorted(fields - set(ADMIN_SETTINGS)))}")
                out[sub] = sub_value
                experimental.append(sub)
        elif key in ADMIN_SETTINGS:
            out[key] = value
        elif key in fields:
            raise ValueError(f"{where}.{key}: an experiment: set it under "
                             f"[{where}.{EXPERIMENTAL_TABLE}]")
        else:
            raise ValueError(f"{where}.{key}: unknown parameter of mcmf; known: "
                             f"{', '.join(sorted(ADMIN_SETTINGS))} "
                             f"(experiments under [{where}.{EXPERIMENTAL_TABLE}])")
    return out, experimental

