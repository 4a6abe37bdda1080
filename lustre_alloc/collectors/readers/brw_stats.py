"""Reader for ``brw_stats``: per-OST (and per-MDT) block I/O histograms.

Location: ``/proc/fs/lustre/osd-{ldiskfs,zfs}/<target>/brw_stats`` up to 2.14,
``/sys/kernel/debug/lustre/osd-*/<target>/brw_stats`` from 2.15 (LU-14927); ``obdfilter/<target>/
brw_stats`` is a symlink to it. Real example (Lustre 2.10.1 on ZFS, ``osd-zfs/lustrefs-OST0000/
brw_stats``, abridged)::

    snapshot_time:         1510782606.797216394 (secs.nsecs)

                               read      |     write
    pages per bulk r/w     rpcs  % cum % |  rpcs        % cum %
    1:		        13  56  56   |  153   0   0
    1K:		         0   0 100   | 4059303  94 100

                               read      |     write
    I/O time (1/1000s)     ios   % cum % |  ios         % cum %
    1:		         1 100 100   |    0   0   0

                               read      |     write
    disk I/O size          ios   % cum % |  ios         % cum %
    8:		         4  17  17   |    0   0   0
    4M:		         0   0 100   | 4059303  94 100

2.15+ prints ``snapshot_time:``, ``start_time:`` and ``elapsed_time:`` as ``<sec.nsec> secs.nsecs``
(no parentheses). Each block: a title row, a header ``<name> <unit> % cum % | <unit> % cum %``,
then rows ``<bucket>: <read count> <read %> <read cum %> | <write count> <write %> <write cum %>``.
Buckets are powers of two printed with K/M/G suffixes (1K = 1024). Blocks: ``pages per bulk r/w``
(rpcs), ``discontiguous pages`` (rpcs), ``discontiguous blocks`` (rpcs), ``disk fragmented I/Os``
(ios), ``disk I/Os in flight`` (ios), ``I/O time (1/1000s)`` (ios), ``disk I/O size`` (ios), and on
master ``block maps msec`` (maps); osd-zfs omits some. Format from ``osd_brw_stats`` printing in
lustre/osd-ldiskfs/osd_lproc.c and ``lprocfs_oh_tally_log2`` (lustre/obdclass/lprocfs_status.c):
a value ``v`` is counted in the smallest bucket ``2**i >= v``, so a bucket label is the upper
bound of the values in it. Percent columns are ignored (they are derived).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lustre_alloc.common.errors import BrwStatsError
from lustre_alloc.collectors.readers._common import TIMESTAMP_RE, parse_timestamp, split_lines

_TIME_RE = re.compile(
    rf"^(snapshot_time|start_time|elapsed_time):\s+{TIMESTAMP_RE}\s+(?:\(secs\.nsecs\)|secs\.nsecs)$",
    re.ASCII)
_TITLE_RE = re.compile(r"^\s+read\s+\|\s+write$", re.ASCII)
_HEADER_RE = re.compile(
    r"^(?P<name>\S.*?)\s+(?P<unit>[A-Za-z]+)\s+%\s+cum\s+%\s+\|\s+(?P<wunit>[A-Za-z]+)\s+%\s+cum\s+%$",
    re.ASCII)
_ROW_RE = re.compile(
    r"^(?P<bucket>\d{1,20})(?P<scale>[KMG]?):\s+(?P<r>\d+)\s+\d+\s+\d+\s+\|\s+(?P<w>\d+)\s+\d+\s+\d+$",
    re.ASCII)
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

#: Block names the collector reduces (Section III-D: "I/O read/write time and sizes per OST").
IO_TIME = "I/O time (1/1000s)"
DISK_IO_SIZE = "disk I/O size"
DISK_IN_FLIGHT = "disk I/Os in flight"
"""Linear buckets (``display_brw_stats`` scale 0): each disk I/O is counted under the number
of I/Os in flight on the device when it was submitted, itself included (osd-ldiskfs
``record_start_io``); ``lprocfs_oh_tally`` puts 31 and above in bucket 31."""
IN_FLIGHT_BUCKETS = 32
# Master can print "disk I/Os in flight" in log2 buckets (``bs_inflight_io_log2``,
# lprocfs_status_server.c ``brw_stats_seq_show``): labels 1, 2, 4, ... like the size blocks.
"""Buckets of "disk I/Os in flight", 0..31 (``OBD_HIST_MAX``, lustre/include/lprocfs_status.h)."""


@dataclass(slots=True)
class Histogram:
    """One brw_stats block.

    Attributes:
        name: block title, e.g. ``I/O time (1/1000s)``.
        unit: what is counted: ``rpcs``, ``ios`` or ``maps``.
        buckets: bucket labels as integers (upper bounds; 1K -> 1024), ascending.
        read: count per bucket for reads, cumulative since start; same length as ``buckets``.
        write: the same for writes.
        log2_labels: "disk I/Os in flight" only: its labels are log2 bucket upper bounds
            (a label ``L`` holds values in ``(L/2, L]``), not the count itself.
    """
    name: str
    unit: str
    buckets: list[int] = field(default_factory=list)
    read: list[int] = field(default_factory=list)
    write: list[int] = field(default_factory=list)
    log2_labels: bool = False

    def in_flight_value(self, bucket: int) -> float:
        """The number of I/Os in flight a "disk I/Os in flight" bucket stands for: the label
        itself (at least 1), or for log2 labels the middle of ``(L/2, L]``."""
        if self.log2_labels and bucket >= 2:
            return 0.75 * bucket
        return float(max(bucket, 1))

    def as_dict(self, direction: str) -> dict[int, int]:
        """``{bucket: count}`` for ``direction`` ``"read"`` or ``"write"``."""
        return dict(zip(self.buckets, self.read if direction == "read" else self.write))


@dataclass(slots=True)
class BrwStats:
    """A parsed brw_stats file.

    Attributes:
        snapshot_time: seconds (see :class:`lustre_alloc.collectors.readers.stats_file.StatsSnapshot`).
        start_time, elapsed_time: 2.15+ only, seconds.
        histograms: block name -> :class:`Histogram`, in file order (blocks may be empty).
        skipped: ``(line number, reason)`` for lines not understood.
    """
    snapshot_time: float
    start_time: float | None = None
    elapsed_time: float | None = None
    histograms: dict[str, Histogram] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)


def _log2_labels(buckets: list[int]) -> bool:
    """Whether an in-flight block's labels are log2 buckets: linear ones are printed for every
    index from the first non-zero one (``display_brw_stats``), so a skipped integer between
    two labels, or a label past 31, means powers of two."""
    if any(b >= IN_FLIGHT_BUCKETS for b in buckets):
        return True
    return any(b > a + 1 for a, b in zip(buckets, buckets[1:]))


def parse_brw_stats(text: str, source: str = "<text>") -> BrwStats:
    """Parse the text of one brw_stats file.

    Args:
        text: file contents or one ``lctl get_param`` value.
        source: path or parameter name, used in errors.

    Returns:
        Every histogram block, with read and write counts per bucket.

    Raises:
        BrwStatsError: no ``snapshot_time:`` line.
    """
    times: dict[str, float] = {}
    histograms: dict[str, Histogram] = {}
    skipped: list[tuple[int, str]] = []
    current: Histogram | None = None
    expect_header = False
    for lineno, line in split_lines(text):
        if not line.strip():
            current = None
            continue
        m = _TIME_RE.match(line)
        if m:
            times.setdefault(m.group(1), parse_timestamp(m.group(2), m.group(3)))
            continue
        if _TITLE_RE.match(line):
            expect_header = True
            current = None
            continue
        if expect_header:
            expect_header = False
            m = _HEADER_RE.match(line)
            if m:
                name = m.group("name")
                if name in histograms:
                    skipped.append((lineno, f"repeated block {name}"))
                    continue
                current = Histogram(name, m.group("unit"))
                histograms[name] = current
                continue
            skipped.append((lineno, "block title without header"))
            continue
        m = _ROW_RE.match(line)
        if m and current is not None:
            bucket = int(m.group("bucket")) * _SCALE[m.group("scale")]
            if current.buckets and bucket <= current.buckets[-1]:
                skipped.append((lineno, f"bucket {bucket} out of order in {current.name}"))
                continue
            current.buckets.append(bucket)
            current.read.append(int(m.group("r")))
            current.write.append(int(m.group("w")))
            continue
        skipped.append((lineno, "row outside a block" if m else "unrecognised line"))
    flight = histograms.get(DISK_IN_FLIGHT)
    if flight is not None:
        flight.log2_labels = _log2_labels(flight.buckets)
    if "snapshot_time" not in times:
        raise BrwStatsError("no 'snapshot_time:' line", source=source, field="snapshot_time")
    return BrwStats(times["snapshot_time"], times.get("start_time"), times.get("elapsed_time"),
                    histograms, skipped)
