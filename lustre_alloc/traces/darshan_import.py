"""Darshan logs to lustre-alloc traces, through PyDarshan.

A Darshan log (``*.darshan``) holds, per module, one record per (file, rank); a rank of
-1 is a file shared by all ranks, reduced into one record. What this importer takes:

``DXT_POSIX``  per-operation segments of each (rank, file): ``offset``, ``length``
               (bytes), ``start_time``/``end_time`` (seconds since job start), e.g.
               ``{'offset': 2048, 'length': 262144, 'start_time': 0.02997, 'end_time': 0.03310}``.
               When a file has DXT data, its records come from here: one trace record per
               run of same-op segments within ``aggregate_s`` seconds (``ops`` = segments).
``POSIX``      counters of files without DXT data: ``POSIX_WRITES``/``POSIX_READS``
               (operations), ``POSIX_BYTES_WRITTEN``/``POSIX_BYTES_READ`` (bytes) and the
               times ``POSIX_F_WRITE_START_TIMESTAMP``/``POSIX_F_READ_START_TIMESTAMP``
               (seconds since job start, falling back to ``POSIX_F_OPEN_START_TIMESTAMP``):
               one write record and one read record per file.
``LUSTRE``     each file's layout: ``LUSTRE_COMP_STRIPE_SIZE`` (bytes),
               ``LUSTRE_COMP_STRIPE_COUNT`` and the OST ids of its objects (PyDarshan
               3.5 presents older logs' ``LUSTRE_STRIPE_SIZE``/``LUSTRE_STRIPE_WIDTH`` in
               this component form too). Writes carry the first component's stripe size
               and count; a file without a LUSTRE record gets the defaults.
``MPI-IO``     only counted in the notes (``MPIIO_BYTES_WRITTEN``): its bytes reach the
               file system through the POSIX layer, which is what is imported.
job            ``<exe basename>.<jobid>`` from the log's job header and ``exe`` line.

Darshan records no unlink, so an imported trace has no deletes. A read of a file that
the log never wrote (it existed before the job) becomes a read naming an OST when the
LUSTRE record gives the file's OSTs (the paper's read entries, Section IV-A3), its
bytes split evenly over them; without a layout it is skipped and counted in the notes.
A log without some module still imports; :attr:`DarshanImport.notes` says what was
missing or skipped.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from lustre_alloc.common.lustre import DEFAULT_STRIPE_SIZE_BYTES, STRIPE_SIZE_UNIT_BYTES
from lustre_alloc.traces.format import TraceRecord


class DarshanImportError(RuntimeError):
    """A Darshan log that cannot be opened or read; the message names the file."""


class DarshanLogNotFound(FileNotFoundError):
    """No shipped example log of that name; the message lists the available ones."""


@dataclass(frozen=True)
class LustreLayout:
    """A file's Lustre layout from the Darshan LUSTRE module.

    ``stripe_size`` in bytes; ``ost_ids`` are the OST indices of the file's objects, in
    layout order, over all components.
    """
    file: str
    stripe_size: int
    stripe_count: int
    ost_ids: tuple[int, ...]
    pool_name: str = ""


@dataclass
class DarshanImport:
    """The result of :func:`import_darshan`.

    ``records`` are time ordered (seconds since job start); ``layouts`` is keyed by file
    path; ``notes`` says which modules were used, missing or skipped.
    """
    path: str
    jobid: str
    records: list[TraceRecord]
    layouts: dict[str, LustreLayout]
    notes: list[str] = field(default_factory=list)


def shipped_logs() -> dict[str, Path]:
    """The example ``*.darshan`` logs PyDarshan ships (and the ``darshan-logs`` package, if
    installed), by name, each resolved with ``darshan.log_utils.get_log_path``.

    PyDarshan has no public listing; the names come from its package resources
    (``importlib.resources``), the paths from its own lookup.
    """
    from importlib import resources

    names: set[str] = set()
    for project in ("darshan", "darshan_logs"):
        try:
            names.update(p.name for p in resources.files(project).rglob("*.darshan"))
        except ModuleNotFoundError:
            continue
    found: dict[str, Path] = {}
    for name in sorted(names):
        path = _get_log_path(name)
        if path is not None:
            found[name] = path
    return found


def _get_log_path(name: str) -> Path | None:
    """``darshan.log_utils.get_log_path(name)``, or ``None`` when PyDarshan does not have it."""
    from darshan.log_utils import get_log_path  # local: importing PyDarshan loads its C library

    try:
        return Path(get_log_path(name))
    except FileNotFoundError:
        return None
    except BaseException as e:
        # Under pytest, PyDarshan calls pytest.skip() for a missing log; a missing log is an
        # error here (DarshanLogNotFound), never a silently skipped test.
        if type(e).__name__ == "Skipped":
            return None
        raise


def example_log_path(name: str) -> Path:
    """Path of a shipped example log, by file name (``.darshan`` optional), found with
    ``darshan.log_utils.get_log_path``.

    Raises:
        DarshanLogNotFound: no such log; the message lists the available names.
    """
    key = name if name.endswith(".darshan") else name + ".darshan"
    path = _get_log_path(key)
    if path is not None:
        return path
    available = ", ".join(sorted(shipped_logs())) or "none (PyDarshan ships no example logs here)"
    raise DarshanLogNotFound(f"{name}: no shipped Darshan log of that name; available: {available}")


def resolve_log(path_or_name: str | Path) -> Path:
    """A log path as given if it exists, else a shipped example log of that name."""
    p = Path(path_or_name)
    if p.is_file():
        return p
    if p.parent == Path(".") or str(p) == p.name:
        return example_log_path(p.name)
    raise FileNotFoundError(f"{p}: no such Darshan log")


def open_report(path: str | Path) -> Any:
    """Open a log with ``darshan.DarshanReport(path, read_all=True)``.

    Raises:
        FileNotFoundError: no such file.
        DarshanImportError: PyDarshan cannot read it (not a Darshan log, truncated).
    """
    import darshan

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such Darshan log")
    with open(p, "rb") as fh:
        head = fh.read(8)
    # a Darshan 3 log opens with its version string, e.g. b"3.21\0\0\0\0" (darshan-log-format.h);
    # checking it first keeps the C library from printing its own errors on a stray file
    if not head.startswith(b"3."):
        raise DarshanImportError(f"{p}: not a Darshan 3 log (starts with {head[:8]!r})")
    try:
        return darshan.DarshanReport(str(p), read_all=True)
    except RuntimeError as exc:
        raise DarshanImportError(f"{p}: not a readable Darshan log ({exc})") from None


@contextmanager
def _opened(src: str | Path | Any) -> Iterator[Any]:
    """The report of ``src`` (a path, or an open ``DarshanReport`` used as is).

    A report opened here is closed on exit: left to the garbage collector, PyDarshan's
    ``__del__`` takes cffi's non-reentrant lock and deadlocks when a collection happens to run
    while that lock is held (seen under pytest: a test hung until its timeout).
    """
    if not isinstance(src, (str, Path)):
        yield src
        return
    report = open_report(src)
    try:
        yield report
    finally:
        report._cleanup()  # what DarshanReport.__exit__ calls


def darshan_jobid(report: Any) -> str:
    """``<exe basename>.<jobid>``, e.g. ``ior.6909118``; ``darshan.<jobid>`` if exe is empty."""
    exe = str(report.metadata.get("exe", "") or "").split()
    name = os.path.basename(exe[0]) if exe else ""
    jobid = report.metadata.get("job", {}).get("jobid", 0)
    return f"{name or 'darshan'}.{jobid}"


def _records(report: Any, module: str) -> list[dict]:
    """The raw record dicts of a module ([] if absent), via the public ``to_numpy``."""
    if module not in report.records:
        return []
    return list(report.records[module].to_numpy())


def lustre_layouts(src: str | Path | Any) -> dict[str, LustreLayout]:
    """Per-file Lustre layouts of a log's LUSTRE module, keyed by file path.

    Args:
        src: a log path or an open ``DarshanReport``.

    Returns:
        ``{path: LustreLayout}``; empty when the log has no LUSTRE module.
    """
    with _opened(src) as report:
        return _lustre_layouts(report)


def _lustre_layouts(report: Any) -> dict[str, LustreLayout]:
    names = report.name_records
    cols = report.counters.get("LUSTRE", {}).get("counters", []) if hasattr(report, "counters") else []
    out: dict[str, LustreLayout] = {}
    for rec in _records(report, "LUSTRE"):
        fname = names.get(rec["id"], str(rec["id"]))
        comps = rec.get("components")
        if comps:  # PyDarshan >= 3.4.5: per-component counters
            first = dict(zip(cols, (int(v) for v in comps[0]["counters"])))
            size = first.get("LUSTRE_COMP_STRIPE_SIZE", -1)
            count = first.get("LUSTRE_COMP_STRIPE_COUNT", -1)
            osts = tuple(int(o) for c in comps for o in c["ost_ids"])
            pool = str(comps[0].get("pool_name", "") or "")
        else:  # older flat form
            flat = dict(zip(cols, (int(v) for v in rec["counters"])))
            size = flat.get("LUSTRE_STRIPE_SIZE", -1)
            count = flat.get("LUSTRE_STRIPE_WIDTH", -1)
            osts = tuple(int(o) for o in rec.get("ost_ids", ()))
            pool = ""
        if count <= 0:
            count = len(osts) or 1
        out[fname] = LustreLayout(fname, int(size), int(count), osts, pool)
    return out


def ost_write_time_ratios(src: str | Path | Any) -> dict[int, float]:
    """Per OST, the mean POSIX write time (``POSIX_F_WRITE_TIME``) of the log's files striped
    on that OST alone, over the median of those means: 1 for a typical OST, ``r`` for one
    whose files took ``r`` times as long to write (a straggler; the job waited for it).
    Files with more than one stripe, or without a LUSTRE record, are left out.

    Returns:
        ``{OST index: ratio}``; empty when the log has no single-stripe Lustre files.
    """
    with _opened(src) as report:
        layouts = _lustre_layouts(report)
        names = report.name_records
        per_ost: dict[int, list[float]] = {}
        for rec in _records(report, "POSIX"):
            layout = layouts.get(names.get(rec["id"], ""))
            if layout is None or len(layout.ost_ids) != 1:
                continue
            wt = float(dict(zip(report.counters["POSIX"]["fcounters"], rec["fcounters"]))
                       ["POSIX_F_WRITE_TIME"])
            per_ost.setdefault(layout.ost_ids[0], []).append(wt)
    means = {o: sum(v) / len(v) for o, v in per_ost.items()}
    if not means:
        return {}
    ordered = sorted(means.values())
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {o: m / median for o, m in sorted(means.items())}


def file_write_times(src: str | Path | Any) -> dict[str, tuple[float, int]]:
    """Per file the log wrote to: its POSIX write time (``POSIX_F_WRITE_TIME``, seconds the
    rank spent in write calls) and its bytes written (``POSIX_BYTES_WRITTEN``), keyed by path.
    A shared file's record sums its ranks' times (Darshan's reduction), so a log of one
    shared file says little per file.

    Returns:
        ``{path: (write time s, bytes)}``; empty when the log has no POSIX module.
    """
    with _opened(src) as report:
        if "POSIX" not in report.records:
            return {}
        names = report.name_records
        fcols, cols = report.counters["POSIX"]["fcounters"], report.counters["POSIX"]["counters"]
        out: dict[str, tuple[float, int]] = {}
        for rec in _records(report, "POSIX"):
            written = int(dict(zip(cols, rec["counters"]))["POSIX_BYTES_WRITTEN"])
            if written > 0:
                t = float(dict(zip(fcols, rec["fcounters"]))["POSIX_F_WRITE_TIME"])
                out[names.get(rec["id"], str(rec["id"]))] = (t, written)
    return out


def dxt_write_sizes(src: str | Path | Any) -> dict[str, list[int]]:
    """The sequence of write sizes (bytes) of each (rank, file), from DXT_POSIX.

    Keys are ``"<rank>:<file path>"``; values the ``length`` of each write segment in
    issue (``start_time``) order. Empty when the log has no DXT_POSIX module. This is
    the input of the Markov write-size predictor (paper Section III-B).
    """
    with _opened(src) as report:
        return _dxt_write_sizes(report)


def _dxt_write_sizes(report: Any) -> dict[str, list[int]]:
    names = report.name_records
    out: dict[str, list[int]] = {}
    for rec in _records(report, "DXT_POSIX"):
        segs = sorted(rec["write_segments"], key=lambda s: s["start_time"])
        if not segs:
            continue
        key = f"{rec['rank']}:{names.get(rec['id'], str(rec['id']))}"
        out.setdefault(key, []).extend(int(s["length"]) for s in segs)
    return out


def _aggregate(segs: Iterable[dict], window_s: float) -> list[tuple[float, int, int]]:
    """(start time, bytes, ops) runs of time-sorted segments each within window_s."""
    runs: list[tuple[float, int, int]] = []
    t0 = b = n = None
    for s in segs:
        t = max(0.0, float(s["start_time"]))
        if t0 is None or t - t0 > window_s:
            if t0 is not None:
                runs.append((t0, b, n))
            t0, b, n = t, 0, 0
        b += int(s["length"])
        n += 1
    if t0 is not None:
        runs.append((t0, b, n))
    return runs


def import_darshan(path: str | Path, *, jobid: str | None = None,
                   aggregate_s: float = 1.0,
                   default_stripe_count: int = 1,
                   default_stripe_size: int = DEFAULT_STRIPE_SIZE_BYTES) -> DarshanImport:
    """Convert a Darshan log into trace records (see the module docstring for the mapping).

    Args:
        path: the ``.darshan`` log.
        jobid: job identity; default :func:`darshan_jobid`. File ids are
            ``<jobid>:<file path>``.
        aggregate_s: DXT segments of one (rank, file, op) starting within this many
            seconds of a run's first segment become one record; 0 keeps one record per
            segment. Default 1 s, as the trace format's ``ops`` column describes.
        default_stripe_count: stripe count of files without a LUSTRE record (Lustre's
            default, 1).
        default_stripe_size: stripe size, bytes, of files without a LUSTRE record
            (Lustre's default, 1 MiB).

    Raises:
        FileNotFoundError, DarshanImportError: as :func:`open_report`.
    """
    with _opened(path) as report:
        return _import_report(report, path, jobid, aggregate_s, default_stripe_count,
                              default_stripe_size)


def _import_report(report: Any, path: str | Path, jobid: str | None, aggregate_s: float,
                   default_stripe_count: int, default_stripe_size: int) -> DarshanImport:
    job = jobid or darshan_jobid(report)
    notes: list[str] = []
    modules = set(report.modules)
    files = _ReportFiles(report, job, default_stripe_count, default_stripe_size)
    if "LUSTRE" not in modules:
        notes.append(f"LUSTRE: module absent; stripe count {default_stripe_count}, "
                     f"stripe size {default_stripe_size} used for every file")
    dxt = _records(report, "DXT_POSIX")
    dxt_ids = {rec["id"] for rec in dxt}
    raw: list[TraceRecord] = []
    if "DXT_POSIX" in modules:
        raw += _dxt_records(dxt, files, aggregate_s, notes)
    else:
        notes.append("DXT_POSIX: module absent; POSIX counters used")
    if "POSIX" in modules:
        raw += _posix_counter_records(report, files, dxt_ids, notes)
    else:
        notes.append("POSIX: module absent; no counters imported")
    if "MPI-IO" in modules:
        mp = report.records["MPI-IO"].to_df()["counters"]
        notes.append(f"MPI-IO: {len(mp)} records, {int(mp['MPIIO_BYTES_WRITTEN'].sum())} bytes "
                     "written (not added: the POSIX layer carries the same bytes)")
    for other in sorted(modules - {"POSIX", "DXT_POSIX", "LUSTRE", "MPI-IO"}):
        notes.append(f"{other}: not imported")
    records = _in_order_with_old_files_read(raw, files, notes)
    notes.append("deletes: Darshan records no unlink; the trace has none")
    return DarshanImport(str(path), job, records, files.layouts, notes)


class _ReportFiles:
    """One report's files as the import names them: ``<jobid>:<path>`` ids (the record
    id where the log has no name) and each file's stripe count and size, from its LUSTRE
    record or the defaults (a stripe size that is not a 64 KiB multiple is a default)."""

    def __init__(self, report: Any, job: str, default_stripe_count: int,
                 default_stripe_size: int):
        self.job = job
        self.names = report.name_records
        self.layouts = lustre_layouts(report)
        self.default = (default_stripe_count, default_stripe_size)
        self.path_of: dict[str, str] = {}     # file id -> file path

    def file_id(self, rec_id: int) -> tuple[str, str]:
        """(path, file id) of a module record's id."""
        name = self.names.get(rec_id, str(rec_id))
        self.path_of[f"{self.job}:{name}"] = name
        return name, f"{self.job}:{name}"

    def layout(self, name: str) -> tuple[int, int]:
        """(stripe count, stripe size bytes) of the file at ``name``."""
        lay = self.layouts.get(name)
        if lay is None:
            return self.default
        size = lay.stripe_size
        if size <= 0 or size % STRIPE_SIZE_UNIT_BYTES:
            size = self.default[1]
        return lay.stripe_count, size


def _dxt_records(dxt: list[dict], files: _ReportFiles, aggregate_s: float,
                 notes: list[str]) -> list[TraceRecord]:
    """DXT_POSIX segments as trace records, each (rank, file, op)'s runs within
    ``aggregate_s`` of their first segment merged (:func:`_aggregate`)."""
    raw: list[TraceRecord] = []
    n_seg = 0
    for rec in dxt:
        name, file_id = files.file_id(rec["id"])
        sc, ss = files.layout(name)
        for op, key in (("write", "write_segments"), ("read", "read_segments")):
            segs = sorted(rec[key], key=lambda s: s["start_time"])
            n_seg += len(segs)
            for t, b, n in _aggregate(segs, aggregate_s):
                raw.append(TraceRecord(t, op, files.job, file_id, b,
                                       sc if op == "write" else 0,
                                       ss if op == "write" else 0, None, n))
    notes.append(f"DXT_POSIX: {len(dxt)} (rank, file) records, {n_seg} segments imported")
    return raw


def _posix_counter_records(report: Any, files: _ReportFiles, dxt_ids: set,
                           notes: list[str]) -> list[TraceRecord]:
    """One write and one read record per POSIX record DXT does not cover, at its
    ``POSIX_F_*_START_TIMESTAMP`` (the open time when zero); a read-write file's read
    follows its create."""
    cols = report.counters["POSIX"]
    raw: list[TraceRecord] = []
    for rec in _records(report, "POSIX"):
        if rec["id"] in dxt_ids:
            continue
        c = dict(zip(cols["counters"], rec["counters"]))
        f = dict(zip(cols["fcounters"], rec["fcounters"]))
        name, file_id = files.file_id(rec["id"])
        sc, ss = files.layout(name)
        opened = max(0.0, float(f.get("POSIX_F_OPEN_START_TIMESTAMP", 0.0)))
        w_at = float(f.get("POSIX_F_WRITE_START_TIMESTAMP", 0.0)) or opened
        r_at = float(f.get("POSIX_F_READ_START_TIMESTAMP", 0.0)) or opened
        if c["POSIX_WRITES"] > 0:
            raw.append(TraceRecord(max(0.0, w_at), "write", files.job, file_id,
                                   int(c["POSIX_BYTES_WRITTEN"]), sc, ss, None,
                                   int(c["POSIX_WRITES"])))
            if c["POSIX_READS"] > 0 and r_at < w_at:
                r_at = w_at  # a read-write file: its read counter follows the create
        if c["POSIX_READS"] > 0:
            raw.append(TraceRecord(max(0.0, r_at), "read", files.job, file_id,
                                   int(c["POSIX_BYTES_READ"]), 0, 0, None,
                                   int(c["POSIX_READS"])))
    notes.append(f"POSIX: counters of {len(report.records['POSIX'])} records "
                 f"({len(dxt_ids)} files covered by DXT), {len(raw)} trace records from counters")
    return raw


def _in_order_with_old_files_read(raw: list[TraceRecord], files: _ReportFiles,
                                  notes: list[str]) -> list[TraceRecord]:
    """``raw`` in time order (microseconds, writes first at a tie). A read of a file the
    log never wrote reads a file that existed before the job: spread over the OSTs of its
    LUSTRE layout (bytes and ops split evenly), or skipped, counted in ``notes``, without
    one."""
    # microseconds: what the trace writer keeps, so a written trace reads back equal
    raw = [r._replace(timestamp_s=round(r.timestamp_s, 6)) for r in raw]
    raw.sort(key=lambda r: (r.timestamp_s, r.op != "write"))
    records: list[TraceRecord] = []
    written: set[str] = set()
    skipped_reads = 0
    for r in raw:
        if r.op == "write":
            written.add(r.file_id)
        elif r.file_id not in written:
            lay = files.layouts.get(files.path_of[r.file_id])
            if lay is None or not lay.ost_ids:
                skipped_reads += 1
                continue
            k = len(lay.ost_ids)
            for i, ost in enumerate(lay.ost_ids):
                b = r.bytes // k + (1 if i < r.bytes % k else 0)
                n = max(1, r.ops // k + (1 if i < r.ops % k else 0))
                records.append(TraceRecord(r.timestamp_s, "read", files.job, "", b, 0, 0, ost, n))
            continue
        records.append(r)
    if skipped_reads:
        notes.append(f"reads: {skipped_reads} read records of files neither written in the "
                     "log nor with a LUSTRE layout skipped")
    return records
