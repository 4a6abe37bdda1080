"""Local reduction on the server before publishing (Section III-D: "we parse OSS/OST information
at the associated OSS, and reduce and compress the information before sending it to MDS").

Cumulative counters become rates over the interval; brw_stats histograms become a latency and
size summary of the interval's I/Os. A counter that went down (cleared by a write to the file,
a target remount, a job evicted from job_stats, or a new ``start_time`` on 2.15+) is a reset:
no rate is produced for that interval, never a negative one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping


class CounterReset(Exception):
    """A cumulative value went down between two readings (or its start time changed)."""

    def __init__(self, name: str, before: float, after: float) -> None:
        self.name = name
        super().__init__(f"counter reset: {name} {before} -> {after}")


def delta(name: str, before: int, after: int) -> int:
    """``after - before`` for a cumulative counter.

    Raises:
        CounterReset: ``after < before``.
    """
    if after < before:
        raise CounterReset(name, before, after)
    return after - before


def choose_interval(prev_snapshot: float | None, snapshot: float | None, local_dt: float) -> float:
    """Seconds between two readings: the kernel's ``snapshot_time`` difference when it is
    plausible (positive and within 3x the locally measured gap + 1 s), else ``local_dt``.

    ``snapshot_time`` is wall-clock on most versions but monotonic on 2.15.0/2.15.1 (LU-16231);
    a difference is valid either way, an absolute value is not used.
    """
    if prev_snapshot is not None and snapshot is not None:
        d = snapshot - prev_snapshot
        if 0 < d <= 3 * local_dt + 1.0:
            return d
    return local_dt


def histogram_delta(name: str, before: Mapping[int, int], after: Mapping[int, int]) -> dict[int, int]:
    """Per-bucket increase of a cumulative histogram (buckets absent before count from 0).

    Raises:
        CounterReset: a bucket went down, or one present before disappeared with a nonzero count.
    """
    out: dict[int, int] = {}
    for bucket, count in after.items():
        out[bucket] = delta(f"{name}[{bucket}]", before.get(bucket, 0), count)
    for bucket, count in before.items():
        if bucket not in after and count:
            raise CounterReset(f"{name}[{bucket}]", count, 0)
    return out


@dataclass(frozen=True, slots=True)
class Log2Summary:
    """Summary of a log2-bucketed histogram over one interval.

    Attributes:
        count: events in the interval.
        mean: estimated mean, in the histogram's unit: each bucket ``b`` holds values in
            ``(b/2, b]`` (``lprocfs_oh_tally_log2``), taken at its midpoint ``0.75 b`` (``0.5`` for
            the first bucket, which also holds 0).
        p50, p99: bucket upper bounds holding the 50th / 99th percentile (conservative).
        max: upper bound of the highest non-empty bucket.
    """
    count: int
    mean: float
    p50: int
    p99: int
    max: int


def summarize_log2(counts: Mapping[int, int]) -> Log2Summary | None:
    """:class:`Log2Summary` of ``{bucket upper bound: count}``, ``None`` when empty."""
    items = sorted((b, c) for b, c in counts.items() if c > 0)
    total = sum(c for _, c in items)
    if total == 0:
        return None
    mean = sum((0.5 if b <= 1 else 0.75 * b) * c for b, c in items) / total
    p50 = p99 = items[-1][0]
    running = 0
    found50 = False
    for bucket, count in items:
        running += count
        if not found50 and running * 2 >= total:
            p50, found50 = bucket, True
        if running * 100 >= total * 99:
            p99 = bucket
            break
    return Log2Summary(total, mean, p50, p99, items[-1][0])


def log2_bucket(value: float) -> int:
    """The ``lprocfs_oh_tally_log2`` bucket of ``value``: the smallest power of two >= it
    (lustre/obdclass/lprocfs_status.c); 0 and 1 land in bucket 1. Vectorised form:
    :func:`lustre_alloc.simulator.ost_readings.log2_bucket_index`."""
    if value <= 1:
        return 1
    return 1 << math.ceil(math.log2(value))

