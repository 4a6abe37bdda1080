"""Reader for ``obdfilter.*.job_stats`` and ``mdt.*.job_stats`` (per-job counters, YAML).

Real example (Lustre 2.10.1, ``/proc/fs/lustre/obdfilter/lustrefs-OST0000/job_stats``, abridged)::

    job_stats:
    - job_id:          24
      snapshot_time:   1510782606
      read_bytes:      { samples:           0, unit: bytes, min:       0, max:       0, sum:               0 }
      write_bytes:     { samples:       64575, unit: bytes, min:    4096, max: 4194304, sum:    215147593728 }
      punch:           { samples:           1, unit:  reqs }

Real example of an empty one (Lustre 2.14 DDN, ``lctl get_param``)::

    obdfilter.ai400x2-OST0000.job_stats=job_stats:

Per job: ``job_id`` (``jobid_var``/``jobid_name`` expansion; quoted on master when it holds odd
characters), ``snapshot_time`` (integer seconds up to 2.14; ``<sec.nsec> secs.nsecs`` from 2.15,
with ``start_time`` and ``elapsed_time``), then one line per counter
``<name>: { samples: N, unit: U[, min: N, max: N, sum: N][, sumsq: N][, hist: {...}] }``
(``lprocfs_jobstats_seq_show``, lustre/obdclass/lprocfs_jobstats.c; ``hist`` from 2.16, LU-16087).
Counter values are cumulative while the job stays in the table; a job idle for
``job_cleanup_interval`` (600 s default) is dropped and restarts from zero if it comes back.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from common.errors import JobStatsError
from collectors.readers._common import Counter, split_lines

_HEAD_RE = re.compile(r"^job_stats:\s*$", re.ASCII)
_JOB_RE = re.compile(r"^-\s+job_id:\s*(?P<id>.*?)\s*$", re.ASCII)
_TIME_RE = re.compile(
    r"^\s+(snapshot_time|start_time|elapsed_time):\s+(\d{1,20})(?:\.(\d{1,9}))?(?:\s+secs\.nsecs)?$",
    re.ASCII)
_COUNTER_RE = re.compile(
    r"^\s+(?P<name>[A-Za-z_]\w*):\s+\{\s*samples:\s*(?P<samples>\d+),\s*unit:\s*(?P<unit>\w+)"
    r"(?:,\s*min:\s*(?P<min>\d+),\s*max:\s*(?P<max>\d+),\s*sum:\s*(?P<sum>\d+))?"
    r"(?:,\s*sumsq:\s*(?P<sumsq>\d+))?(?:,\s*hist:\s*\{[^{}]*\})?\s*\}$", re.ASCII)


@dataclass(slots=True)
class JobEntry:
    """One job's counters on one target.

    Attributes:
        job_id: the job identifier, unquoted.
        snapshot_time: seconds (integer before 2.15), ``None`` if absent.
        start_time, elapsed_time: 2.15+ only, seconds.
        counters: name -> :class:`Counter` (``read_bytes``/``write_bytes`` in bytes, ops in
            ``reqs`` or ``usecs``).
    """
    job_id: str
    snapshot_time: float | None = None
    start_time: float | None = None
    elapsed_time: float | None = None
    counters: dict[str, Counter] = field(default_factory=dict)


@dataclass(slots=True)
class JobStats:
    """A parsed job_stats file: ``jobs`` by id, and lines skipped with reasons."""
    jobs: dict[str, JobEntry] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def _unquote(job_id: str) -> str:
    if len(job_id) >= 2 and job_id[0] == job_id[-1] and job_id[0] in "\"'":
        return job_id[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return job_id


def parse_job_stats(text: str, source: str = "<text>") -> JobStats:
    """Parse the text of one job_stats file.

    Args:
        text: file contents or one ``lctl get_param`` value.
        source: path or parameter name, used in errors.

    Returns:
        Jobs with their counters (an empty table is valid).

    Raises:
        JobStatsError: the first non-blank line is not ``job_stats:``.
    """
    result = JobStats()
    job: JobEntry | None = None
    seen_head = False
    for lineno, line in split_lines(text):
        if not line.strip():
            continue
        if not seen_head:
            if not _HEAD_RE.match(line):
                raise JobStatsError("first line is not 'job_stats:'", source=source, line=lineno)
            seen_head = True
            continue
        m = _JOB_RE.match(line)
        if m:
            job_id = _unquote(m.group("id"))
            if job_id in result.jobs:
                result.skipped.append((lineno, f"repeated job {job_id!r}"))
                job = None
            else:
                job = result.jobs[job_id] = JobEntry(job_id)
            continue
        if job is None:
            result.skipped.append((lineno, "line outside a job"))
            continue
        m = _TIME_RE.match(line)
        if m:
            value = int(m.group(2)) + (int(m.group(3).ljust(9, "0")) / 1e9 if m.group(3) else 0.0)
            setattr(job, m.group(1), value)
            continue
        m = _COUNTER_RE.match(line)
        if m:
            name, samples, unit, *rest = m.groups()
            job.counters[name] = Counter(int(samples), unit,
                                         *(None if v is None else int(v) for v in rest))
            continue
        result.skipped.append((lineno, "unrecognised line"))
    if not seen_head:
        raise JobStatsError("empty text, expected 'job_stats:'", source=source)
    return result
