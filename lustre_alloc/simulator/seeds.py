"""Several seeds of a scenario: each metric's mean and 95% interval over the seeds, and
each policy's difference from round-robin with its interval: no number rests on one
seed.

The interval is Student's t on the per-seed values (``scipy.stats.t``): for ``n`` seeds,
``mean +- t(0.975, n-1) * sd / sqrt(n)``. A difference from RR is taken seed by seed (the
same seed gives both policies the same cluster and workload), and the table says when its
interval includes zero: then the seeds do not show a difference.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

SEED_METRICS = ("phase_io_time_s_mean", "phase_io_time_s_p99", "job_io_time_s_mean",
                "mean_io_bandwidth_mib_s", "jobs_unfinished", "ost_max_mean_end",
                "headroom_phase_mean", "headroom_phase_p99", "steer_actions")
"""The summary keys aggregated over seeds (``steer_actions``: OSTs the steering controller
flagged or drained, 0 for every policy that does not steer)."""


def interval(values: Sequence[float]) -> dict[str, float | int | None]:
    """``{"n", "mean", "ci95"}`` of the finite values (``ci95``: the half-width; None for
    fewer than two values)."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if not len(v):
        return {"n": 0, "mean": None, "ci95": None}
    if len(v) < 2:
        return {"n": 1, "mean": round(float(v[0]), 4), "ci95": None}
    half = float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return {"n": int(len(v)), "mean": round(float(v.mean()), 4), "ci95": round(half, 4)}


def aggregate(per_seed: Sequence[Sequence[dict]]) -> list[dict]:
    """Per policy (in the first seed's order): each metric of :data:`SEED_METRICS` as an
    :func:`interval` over the seeds, and ``vs_round_robin``: the per-seed difference
    (policy - RR) as an interval with ``includes_zero``."""
    policies = [s["policy"] for s in per_seed[0]]
    by_seed = [{s["policy"]: s for s in rows} for rows in per_seed]
    out = []
    for p in policies:
        row: dict = {"policy": p, "seeds": len(per_seed)}
        for key in SEED_METRICS:
            row[key] = interval([seed[p].get(key) for seed in by_seed])
            if "round_robin" in by_seed[0] and not key.startswith(("headroom", "steer")):
                diff = interval([_diff(seed[p].get(key), seed["round_robin"].get(key))
                                 for seed in by_seed])
                if diff["ci95"] is not None:
                    diff["includes_zero"] = abs(diff["mean"]) <= diff["ci95"]
                row[key]["vs_round_robin"] = diff
        out.append(row)
    return out


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b
