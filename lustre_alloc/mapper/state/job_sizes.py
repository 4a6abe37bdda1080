"""Bytes written per file created, per jobid, from Lustre's job_stats.

Two counters Lustre keeps per jobid, as the collectors reduce them (docs/protocol.md, "Jobs"):

* each OST's ``obdfilter.*.job_stats`` ``write_bytes``: the bytes the job wrote there
  (``write_bytes_per_s`` of an OST target's ``jobs`` rows);
* each MDT's ``mdt.*.job_stats`` ``mknod``: the regular files the job's ``open(O_CREAT)``
  created (``creates_per_s`` of an MDT target's rows; ``lustre/mdt/mdt_open.c``
  ``mdt_reint_open()``).

Their ratio over a window is what an average file of the job weighs when nothing better is
known: a create that announces no size, from a job whose chain has learned no size. The
window is Lustre's own memory of an idle job, ``job_cleanup_interval`` (600 s by default,
``lustre/obdclass/lprocfs_jobstats.c``): a job idle longer is forgotten by Lustre and here.

What it cannot see, and why it is a fallback: bytes written in the window to files created
before it (appends, long writes) count toward the window's creates; a collector publishes
only its targets' busiest jobs (``max_jobs``), so a job below that line on an OST or the MDT
is missing there; writes lag their creates, so the first interval of a burst understates.
"""
from __future__ import annotations

from collections import OrderedDict, deque

WINDOW_S = 600.0
"""Window of the sums, s: ``job_cleanup_interval``'s default (Lustre Operations Manual,
"Lustre Jobstats"; ``lustre/obdclass/lprocfs_jobstats.c``)."""
MIN_CREATES = 4.0
"""Fewest creates in the window for an estimate: a jobid with less history gives none."""
MAX_JOBS = 4096
"""Jobids kept; past it the one updated longest ago is dropped (bounded memory)."""


class JobBytesPerCreate:
    """Per jobid sums of bytes written and files created over the last ``window_s``.

    Times are the mapper's sample times, seconds; bytes and creates are the interval's
    totals (a rate of the collectors' rows times the sample interval).
    """

    def __init__(self, window_s: float = WINDOW_S, min_creates: float = MIN_CREATES,
                 max_jobs: int = MAX_JOBS):
        self.window_s = window_s
        self.min_creates = min_creates
        self.max_jobs = max_jobs
        # jobid -> (deque of (time s, bytes written), deque of (time s, files created))
        self._jobs: OrderedDict[str, tuple[deque, deque]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._jobs)

    def _entry(self, jobid: str) -> tuple[deque, deque]:
        got = self._jobs.get(jobid)
        if got is None:
            got = self._jobs[jobid] = (deque(), deque())
            if len(self._jobs) > self.max_jobs:
                self._jobs.popitem(last=False)
        else:
            self._jobs.move_to_end(jobid)
        return got

    def _trim(self, q: deque, now: float) -> None:
        while q and q[0][0] <= now - self.window_s:
            q.popleft()

    def add_writes(self, jobid: str, time_s: float, nbytes: float) -> None:
        """``nbytes`` written by ``jobid`` on one OST in the interval ending at ``time_s``."""
        if nbytes > 0:
            self._entry(jobid)[0].append((time_s, float(nbytes)))

    def add_creates(self, jobid: str, time_s: float, count: float) -> None:
        """``count`` files created by ``jobid`` on one MDT in the interval ending at ``time_s``."""
        if count > 0:
            self._entry(jobid)[1].append((time_s, float(count)))

    def bytes_per_create(self, jobid: str, now_s: float) -> float | None:
        """Bytes written over files created by ``jobid`` in the window ending at ``now_s``;
        None with fewer than ``min_creates`` creates or no bytes."""
        got = self._jobs.get(jobid)
        if got is None:
            return None
        writes, creates = got
        self._trim(writes, now_s)
        self._trim(creates, now_s)
        if not writes and not creates:
            del self._jobs[jobid]
            return None
        n = sum(c for _, c in creates)
        b = sum(w for _, w in writes)
        if n < self.min_creates or b <= 0:
            return None
        return b / n

    def absorb_rows(self, rows: object, time_s: float, interval_s: float) -> None:
        """Fold one target's ``jobs`` rows (collector schema 1): an OST's
        ``write_bytes_per_s``, an MDT's ``creates_per_s``, each times ``interval_s``.
        Rows that are not maps, or whose fields are not numbers, are skipped."""
        if not isinstance(rows, list):
            return
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get("job_id"), str):
                continue
            jobid = row["job_id"]
            wb, cr = row.get("write_bytes_per_s"), row.get("creates_per_s")
            if _number(wb):
                self.add_writes(jobid, time_s, wb * interval_s)
            if _number(cr):
                self.add_creates(jobid, time_s, cr * interval_s)


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and x > 0
