"""Reader for ``lprocfs`` counter files: ``obdfilter.*.stats``, ``mdt.*.md_stats``, ``ost.OSS.*.stats``.

Real example (Lustre 2.10.1, ``/proc/fs/lustre/obdfilter/lustrefs-OST0000/stats``)::

    snapshot_time             1510782606.789180921 secs.nsecs
    write_bytes               4298711 samples [bytes] 4096 4194304 16552048697344
    punch                     57 samples [reqs]
    statfs                    35359 samples [reqs]

Real example (Lustre 2.14 DDN, ``lctl get_param obdfilter.ai400-OST0000.stats``)::

    snapshot_time             1688603042.554414847 secs.nsecs
    start_time                1688526475.271489350 secs.nsecs
    elapsed_time              76567.282925497 secs.nsecs
    write_bytes               25001 samples [bytes] 98304 4194304 104857600000 439803838556274688
    write                     25001 samples [usecs] 86 16684 41700926 74443748896

Columns: counter name; ``samples`` (events, cumulative); ``[unit]``; then optionally ``min max
sum`` (in ``unit``) and ``sumsq``. Format from ``lprocfs_stats_seq_show`` /
``lprocfs_stats_header`` (lustre/obdclass/lprocfs_status.c): the name is ``%-25s`` (35 on
master), ``start_time``/``elapsed_time`` appear from 2.15, counters with zero samples are not
printed. Units: ``[bytes]`` for read_bytes/write_bytes; ops are ``[reqs]`` up to 2.13 and
``[usecs]`` (service time) from 2.14.

Lines that match no known form are skipped and listed in :attr:`StatsSnapshot.skipped`; a
repeated counter name (2.10's obdfilter ``stats`` prints ``statfs`` twice, from two layers) keeps
the first value and lists the repeat as skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lustre_alloc.common.errors import StatsFileError
from lustre_alloc.collectors.readers._common import TIMESTAMP_RE, Counter, parse_timestamp, split_lines

_TIME_RE = re.compile(rf"^(snapshot_time|start_time|elapsed_time)\s+{TIMESTAMP_RE}\s+secs\.nsecs$", re.ASCII)
_COUNTER_RE = re.compile(
    r"^(?P<name>[A-Za-z_][\w.-]*)\s+(?P<samples>\d+)\s+samples\s+\[(?P<unit>[^\]\s]*)\]"
    r"(?:\s+(?P<min>\d+)\s+(?P<max>\d+)\s+(?P<sum>\d+)(?:\s+(?P<sumsq>\d+))?)?$", re.ASCII)


@dataclass(slots=True)
class StatsSnapshot:
    """A parsed counters file.

    Attributes:
        snapshot_time: when the kernel printed the file, seconds (wall clock, except monotonic on
            2.15.0/2.15.1: LU-16231); only differences between snapshots are used.
        start_time: 2.15+: when counting started (seconds), else ``None``.
        elapsed_time: 2.15+: seconds since ``start_time``, else ``None``.
        counters: name -> :class:`Counter`, in file order.
        skipped: ``(line number, reason)`` for lines that were not understood.
    """
    snapshot_time: float
    start_time: float | None = None
    elapsed_time: float | None = None
    counters: dict[str, Counter] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def parse_stats(text: str, source: str = "<text>") -> StatsSnapshot:
    """Parse the text of one counters file.

    Args:
        text: the file contents (or one parameter's value from ``lctl get_param``).
        source: path or parameter name, used in errors.

    Returns:
        The snapshot with every counter.

    Raises:
        StatsFileError: no ``snapshot_time`` line (the text is not a counters file).
    """
    times: dict[str, float] = {}
    counters: dict[str, Counter] = {}
    skipped: list[tuple[int, str]] = []
    for lineno, line in split_lines(text):
        if not line.strip():
            continue
        m = _TIME_RE.match(line)
        if m:
            if m.group(1) in times:
                skipped.append((lineno, f"repeated {m.group(1)}"))
            else:
                times[m.group(1)] = parse_timestamp(m.group(2), m.group(3))
            continue
        m = _COUNTER_RE.match(line)
        if m is None:
            skipped.append((lineno, "unrecognised line"))
            continue
        name = m.group("name")
        if name in counters:
            skipped.append((lineno, f"repeated counter {name}"))
            continue

        def opt(key: str) -> int | None:
            value = m.group(key)
            return None if value is None else int(value)

        counters[name] = Counter(int(m.group("samples")), m.group("unit"), opt("min"), opt("max"),
                                 opt("sum"), opt("sumsq"))
    if "snapshot_time" not in times:
        raise StatsFileError("no 'snapshot_time <sec>.<nsec> secs.nsecs' line", source=source,
                             field="snapshot_time")
    return StatsSnapshot(times["snapshot_time"], times.get("start_time"), times.get("elapsed_time"),
                         counters, skipped)
