"""Load-balance metrics as the paper defines them, plus standard dispersion measures.

Sources: Paul et al. 2017, Section II-B and IV-B. "Load balance is the ratio of maximum
system load to the mean system load": for OSTs the used disk space sampled every hour
(Fig. 1/11), for OSSes the CPU utilisation every 1-second step (Fig. 2/12). "Capacity"
of an OST is its free space, normalised each hour to that hour's median (Fig. 3/14).
"""
from __future__ import annotations

import numpy as np

BALANCED_MAX_MEAN = 1.05
"""Threshold for hours-to-balance (ours: within 5% of perfect balance)."""


def _nan_aware(load: np.ndarray) -> bool:
    """NaN marks an OST that does not exist yet (before an expansion): left out."""
    return bool(np.isnan(load).any())


def max_mean_ratio(load: np.ndarray) -> np.ndarray:
    """Max/mean over the last axis. Shape (..., N) -> (...). A zero mean gives 1.0
    (an idle or empty system is balanced), never a division by zero. NaN entries
    (OSTs not yet added) are left out."""
    load = np.asarray(load, dtype=float)
    if _nan_aware(load):
        mean, mx = np.nanmean(load, axis=-1), np.nanmax(load, axis=-1)
    else:
        mean = load.mean(axis=-1)
        mx = load.max(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mean > 0, mx / np.where(mean > 0, mean, 1.0), 1.0)


def hours_to_balance(ratio_by_hour: np.ndarray, threshold: float = BALANCED_MAX_MEAN) -> float | None:
    """First hour ``h`` such that ``ratio[t] <= threshold`` for every ``t >= h``.

    ``ratio_by_hour[h]`` is the ratio at the end of hour ``h`` (index 0 = start).
    Returns None when the series never stays balanced to its end.
    """
    r = np.asarray(ratio_by_hour, dtype=float)
    above = np.nonzero(r > threshold)[0]
    if len(above) == 0:
        return 0.0
    h = int(above[-1]) + 1
    return float(h) if h < len(r) else None


def coefficient_of_variation(load: np.ndarray) -> np.ndarray:
    """Population standard deviation / mean over the last axis (0 when mean is 0; NaN
    entries left out)."""
    load = np.asarray(load, dtype=float)
    if _nan_aware(load):
        mean, std = np.nanmean(load, axis=-1), np.nanstd(load, axis=-1)
    else:
        mean = load.mean(axis=-1)
        std = load.std(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mean > 0, std / np.where(mean > 0, mean, 1.0), 0.0)


def jain_index(load: np.ndarray) -> np.ndarray:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)`` over the last axis: 1 for
    perfect balance, 1/n when one element carries everything (Jain, Chiu, Hawe 1984).
    All-zero loads give 1.0. NaN entries are left out."""
    load = np.asarray(load, dtype=float)
    if _nan_aware(load):
        n = (~np.isnan(load)).sum(axis=-1)
        load = np.nan_to_num(load)
    else:
        n = load.shape[-1]
    s = load.sum(axis=-1)
    sq = (load * load).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sq > 0, s * s / (n * np.where(sq > 0, sq, 1.0)), 1.0)


def normalised_capacity(free_bytes_by_hour: np.ndarray) -> np.ndarray:
    """Free space of each OST divided by that hour's median free space (Fig. 3/14).

    Shape (H, N) -> (H, N). A zero median gives zeros for that hour; NaN entries (OSTs
    not yet added) stay NaN."""
    free = np.asarray(free_bytes_by_hour, dtype=float)
    med = (np.nanmedian(free, axis=-1, keepdims=True) if _nan_aware(free)
           else np.median(free, axis=-1, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(med > 0, free / np.where(med > 0, med, 1.0), 0.0)


def per_step_to_hourly_mean(series: np.ndarray, step_s: float) -> np.ndarray:
    """Mean of a per-step series over each whole hour. Shape (steps,) -> (hours,)."""
    per_hour = int(round(3600.0 / step_s))
    hours = len(series) // per_hour
    if hours == 0:
        return np.asarray(series, dtype=float).mean(keepdims=True)
    return np.asarray(series[: hours * per_hour], dtype=float).reshape(hours, per_hour).mean(axis=1)


def percentile_or_none(values: np.ndarray, q: float) -> float | None:
    """``np.percentile`` of a possibly empty array (None when empty)."""
    values = np.asarray(values, dtype=float)
    return float(np.percentile(values, q)) if values.size else None
