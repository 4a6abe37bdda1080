"""What an OSS's ``obdfilter.*.job_stats`` would hold, kept by the simulator as Lustre keeps
it: per OST and job id, cumulative ``read_bytes`` and ``write_bytes`` counters
advanced by the bytes the job's transfers moved on that OST.

Lustre's semantics (``lprocfs_jobstats.c``): a job's counters are cumulative while the job
stays in the table; a job idle for ``job_cleanup_interval`` (600 s by default) is dropped
and starts again from zero if it comes back, which the collectors' reduction sees as a
reset (:func:`lustre_alloc.collectors.collector.reduce_jobs`). Each counter's ``samples`` are RPCs: the
bytes in whole :data:`lustre_alloc.simulator.models.RPC_BYTES` RPCs, the rest counting as one more.

A transfer's bytes are counted as they move: the book's transfers in flight contribute
their progress so far at each sample, and a transfer that leaves the book (finished or
cancelled) adds what it moved to the settled totals (:meth:`JobReadings.settle`), so the
counters never go down while a job stays in the table.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

from lustre_alloc.collectors.readers._common import Counter
from lustre_alloc.collectors.readers.job_stats import JobEntry, JobStats
from lustre_alloc.simulator.inflight import SimTransfer
from lustre_alloc.simulator.models import RPC_BYTES

JOB_CLEANUP_INTERVAL_S = 600.0
"""``obdfilter.*.job_cleanup_interval`` default, s: a job inactive this long is removed from
the table (Lustre Operations Manual, "Lustre Jobstats": auto-cleanup interval, 600 s by
default; ``lustre/obdclass/lprocfs_jobstats.c``)."""

_NAMES = ("read_bytes", "write_bytes")


def _counter(nbytes: float) -> Counter:
    """A ``{samples, unit: bytes, min, max, sum}`` counter of ``nbytes`` in RPCs."""
    total = int(nbytes)
    rpc = int(RPC_BYTES)
    samples = math.ceil(total / rpc) if total > 0 else 0
    size = min(total, rpc) if samples else 0
    return Counter(samples=samples, unit="bytes", min=size, max=size, sum=total)


class JobReadings:
    """Cumulative per-(OST position, job id) byte counters.

    Args:
        cleanup_s: ``job_cleanup_interval``, s: a job whose counters on an OST have not
            moved for this long is dropped from that OST's table.
    """

    def __init__(self, cleanup_s: float = JOB_CLEANUP_INTERVAL_S):
        self.cleanup_s = cleanup_s
        # (position, job id) -> [read bytes, written bytes] of transfers that left the book
        self._settled: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        self._last: dict[tuple[int, str], tuple[float, float]] = {}   # -> (total, when it changed)

    def settle(self, tr: SimTransfer, moved_fraction: float) -> None:
        """``tr`` left the book having moved ``moved_fraction`` of its bytes."""
        if moved_fraction <= 0:
            return
        i = int(tr.write)
        for p, b in zip(tr.osts.tolist(), (tr.per_ost * moved_fraction).tolist()):
            self._settled[(p, tr.job)][i] += b

    def job_stats(self, now: float,
                  inflight: Iterable[tuple[SimTransfer, float]]) -> dict[int, JobStats]:
        """Every OST position's table at ``now``, as its job_stats file would read: the
        settled totals plus the progress of ``inflight`` (``(transfer, bytes remaining)``,
        :meth:`lustre_alloc.simulator.transfer_book.TransferBook.remaining`), jobs idle for
        ``cleanup_s`` dropped. Positions with no job are absent."""
        totals: dict[tuple[int, str], list[float]] = {k: list(v) for k, v in self._settled.items()}
        for tr, rem in inflight:
            moved = (tr.nbytes - rem) / tr.nbytes if tr.nbytes > 0 else 0.0
            if moved <= 0:
                continue
            i = int(tr.write)
            for p, b in zip(tr.osts.tolist(), (tr.per_ost * moved).tolist()):
                totals.setdefault((p, tr.job), [0.0, 0.0])[i] += b
        out: dict[int, JobStats] = {}
        for key, (rb, wb) in totals.items():
            total = rb + wb
            seen = self._last.get(key)
            if seen is None or total != seen[0]:
                self._last[key] = (total, now)
            elif now - seen[1] >= self.cleanup_s:
                self._drop(key)
                continue
            entry = JobEntry(jobid=key[1], snapshot_time=now,
                             counters={n: _counter(v) for n, v in zip(_NAMES, (rb, wb))})
            out.setdefault(key[0], JobStats()).jobs[key[1]] = entry
        return out

    def _drop(self, key: tuple[int, str]) -> None:
        """Lustre's cleanup: the job leaves the table; if it comes back it starts at zero
        (its in-flight bytes so far are forgotten with it)."""
        self._settled.pop(key, None)
        self._last.pop(key, None)


class MdtJobReadings:
    """What the MDT's ``mdt.*.job_stats`` would hold: per job id, cumulative ``open`` and
    ``mknod`` counters, each advanced by one per file the job created (Lustre counts both
    for an ``open(O_CREAT)`` that creates: ``lustre/mdt/mdt_open.c`` ``mdt_reint_open()``),
    a job idle for ``cleanup_s`` dropped as in :class:`JobReadings`.

    Args:
        cleanup_s: ``job_cleanup_interval``, s.
    """

    def __init__(self, cleanup_s: float = JOB_CLEANUP_INTERVAL_S):
        self.cleanup_s = cleanup_s
        self._creates: dict[str, int] = {}
        self._last: dict[str, float] = {}        # job id -> when it last created

    def created(self, jobid: str, now: float) -> None:
        """``jobid`` created one regular file at ``now``."""
        self._creates[jobid] = self._creates.get(jobid, 0) + 1
        self._last[jobid] = now

    def job_stats(self, now: float) -> JobStats:
        """The MDT's table at ``now`` (jobs idle for ``cleanup_s`` dropped)."""
        out = JobStats()
        for jobid in list(self._creates):
            if now - self._last[jobid] >= self.cleanup_s:
                del self._creates[jobid], self._last[jobid]
                continue
            n = self._creates[jobid]
            out.jobs[jobid] = JobEntry(jobid=jobid, snapshot_time=now, counters={
                name: Counter(samples=n, unit="reqs") for name in ("open", "mknod")})
        return out
