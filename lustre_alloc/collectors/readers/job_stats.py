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

Release forms besides that one: 2.15.0 and 2.15.1 print the three times of each job unindented
and padded before the colon (``lprocfs_stats_header(p, ..., 16, ":", true)`` called inside a list
item; ``snapshot_time   : 1322494486.123456789 secs.nsecs``), which is not YAML: such a line is
indented into its job before parsing (fixed upstream by LU-16110).  From 2.17 an empty table
prints nothing at all, not even ``job_stats:`` (the header is printed by the first job's
``lprocfs_jobstats_seq_show``, ``OJS_HEADER``): empty text is a table with no job.

The file is YAML and is read with PyYAML (:mod:`lustre_alloc.collectors.readers._yaml`, every scalar a string so
``job_id: 24`` stays ``"24"``): quoted ids, document markers, flow or block style and extra keys
all work. A job id Lustre printed unquoted with YAML syntax in it (``jobid_name`` allows any
character before master quoted them) makes the text malformed YAML: the whole file is rejected
with one line naming the line, as for any other garbled file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from lustre_alloc.common.errors import JobStatsError
from lustre_alloc.collectors.readers._common import Counter
from lustre_alloc.collectors.readers._yaml import compose, line_of, mapping_items, plain

_TIME_RE = re.compile(r"^(\d{1,20})(?:\.(\d{1,9}))?(?:\s+secs\.nsecs)?$", re.ASCII)
_TIME_KEYS = ("snapshot_time", "start_time", "elapsed_time")
_COUNT_RE = re.compile(r"^\d{1,20}$", re.ASCII)
_COUNTER_FIELDS = ("min", "max", "sum", "sumsq")
# 2.15.0/2.15.1: "snapshot_time   : <t> secs.nsecs" at column 0 inside a job's list item
_UNINDENTED_TIME_RE = re.compile(r"^(snapshot_time|start_time|elapsed_time)\s*:", re.ASCII | re.M)


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
    jobid: str
    snapshot_time: float | None = None
    start_time: float | None = None
    elapsed_time: float | None = None
    counters: dict[str, Counter] = field(default_factory=dict)


@dataclass(slots=True)
class JobStats:
    """A parsed job_stats file: ``jobs`` by id, and lines skipped with reasons."""
    jobs: dict[str, JobEntry] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def parse_job_stats(text: str, source: str = "<text>") -> JobStats:
    """Parse the text of one job_stats file.

    Args:
        text: file contents or one ``lctl get_param`` value.
        source: path or parameter name, used in errors.

    Returns:
        Jobs with their counters (an empty table, or empty text, is valid); entries that are not a job, a
        repeated job, and fields that are not a time or a counter are in ``skipped`` with their
        line and reason.

    Raises:
        JobStatsError: malformed YAML (one line: source, line, PyYAML's reason), or the top is
            not a ``job_stats:`` mapping.
    """
    if not text.strip():
        return JobStats()  # 2.17: an empty table prints nothing
    text = _UNINDENTED_TIME_RE.sub(r"  \1:", text)
    root = compose(text, source, JobStatsError)
    if root is None:
        raise JobStatsError("no document, expected 'job_stats:'", source=source)
    top = dict(mapping_items(root))
    if "job_stats" not in top:
        raise JobStatsError("first line is not 'job_stats:'", source=source, line=line_of(root))
    table = top["job_stats"]
    result = JobStats()
    if isinstance(table, ScalarNode) and table.value == "":
        return result  # "job_stats:" with no job
    if not isinstance(table, SequenceNode):
        raise JobStatsError("expected a list of jobs under 'job_stats:'", source=source,
                            line=line_of(table), field="job_stats")
    for entry in table.value:
        fields = dict(mapping_items(entry))
        job_node = fields.get("job_id")
        if not isinstance(job_node, ScalarNode):
            result.skipped.append((line_of(entry), "entry without a job_id"))
            continue
        jobid = job_node.value
        if jobid in result.jobs:
            result.skipped.append((line_of(entry), f"repeated job {jobid!r}"))
            continue
        job = result.jobs[jobid] = JobEntry(jobid)
        for name, node in mapping_items(entry):
            if name == "job_id":
                continue
            reason = _read_field(job, name, node)
            if reason:
                result.skipped.append((line_of(node), f"{name}: {reason}"))
    return result


def _read_field(job: JobEntry, name: str, node) -> str | None:
    """Store one job field; the reason it was not understood, or ``None``."""
    if name in _TIME_KEYS:
        m = _TIME_RE.match(node.value) if isinstance(node, ScalarNode) else None
        if not m:
            return "expected <seconds>[.<nsec>] [secs.nsecs]"
        setattr(job, name, int(m.group(1)) + (int(m.group(2).ljust(9, "0")) / 1e9
                                              if m.group(2) else 0.0))
        return None
    if not isinstance(node, MappingNode):
        return "unrecognised field"
    values = plain(node)
    samples, unit = values.get("samples"), values.get("unit")
    if not (isinstance(samples, str) and _COUNT_RE.match(samples) and isinstance(unit, str)
            and unit):
        return "a counter needs 'samples: <count>' and 'unit: <name>'"
    extra = {}
    for key in _COUNTER_FIELDS:
        raw = values.get(key)
        if raw is None:
            extra[key] = None
        elif isinstance(raw, str) and _COUNT_RE.match(raw):
            extra[key] = int(raw)
        else:
            return f"{key} is not a count: {raw!r}"
    job.counters[name] = Counter(int(samples), unit, **extra)
    return None
