"""The lustre-alloc trace format (version 1): reader, writer and validation.

A trace is a CSV file (optionally gzip-compressed, ``.gz``) whose first line is the
magic comment ``# lustre-alloc trace v1`` and whose second line is the header::

    timestamp_s,op,job_id,file_id,bytes,stripe_count,stripe_size,ost,ops
    0.000,write,ior.4242,ior/0/f000000,67108864,4,1048576,,64
    31.500,read,tpa.7,tpa/db/0007,8192,,,,2
    45.000,read,hacc.11,,4194304,,,17,1
    3600.0,delete,ior.4242,ior/0/f000000,,,,,

It carries what the paper's traces carry (Paul et al. 2017, Section IV-A3: write
entries with timestamp, bytes and stripe count; read entries with timestamp, bytes and
an OST id) plus the application (job id), the file and deletes. Columns:

``timestamp_s``  seconds since the trace start (float >= 0, non-decreasing).
``op``           ``write``, ``read`` or ``delete``. The first ``write`` of a file id
                 creates that file (one MDS create, the allocation decision).
``job_id``       application identity, as Lustre's ``jobid_var``/``jobid_name`` gives it.
``file_id``      opaque file name; required for ``write`` and ``delete``, optional for a
                 ``read`` that names an ``ost`` instead.
``bytes``        bytes written or read by the record (int >= 0); empty for ``delete``.
``stripe_count`` requested stripe count (int >= 1; Lustre's ``-1`` = all OSTs) for a
                 ``write``; empty otherwise (0 or empty on a write = default of 1).
``stripe_size``  bytes (int, multiple of 64 KiB); empty = 1 MiB (Lustre's default).
``ost``          OST index a ``read`` is served from (the paper's read entries); empty
                 when the read names a ``file_id``.
``ops``          POSIX operations the record stands for (int >= 1, default 1): one record
                 may aggregate consecutive same-file operations of one second so that a
                 trace at 20,000 operations/s stays small.

A ``job_id`` or ``file_id`` holding ``,`` or ``"`` is CSV-quoted (``a,"b`` is written
``"a,""b"``); one physical line is one row, so ids cannot hold line breaks.

Lines starting with ``#`` after the magic line and blank lines are ignored. A bad
line raises :class:`TraceFormatError` formatted ``file:line: field: reason``.
"""
from __future__ import annotations

import csv
import gzip
import heapq
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Iterator, NamedTuple

from lustre_alloc.common.lustre import DEFAULT_STRIPE_SIZE_BYTES, LOV_MAX_STRIPE_COUNT, STRIPE_SIZE_UNIT_BYTES

MAGIC = "# lustre-alloc trace v1"
COLUMNS = ("timestamp_s", "op", "job_id", "file_id", "bytes", "stripe_count",
           "stripe_size", "ost", "ops")
OPS = ("write", "read", "delete")


class TraceRecord(NamedTuple):
    """One trace entry. Units: seconds, bytes. ``ost`` is None unless a read names it."""
    timestamp_s: float
    op: str
    jobid: str
    file_id: str
    bytes: int
    stripe_count: int
    stripe_size: int
    ost: int | None
    ops: int


class TraceFormatError(ValueError):
    """A malformed trace line. ``str()`` is ``file:line: field: reason``."""

    def __init__(self, path: str, line: int, field: str, reason: str):
        self.path, self.line, self.field, self.reason = str(path), line, field, reason
        super().__init__(f"{self.path}:{line}: {field}: {reason}")


@dataclass(frozen=True)
class TraceSummary:
    """What :func:`validate_trace` learned from a whole trace."""
    path: str
    records: int
    writes: int
    reads: int
    deletes: int
    bytes_written: int
    bytes_read: int
    first_s: float
    last_s: float
    jobs: frozenset[str]


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, mode + "b"), encoding="utf-8", newline="")
    return open(path, mode, encoding="utf-8", newline="")


def _int_field(raw: str, path: str, line: int, field: str, *, default: int | None,
               minimum: int) -> int | None:
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TraceFormatError(path, line, field, f"not an integer: {raw!r}") from None
    if value < minimum:
        raise TraceFormatError(path, line, field, f"must be >= {minimum}, got {value}")
    return value


def _parse_row(row: list[str], path: str, line: int, last_ts: float) -> TraceRecord:
    if len(row) != len(COLUMNS):
        raise TraceFormatError(path, line, "row",
                               f"expected {len(COLUMNS)} fields, got {len(row)}")
    ts_raw, op, jobid, file_id, b_raw, sc_raw, ss_raw, ost_raw, ops_raw = row
    try:
        ts = float(ts_raw)
    except ValueError:
        raise TraceFormatError(path, line, "timestamp_s", f"not a number: {ts_raw!r}") from None
    if not math.isfinite(ts) or ts < 0:
        raise TraceFormatError(path, line, "timestamp_s", f"must be finite and >= 0, got {ts_raw}")
    if ts < last_ts:
        raise TraceFormatError(path, line, "timestamp_s",
                               f"goes backwards ({ts} < previous {last_ts})")
    if op not in OPS:
        raise TraceFormatError(path, line, "op", f"unknown op {op!r} (expected one of {', '.join(OPS)})")
    if not jobid:
        raise TraceFormatError(path, line, "job_id", "empty")
    ops = _int_field(ops_raw, path, line, "ops", default=1, minimum=1)
    if op == "delete":
        if not file_id:
            raise TraceFormatError(path, line, "file_id", "a delete needs a file_id")
        return TraceRecord(ts, op, jobid, file_id, 0, 0, 0, None, ops)
    nbytes = _int_field(b_raw, path, line, "bytes", default=None, minimum=0)
    if nbytes is None:
        raise TraceFormatError(path, line, "bytes", f"a {op} needs bytes")
    if op == "read":
        ost = _int_field(ost_raw, path, line, "ost", default=None, minimum=0)
        if not file_id and ost is None:
            raise TraceFormatError(path, line, "file_id", "a read needs a file_id or an ost")
        return TraceRecord(ts, op, jobid, file_id, nbytes, 0, 0, ost, ops)
    # write
    if not file_id:
        raise TraceFormatError(path, line, "file_id", "a write needs a file_id")
    if ost_raw:
        raise TraceFormatError(path, line, "ost", "a write cannot name an OST (the policy chooses)")
    stripe_count = _int_field(sc_raw, path, line, "stripe_count", default=1, minimum=-1)
    if stripe_count == 0:
        stripe_count = 1
    if stripe_count > LOV_MAX_STRIPE_COUNT:
        raise TraceFormatError(path, line, "stripe_count",
                               f"{stripe_count} exceeds LOV_MAX_STRIPE_COUNT {LOV_MAX_STRIPE_COUNT}")
    stripe_size = _int_field(ss_raw, path, line, "stripe_size",
                             default=DEFAULT_STRIPE_SIZE_BYTES, minimum=STRIPE_SIZE_UNIT_BYTES)
    if stripe_size % STRIPE_SIZE_UNIT_BYTES:
        raise TraceFormatError(path, line, "stripe_size",
                               f"{stripe_size} is not a multiple of 64 KiB")
    return TraceRecord(ts, op, jobid, file_id, nbytes, stripe_count, stripe_size, None, ops)


def read_trace(path: str | Path) -> Iterator[TraceRecord]:
    """Stream the records of a trace file, validating each line.

    Raises:
        FileNotFoundError: the file does not exist.
        TraceFormatError: a missing magic/header or a malformed line
            (``file:line: field: reason``); records before it were already yielded,
            use :func:`load_trace` or :func:`validate_trace` for all-or-nothing.
    """
    for _, rec in read_trace_lines(path):
        yield rec


def read_trace_lines(path: str | Path) -> Iterator[tuple[int, TraceRecord]]:
    """As :func:`read_trace`, yielding ``(line number, record)`` pairs."""
    path = Path(path)
    name = str(path)
    with _open_text(path, "r") as fh:
        first = fh.readline()
        if first.rstrip("\r\n") != MAGIC:
            raise TraceFormatError(name, 1, "magic", f"expected {MAGIC!r}, got {first[:40].rstrip()!r}")
        line_no = 1
        last_ts = 0.0
        header_seen = False
        # One physical line is one row: a comment may hold any text (quotes, commas),
        # and a record's fields are quoted CSV only when they contain , or ".
        for line_no, line in enumerate(fh, start=2):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            row = next(csv.reader([line])) if '"' in line else line.split(",")
            if not header_seen:
                if tuple(c.strip() for c in row) != COLUMNS:
                    raise TraceFormatError(name, line_no, "header",
                                           f"expected {','.join(COLUMNS)}")
                header_seen = True
                continue
            rec = _parse_row(row, name, line_no, last_ts)
            last_ts = rec.timestamp_s
            yield line_no, rec
        if not header_seen:
            raise TraceFormatError(name, line_no, "header", "missing")


def load_trace(path: str | Path) -> list[TraceRecord]:
    """Read a whole trace into memory: every record, or an exception and nothing."""
    return list(read_trace(path))


def validate_trace(path: str | Path) -> TraceSummary:
    """Stream through a trace once, checking every line, and summarise it.

    Also checks file life cycles: a ``delete`` or a ``read`` of a ``file_id`` that was
    never written in this trace is an error.

    Raises:
        TraceFormatError: as :func:`read_trace`, or for a file life-cycle error.
    """
    name = str(path)
    n = writes = reads = deletes = bw = br = 0
    first = last = 0.0
    jobs: set[str] = set()
    live: set[str] = set()
    for line, rec in read_trace_lines(path):
        if n == 0:
            first = rec.timestamp_s
        n += 1
        last = rec.timestamp_s
        jobs.add(rec.jobid)
        if rec.op == "write":
            writes += 1
            bw += rec.bytes
            live.add(rec.file_id)
        elif rec.op == "read":
            reads += 1
            br += rec.bytes
            if rec.file_id and rec.file_id not in live:
                raise TraceFormatError(name, line, "file_id",
                                       f"read of {rec.file_id!r} before it is written")
        else:
            deletes += 1
            if rec.file_id not in live:
                raise TraceFormatError(name, line, "file_id",
                                       f"delete of {rec.file_id!r} that does not exist")
            live.discard(rec.file_id)
    return TraceSummary(name, n, writes, reads, deletes, bw, br, first, last, frozenset(jobs))


def write_trace(path: str | Path, records: Iterable[TraceRecord],
                comments: Iterable[str] = ()) -> int:
    """Write records as a v1 trace (gzip if the name ends in ``.gz``); returns the count.

    ``comments`` are written as ``# ...`` lines after the magic line (provenance:
    generator name, seed, parameters).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with _open_text(path, "w") as fh:
        fh.write(MAGIC + "\n")
        for c in comments:
            for part in str(c).splitlines() or [""]:
                fh.write(f"# {part}\n")
        fh.write(",".join(COLUMNS) + "\n")
        for r in records:
            fh.write(format_record(r))
            count += 1
    return count


def _text_field(value: str, field: str) -> str:
    """A job_id/file_id as a CSV field: quoted (``"`` doubled) if it holds ``,`` or ``"``."""
    if "\n" in value or "\r" in value:
        raise ValueError(f"{field}: a line break cannot be written in a trace: {value!r}")
    if "," in value or '"' in value:
        return '"' + value.replace('"', '""') + '"'
    return value


def format_record(r: TraceRecord) -> str:
    """One CSV line (with newline) for a record, the inverse of the reader.

    Raises:
        ValueError: a job_id or file_id holds a line break.
    """
    job = _text_field(r.jobid, "job_id")
    fid = _text_field(r.file_id, "file_id")
    if r.op == "delete":
        return f"{r.timestamp_s:.6f},delete,{job},{fid},,,,,{r.ops}\n"
    if r.op == "read":
        ost = "" if r.ost is None else str(r.ost)
        return f"{r.timestamp_s:.6f},read,{job},{fid},{r.bytes},,,{ost},{r.ops}\n"
    return (f"{r.timestamp_s:.6f},write,{job},{fid},{r.bytes},"
            f"{r.stripe_count},{r.stripe_size},,{r.ops}\n")


def merge_traces(streams: Iterable[Iterable[TraceRecord]]) -> Iterator[TraceRecord]:
    """Merge several time-ordered record streams into one, by timestamp (stable)."""
    return heapq.merge(*streams, key=lambda r: r.timestamp_s)
