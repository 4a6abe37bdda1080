"""Straggler OSTs: slow enough now that new stripes should avoid them.

Paul et al. 2017, Section III-D: the MDS "knows the I/O read/write time per OST" from
``brw_stats``, "which helps in removing the stragglers (i.e., slow OSTs) from the
decision making list". The paper gives no rule; ours:

* Only usable OSTs with a known recent write latency (``OstState.write_latency_s``, the
  mean of the brw_stats "I/O time" histogram over the last interval) take part, and
  only when at least :data:`MIN_PEERS` of them have one: no peers, no comparison.
* An OST is a straggler when its latency exceeds ``factor`` times the median of its
  peers (default 3: a healthy OST under its share of load stays within 2x of the median
  in brw_stats histograms; a degraded RAID or failing disk shows 5-10x) and exceeds
  the median by at least ``min_excess_s`` (so microsecond-level noise on idle OSTs
  never counts).
* At most ``max_fraction`` of the peers (default 25%, the slowest first) are excluded:
  when half the system is "slow" the system is busy, not straggling, and excluding
  half of it would concentrate load on the rest.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from lustre_alloc.mapper.speed.rates import MIN_PEERS
from lustre_alloc.mapper.state.cluster_state import OstState

STRAGGLER_FACTOR = 3.0
STRAGGLER_MIN_EXCESS_S = 0.0
STRAGGLER_MAX_FRACTION = 0.25


def find_stragglers(osts: Iterable[OstState], factor: float = STRAGGLER_FACTOR,
                    min_excess_s: float = STRAGGLER_MIN_EXCESS_S,
                    max_fraction: float = STRAGGLER_MAX_FRACTION) -> set[int]:
    """OST indices to leave out of this round (see the module docstring).

    Args:
        osts: usable OSTs (the caller filters health and pools first).
        factor: latency over the median that marks a straggler (> 1).
        min_excess_s: seconds above the median also required.
        max_fraction: cap on the share of peers excluded, in [0, 1).
    Raises:
        ValueError: factor <= 1 or max_fraction outside [0, 1).
    """
    pairs = [(o.write_latency_s, o.index) for o in osts if o.write_latency_s is not None]
    if not pairs:
        _check(factor, max_fraction)
        return set()
    table = np.array(pairs, dtype=float)
    return straggler_indices(table[:, 1].astype(np.int64), table[:, 0],
                             np.ones(len(table), dtype=bool), factor, min_excess_s, max_fraction)


def _check(factor: float, max_fraction: float) -> None:
    if not factor > 1.0:
        raise ValueError(f"straggler factor must be > 1, got {factor}")
    if not 0.0 <= max_fraction < 1.0:
        raise ValueError(f"straggler max_fraction must be in [0, 1), got {max_fraction}")


def straggler_indices(index: np.ndarray, latency_s: np.ndarray, known: np.ndarray,
                      factor: float = STRAGGLER_FACTOR,
                      min_excess_s: float = STRAGGLER_MIN_EXCESS_S,
                      max_fraction: float = STRAGGLER_MAX_FRACTION) -> set[int]:
    """:func:`find_stragglers` on arrays: usable OSTs' ``index`` (int, ascending),
    ``latency_s`` (s) and ``known`` (bool: the latency was measured), all shape (N,).
    Vectorized (the mapper's rounds at thousands of OSTs).

    Raises:
        ValueError: factor <= 1 or max_fraction outside [0, 1).
    """
    _check(factor, max_fraction)
    if int(np.count_nonzero(known)) < MIN_PEERS:
        return set()
    idx, lat = index[known], latency_s[known].astype(float)
    ok = np.isfinite(lat) & (lat >= 0)
    idx, lat = idx[ok], lat[ok]
    if len(lat) < MIN_PEERS:
        return set()
    median = float(np.median(lat))
    slow = np.nonzero((lat > factor * median) & (lat - median >= min_excess_s))[0]
    limit = int(max_fraction * len(lat))
    worst = slow[np.argsort(-lat[slow], kind="stable")][:limit]
    return {int(i) for i in idx[worst]}


def slowest_outliers(pairs: Iterable[tuple[float, int]], factor: float = STRAGGLER_FACTOR,
                     min_excess: float = STRAGGLER_MIN_EXCESS_S,
                     max_fraction: float = STRAGGLER_MAX_FRACTION) -> set[int]:
    """The rule of the module docstring on any per-OST time: ``pairs`` of (seconds,
    OST index), e.g. the time per byte of an OST's smoothed measured rate (the ``rate``
    cost: slow, not merely busy). Same rule as :func:`straggler_indices`.

    Raises:
        ValueError: factor <= 1 or max_fraction outside [0, 1).
    """
    pairs = sorted((int(i), float(t)) for t, i in pairs)
    if not pairs:
        return set()
    idx = np.array([i for i, _ in pairs], dtype=np.int64)
    sec = np.array([t for _, t in pairs], dtype=float)
    return straggler_indices(idx, sec, np.ones(len(idx), dtype=bool), factor, min_excess,
                             max_fraction)
