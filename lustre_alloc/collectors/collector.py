"""The collector (D' on an OSS, D on the MDS; Paul et al. 2017, Section III-A, Fig. 5, Table I).

Once per interval :meth:`Collector.collect` reads every source of the server through a
:class:`lustre_alloc.collectors.sources.StatsSource`, parses it with the readers, reduces it against the
previous reading (:mod:`lustre_alloc.collectors.reduce`) and returns the body of one sample message
(docs/protocol.md). A source that is missing, unreadable or garbled makes only its own values
unavailable, with the reason; the next good read recovers. Rates need two readings, so the first
sample after start (and after a reset) carries gauges only, with the rates marked unavailable.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from lustre_alloc.common.errors import LustreStatsError, SourceUnavailable
from lustre_alloc.collectors.readers.brw_stats import (DISK_IN_FLIGHT, DISK_IO_SIZE, IO_TIME, BrwStats,
                                          parse_brw_stats)
from lustre_alloc.collectors.readers.health_check import parse_health_check
from lustre_alloc.collectors.readers.host_load import HostLoadReader
from lustre_alloc.collectors.readers.job_stats import JobStats, parse_job_stats
from lustre_alloc.collectors.readers.kbytes import parse_single_value
from lustre_alloc.collectors.readers.lnet_stats import GAUGES, parse_lnet_stats
from lustre_alloc.collectors.readers.lnetctl import parse_lnetctl_stats
from lustre_alloc.collectors.readers.stats_file import StatsSnapshot, parse_stats
from lustre_alloc.collectors.schema import TARGET_GONE
from lustre_alloc.collectors.reduce import (CounterReset, choose_interval, delta, histogram_delta,
                               summarize_log2)
from lustre_alloc.common.fsname import fsname_of
from lustre_alloc.collectors.mds_view import collect_mds_view
from lustre_alloc.collectors.sources import MDT_NAMES, OST_NAMES, StatsSource

log = logging.getLogger("lustre_alloc.collectors.collector")

_INDEX_RE = re.compile(r"-(?:OST|MDT)([0-9a-fA-F]{4,8})$")
#: 2.14+ per-op service-time counters that duplicate read_bytes/write_bytes samples.
_RW_TIME = ("read", "write")
DEFAULT_MAX_JOBS = 8
"""Jobs published per target per sample (the busiest by bytes, then operations)."""
_RW_BYTES = ("read_bytes", "write_bytes")
#: Single-number files -> published value name (units in the name: KiB, inodes).
_GAUGE_NAMES = {"kbytesfree": "kbytes_free", "kbytestotal": "kbytes_total",
                "kbytesavail": "kbytes_avail", "filesfree": "files_free",
                "filestotal": "files_total", "degraded": "degraded"}
#: LNet counters -> published per-second name.
_LNET_RATES = {"send_count": "lnet_send_msgs_per_s", "recv_count": "lnet_recv_msgs_per_s",
               "route_count": "lnet_route_msgs_per_s", "drop_count": "lnet_drop_msgs_per_s",
               "errors": "lnet_errors_per_s", "send_length": "lnet_send_bytes_per_s",
               "recv_length": "lnet_recv_bytes_per_s", "route_length": "lnet_route_bytes_per_s",
               "drop_length": "lnet_drop_bytes_per_s"}


def target_index(name: str) -> int | None:
    """OST/MDT index from ``fsname-OSTxxxx`` (hexadecimal, as Lustre prints it)."""
    m = _INDEX_RE.search(name)
    return int(m.group(1), 16) if m else None


def _reason(exc: Exception) -> str:
    if isinstance(exc, SourceUnavailable):
        return f"{exc.reason}: {exc.source}" + (f" ({exc.detail})" if exc.detail else "")
    if isinstance(exc, CounterReset):
        return f"counter_reset: {exc.name}"
    return f"garbled: {exc}"


@dataclass(slots=True)
class _TargetState:
    """Previous parsed readings of one target, for deltas."""
    stats: StatsSnapshot | None = None
    jobs: JobStats | None = None
    brw: BrwStats | None = None
    read_at: float = 0.0


@dataclass(slots=True)
class _ServerState:
    lnet: dict[str, int] | None = None
    lnet_at: float = 0.0
    version: str | None = None


@dataclass(slots=True)
class TargetSample:
    """What one target contributes to a sample (see docs/protocol.md, ``targets``)."""
    kind: str
    index: int | None
    fsname: str | None = None
    available: bool = True
    values: dict[str, float | int] = field(default_factory=dict)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "fsname": self.fsname,
                "available": self.available,
                "values": self.values, "jobs": self.jobs, "unavailable": self.unavailable}


class Collector:
    """Reads, parses and reduces the statistics of one OSS or MDS.

    Args:
        role: ``oss`` (OSTs: obdfilter stats, job_stats, brw_stats, kbytes*) or ``mds`` (MDTs:
            md_stats, job_stats).
        source: the access path (files under a root, or ``lctl get_param``).
        max_jobs: jobs published per target per sample (the busiest by bytes, then ops).
        host_load: CPU/memory reader (``None``: psutil on this host).
        clock: monotonic seconds, for intervals between readings.
    """

    def __init__(self, role: str, source: StatsSource, *, max_jobs: int = DEFAULT_MAX_JOBS,
                 host_load: HostLoadReader | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if role not in ("oss", "mds"):
            raise ValueError(f"role must be oss or mds, not {role!r}")
        self.role = role
        self.kind = "ost" if role == "oss" else "mdt"
        self.source = source
        self.max_jobs = max_jobs
        self.host_load = host_load or HostLoadReader()
        self.clock = clock
        self._targets: dict[str, _TargetState] = {}
        self._server = _ServerState()
        self._unavailable_logged: set[tuple[str, str]] = set()

    # ----------------------------------------------------------------------------- server
    def _collect_server(self, out: dict[str, Any]) -> None:
        values: dict[str, Any] = {}
        unavailable: dict[str, str] = {}
        try:
            load = self.host_load.read()
            values.update(cpu_percent=load.cpu_percent, mem_percent=load.mem_percent,
                          load1=load.load1)
        except SourceUnavailable as exc:
            unavailable["host_load"] = _reason(exc)
        self._collect_lnet(values, unavailable)
        try:
            text, where = self.source.read_server("health_check")
            health = parse_health_check(text, where)
            values["healthy"] = health.healthy
            values["health_status"] = health.status
            out["unhealthy_targets"] = health.unhealthy_targets
        except (SourceUnavailable, LustreStatsError) as exc:
            unavailable["health_check"] = _reason(exc)
            out["unhealthy_targets"] = []
        if self._server.version is None:
            try:
                text, _ = self.source.read_server("version")
                first = text.strip().splitlines()[0] if text.strip() else ""
                self._server.version = first.replace("lustre:", "").strip()[:40] or None
            except SourceUnavailable:
                pass
        if self._server.version:
            values["lustre_version"] = self._server.version
        out["values"], out["unavailable"] = values, unavailable

    def _collect_lnet(self, values: dict[str, Any], unavailable: dict[str, str]) -> None:
        counters: dict[str, int] | None = None
        failures: list[str] = []
        for name, parser in (("lnet_stats", parse_lnet_stats), ("lnetctl", parse_lnetctl_stats)):
            try:
                text, where = self.source.read_server(name)
                counters = parser(text, where)
                break
            except (SourceUnavailable, LustreStatsError) as exc:
                failures.append(_reason(exc))
        now = self.clock()
        if counters is None:
            unavailable["lnet"] = "; ".join(failures)
            self._server.lnet = None
            return
        for gauge in GAUGES:
            if gauge in counters:
                values[f"lnet_{gauge}"] = counters[gauge]
        prev, prev_at = self._server.lnet, self._server.lnet_at
        self._server.lnet, self._server.lnet_at = counters, now
        if prev is None:
            unavailable["lnet_rates"] = "warming_up"
            return
        dt = max(now - prev_at, 1e-6)
        try:
            rates = {out_name: delta(name, prev[name], counters[name]) / dt
                     for name, out_name in _LNET_RATES.items() if name in counters and name in prev}
        except CounterReset as exc:
            unavailable["lnet_rates"] = _reason(exc)
            return
        values.update(rates)

    # ----------------------------------------------------------------------------- targets
    def _read(self, target: str, name: str, ts: TargetSample, parser: Callable[[str, str], Any]) -> Any:
        try:
            text, where = self.source.read_target(self.kind, target, name)
            return parser(text, where)
        except (SourceUnavailable, LustreStatsError) as exc:
            ts.unavailable[name] = _reason(exc)
            key = (target, name)
            if key not in self._unavailable_logged:
                self._unavailable_logged.add(key)
                log.warning("source unavailable", extra={"event": "source_unavailable",
                                                          "target": target, "source_name": name,
                                                          "reason": ts.unavailable[name]})
            return None

    def _collect_target(self, target: str, now: float, unhealthy: list[str]) -> TargetSample:
        ts = TargetSample(self.kind, target_index(target), fsname_of(target))
        state = self._targets.setdefault(target, _TargetState())
        names = OST_NAMES if self.kind == "ost" else MDT_NAMES
        for name, out_name in _GAUGE_NAMES.items():
            if name not in names:
                continue
            value = self._read(target, name, ts, parse_single_value)
            if value is not None:
                ts.values[out_name] = value
        if ts.unavailable.get("degraded", "").startswith("missing"):
            del ts.unavailable["degraded"]  # optional: not every version/OSD has it
        stats_name = "stats" if self.kind == "ost" else "md_stats"
        stats = self._read(target, stats_name, ts, parse_stats)
        jobs = self._read(target, "job_stats", ts, parse_job_stats)
        brw = self._read(target, "brw_stats", ts, parse_brw_stats) if self.kind == "ost" else None
        local_dt = now - state.read_at if state.read_at else 0.0

        if stats is not None:
            self._reduce_stats(stats_name, state.stats, stats, local_dt, ts)
            state.stats = stats
        else:
            state.stats = None
        if jobs is not None:
            self._reduce_jobs(state.jobs, jobs, local_dt, ts)
        state.jobs = jobs
        if brw is not None:
            self._reduce_brw(state.brw, brw, ts)
        state.brw = brw
        state.read_at = now

        essential = (("kbytesfree", "kbytestotal", stats_name) if self.kind == "ost"
                     else (stats_name,))
        missing = [n for n in essential if n in ts.unavailable]
        if missing:
            ts.available = False
        if target in unhealthy:
            ts.available = False
            ts.unavailable["health"] = "unhealthy: reported by health_check"
        return ts

    def _reduce_stats(self, name: str, prev: StatsSnapshot | None, cur: StatsSnapshot,
                      local_dt: float, ts: TargetSample) -> None:
        reduce_stats(self.kind, name, prev, cur, local_dt, ts.values, ts.unavailable)

    def _reduce_jobs(self, prev: JobStats | None, cur: JobStats, local_dt: float,
                     ts: TargetSample) -> None:
        rows = reduce_jobs(prev, cur, local_dt, ts.values, ts.unavailable)
        if rows is not None:
            ts.jobs = rows[: self.max_jobs]

    def _reduce_brw(self, prev: BrwStats | None, cur: BrwStats, ts: TargetSample) -> None:
        reduce_brw(prev, cur, ts.values, ts.unavailable)

    # ----------------------------------------------------------------------------- sample
    def collect(self) -> dict[str, Any]:
        """Read every source once and return ``{"server": ..., "targets": {...}}``.

        Never raises for a bad source: failures are in the ``unavailable`` maps.
        """
        self.source.refresh()
        server: dict[str, Any] = {}
        self._collect_server(server)
        unhealthy = server.pop("unhealthy_targets", [])
        if self.role == "mds" and hasattr(self.source, "read_family"):
            collect_mds_view(self.source, server)   # type: ignore[arg-type]
        now = self.clock()
        try:
            names = self.source.targets(self.kind)
        except SourceUnavailable as exc:
            server["unavailable"]["targets"] = _reason(exc)
            names = []
        targets: dict[str, Any] = {}
        for target in names:
            targets[target] = self._collect_target(target, now, unhealthy).as_dict()
        for gone in set(self._targets) - set(names):
            targets[gone] = TargetSample(self.kind, target_index(gone), fsname_of(gone),
                                         available=False,
                                         unavailable={"target": TARGET_GONE}).as_dict()
            del self._targets[gone]  # reported once; the mapper ages it out from there
        return {"server": server, "targets": targets}


def reduce_stats(kind: str, name: str, prev: StatsSnapshot | None, cur: StatsSnapshot,
                 local_dt: float, values: dict[str, Any], unavailable: dict[str, str]) -> None:
    """Rates of a target's lprocfs counters file (obdfilter ``stats`` on an OST, ``md_stats``
    on an MDT) over the interval from ``prev`` to ``cur`` (``local_dt`` s by this host's
    clock; :func:`lustre_alloc.collectors.reduce.choose_interval` decides), into ``values``
    (docs/protocol.md: ``read/write_bytes_per_s``, ``read/write_ops_per_s``,
    ``*_service_time_us_mean``, ``sync_ops_per_s``, ``other_ops_per_s``; ``md_*_per_s``). The first reading, or
    a counter reset, marks ``<name>_rates`` unavailable instead. The collector and the
    simulator's collector readings (:mod:`lustre_alloc.simulator.ost_readings`) both reduce with it."""
    if prev is None or local_dt <= 0:
        unavailable[f"{name}_rates"] = "warming_up"
        return
    dt = choose_interval(prev.snapshot_time, cur.snapshot_time, local_dt)
    try:
        if (prev.start_time is not None and cur.start_time is not None
                and abs(cur.start_time - prev.start_time) > 1e-3):
            raise CounterReset(f"{name}.start_time", prev.start_time, cur.start_time)
        d_samples = {n: delta(n, prev.counters[n].samples if n in prev.counters else 0,
                              cur.counters[n].samples if n in cur.counters else 0)
                     for n in set(prev.counters) | set(cur.counters)}
        d_sum = {n: delta(f"{n}.sum", prev.counters[n].sum or 0 if n in prev.counters else 0,
                          cur.counters[n].sum or 0 if n in cur.counters else 0)
                 for n in set(prev.counters) | set(cur.counters)}
    except CounterReset as exc:
        unavailable[f"{name}_rates"] = _reason(exc)
        return
    v = values
    if kind == "ost":
        for direction in ("read", "write"):
            v[f"{direction}_bytes_per_s"] = d_sum.get(f"{direction}_bytes", 0) / dt
            v[f"{direction}_ops_per_s"] = d_samples.get(f"{direction}_bytes", 0) / dt
            timed = cur.counters.get(direction)
            if timed is not None and timed.unit.startswith("usec") and d_samples.get(direction):
                v[f"{direction}_service_time_us_mean"] = d_sum[direction] / d_samples[direction]
        # What an fsync waits for (ofd_dev.c ofd_sync_hdl(): LPROC_OFD_STATS_SYNC, the
        # handler's time in usecs, 2.14+). On a ZFS OST it is where a slow vdev shows: the
        # write RPC returns once ZFS has the data in memory (osd-zfs never times a write:
        # osd_io.c osd_write_commit() records an elapsed time of 0).
        timed = cur.counters.get("sync")
        if timed is not None and timed.unit.startswith("usec") and d_samples.get("sync"):
            v["sync_ops_per_s"] = d_samples["sync"] / dt
            v["sync_service_time_us_mean"] = d_sum["sync"] / d_samples["sync"]
        other = sum(c for n, c in d_samples.items() if n not in _RW_BYTES + _RW_TIME)
        v["other_ops_per_s"] = other / dt
    else:
        ops = {n: c / dt for n, c in d_samples.items() if n not in _RW_BYTES and c}
        v["md_ops_per_s"] = sum(ops.values(), 0.0)
        v.update({f"md_{n}_per_s": r for n, r in sorted(ops.items())})


def reduce_jobs(prev: JobStats | None, cur: JobStats, local_dt: float, values: dict[str, Any],
                unavailable: dict[str, str]) -> list[dict[str, Any]] | None:
    """A target's job_stats over ``local_dt`` s from ``prev`` to ``cur``: one row per job
    that moved bytes or did operations (``job_id``, ``read_bytes_per_s``,
    ``write_bytes_per_s``, ``ops_per_s``, and on an MDT ``creates_per_s``; docs/protocol.md),
    busiest first (bytes, then
    operations, then id), and ``values["jobs_active"]``; a job whose counters went down (it
    was dropped after ``job_cleanup_interval`` and came back) is skipped and counted in
    ``values["jobs_reset"]``. The first reading marks ``job_stats_rates`` unavailable and
    returns None. The collector and the simulator's readings
    (:mod:`lustre_alloc.simulator.job_readings`) both reduce with it."""
    if prev is None or local_dt <= 0:
        unavailable["job_stats_rates"] = "warming_up"
        return None
    rows = []
    resets = 0
    for jobid, job in cur.jobs.items():
        before = prev.jobs.get(jobid)
        try:
            def d(counter: str, attr: str) -> int:
                a = getattr(before.counters.get(counter), attr, 0) if before else 0
                b = getattr(job.counters.get(counter), attr, 0)
                return delta(f"{jobid}.{counter}", a or 0, b or 0)
            rb, wb = d("read_bytes", "sum"), d("write_bytes", "sum")
            ops = sum(d(n, "samples") for n in set(job.counters) | set(before.counters if before else ())
                      if n not in _RW_TIME)
            # An MDT counts under mknod every regular file that open(O_CREAT) created
            # (lustre/mdt/mdt_open.c mdt_reint_open(): mdt_counter_incr(req,
            # LPROC_MDT_MKNOD, ...) once created = 1) and every mknod(2)
            # (mdt_reint.c mdt_create()); an OST's job_stats has no mknod counter.
            creates = d("mknod", "samples") if "mknod" in job.counters else None
        except CounterReset:
            resets += 1
            continue
        if rb or wb or ops:
            row = {"job_id": jobid, "read_bytes_per_s": rb / local_dt,
                   "write_bytes_per_s": wb / local_dt, "ops_per_s": ops / local_dt}
            if creates is not None:
                row["creates_per_s"] = creates / local_dt
            rows.append(row)
    rows.sort(key=lambda r: (-(r["read_bytes_per_s"] + r["write_bytes_per_s"]), -r["ops_per_s"],
                             r["job_id"]))
    values["jobs_active"] = len(rows)
    if resets:
        values["jobs_reset"] = resets
    return rows


def reduce_brw(prev: BrwStats | None, cur: BrwStats, values: dict[str, Any],
               unavailable: dict[str, str]) -> None:
    """An OST's brw_stats over the interval from ``prev`` to ``cur``: per direction the
    RPCs that ran (``read_ios``, ``write_ios``) and, when any ran, their I/O time mean,
    p50 and p99 (ms) and disk I/O size mean (bytes), from the deltas of the cumulative
    histograms (:func:`lustre_alloc.collectors.reduce.summarize_log2`), and the mean of "disk I/Os in
    flight" (``write_ios_in_flight_mean``, I/Os; linear buckets, exact to 30) when the file
    has that block (osd-zfs may not). An interval with no RPC has no
    I/O time: nothing in Lustre says what an idle OST could deliver. The first reading or
    a reset marks ``brw_stats_rates`` unavailable. The collector and the simulator's
    collector readings (:mod:`lustre_alloc.simulator.ost_readings`) both reduce with it."""
    if prev is None:
        unavailable["brw_stats_rates"] = "warming_up"
        return
    try:
        if (prev.start_time is not None and cur.start_time is not None
                and abs(cur.start_time - prev.start_time) > 1e-3):
            raise CounterReset("brw_stats.start_time", prev.start_time, cur.start_time)
        for block, unit, scale in ((IO_TIME, "io_time_ms", 1.0), (DISK_IO_SIZE, "io_size_bytes", 1.0)):
            h_cur, h_prev = cur.histograms.get(block), prev.histograms.get(block)
            if h_cur is None:
                unavailable[f"brw_stats.{block}"] = "missing: block not in brw_stats"
                continue
            for direction in ("read", "write"):
                before = h_prev.as_dict(direction) if h_prev else {}
                summary = summarize_log2(histogram_delta(f"{block}.{direction}", before,
                                                         h_cur.as_dict(direction)))
                if block == IO_TIME:
                    values[f"{direction}_ios"] = summary.count if summary else 0
                if summary is None:
                    continue
                values[f"{direction}_{unit}_mean"] = summary.mean * scale
                if block == IO_TIME:
                    values[f"{direction}_{unit}_p50"] = summary.p50
                    values[f"{direction}_{unit}_p99"] = summary.p99
        h_cur, h_prev = cur.histograms.get(DISK_IN_FLIGHT), prev.histograms.get(DISK_IN_FLIGHT)
        for direction in ("read", "write") if h_cur is not None else ():
            delta = histogram_delta(f"{DISK_IN_FLIGHT}.{direction}",
                                    h_prev.as_dict(direction) if h_prev else {},
                                    h_cur.as_dict(direction))
            ios = sum(delta.values())
            if ios > 0:
                values[f"{direction}_ios_in_flight_mean"] = (
                    sum(h_cur.in_flight_value(b) * n for b, n in delta.items()) / ios)
    except CounterReset as exc:
        unavailable["brw_stats_rates"] = _reason(exc)
