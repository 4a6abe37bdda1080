"""Which Lustre statistic shows a slow OST, and after how many seconds of load: the
signals table of docs/lustre-vm.md ("Placement with a slow OST").

Runs inside the lustre-vm guest, beside bench/lustre_vm_placement.py (which starts a
:class:`Sampler` for each setup). Every ``interval_s`` the sampler reads, with the
collectors' own parsers, every counter a collector can read on 2.15 and 2.17 for an OST:

* brw_stats (``osd-*.*.brw_stats``): write "I/O time" (count, ms) and "disk I/Os in flight";
* the OFD's ``stats`` (``obdfilter.*.stats``): ``write_bytes``, ``write`` and ``sync``
  ``[usecs]``;
* the OST's ``job_stats``: ``write`` and ``sync`` ``[usecs]`` summed over its jobs;
* the MDS's OSP precreation state (``osp.*.prealloc_next_id``/``prealloc_last_id``):
  objects precreated and not yet used;
* the OSS's ``ost.OSS.ost_io.stats`` (``req_waittime``, ``ost_write``, ``ost_sync``): one
  for the whole I/O service, so it cannot tell one OST from another (kept, not ranked).

:func:`signal_table` turns the readings into, per statistic, the slow OST's value over the
median of the others over the first ``t`` seconds of load, and the first ``t`` from which
that ratio stays beyond 2x (the one log2 bucket step the mapper's regime needs).
"""
from __future__ import annotations

import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field

from lustre_alloc.collectors.readers.brw_stats import DISK_IN_FLIGHT, IO_TIME, parse_brw_stats
from lustre_alloc.collectors.readers.job_stats import parse_job_stats
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param
from lustre_alloc.collectors.readers.stats_file import parse_stats
from lustre_alloc.collectors.collector import target_index
from lustre_alloc.collectors.reduce import summarize_log2

PARAMS = ("obdfilter.*.stats", "obdfilter.*.job_stats", "osd-*.*.brw_stats",
          "osp.*.prealloc_next_id", "osp.*.prealloc_last_id", "ost.OSS.ost_io.stats")
STATISTICS = {
    # name: (what it is, unit, larger means slower)
    "brw_write_io_time_ms": ("brw_stats write I/O time, mean per I/O", "ms", True),
    "brw_write_in_flight": ("brw_stats write disk I/Os in flight, mean", "I/Os", True),
    "ofd_write_us": ("OFD stats write, mean per RPC", "us", True),
    "ofd_sync_us": ("OFD stats sync, mean per fsync", "us", True),
    "ofd_write_sync_us_per_rpc": ("OFD (write + sync) per write RPC: the mapper's ZFS signal",
                                  "us", True),
    "job_write_us": ("OST job_stats write, mean per RPC (all jobs)", "us", True),
    "job_sync_us": ("OST job_stats sync, mean per fsync (all jobs)", "us", True),
    "write_bytes_per_s": ("OFD stats write_bytes rate", "B/s", False),
    "precreated": ("objects precreated on the MDS's OSP (last_id - next_id), minimum", "objects",
                   False),
}


@dataclass
class Reading:
    """Cumulative per-OST counters at one instant (monotonic seconds ``t``)."""
    t: float
    osts: dict[int, dict[str, float]] = field(default_factory=dict)
    oss: dict[str, float] = field(default_factory=dict)


def read_once(lctl: str = "lctl") -> Reading:
    """One reading of :data:`PARAMS` through ``lctl get_param``."""
    text = subprocess.run([lctl, "get_param", *PARAMS], capture_output=True, text=True).stdout
    dump = parse_get_param(text)
    r = Reading(time.monotonic())
    for name, value in dump.values.items():
        kind, _, rest = name.partition(".")
        target, _, leaf = rest.rpartition(".")
        if kind == "ost" and leaf == "stats":
            for cname, c in parse_stats(value, name).counters.items():
                if cname in ("req_waittime", "ost_write", "ost_sync") and c.sum is not None:
                    r.oss[f"{cname}_sum"], r.oss[f"{cname}_n"] = c.sum, c.samples
            continue
        if kind == "osp" and "-OST" in target:
            idx = target_index(target.split("-osc-")[0])
            if idx is not None:
                r.osts.setdefault(idx, {})[leaf] = float(value.strip() or 0)
            continue
        idx = target_index(target)
        if idx is None or "-OST" not in target:
            continue
        o = r.osts.setdefault(idx, {})
        if kind == "obdfilter" and leaf == "stats":
            for cname, c in parse_stats(value, name).counters.items():
                if cname in ("write_bytes", "write", "sync"):
                    o[f"ofd_{cname}_sum"], o[f"ofd_{cname}_n"] = float(c.sum or 0), c.samples
        elif kind == "obdfilter" and leaf == "job_stats":
            for job in parse_job_stats(value, name).jobs.values():
                for cname in ("write", "sync"):
                    c = job.counters.get(cname)
                    if c is not None:
                        o[f"job_{cname}_sum"] = o.get(f"job_{cname}_sum", 0.0) + float(c.sum or 0)
                        o[f"job_{cname}_n"] = o.get(f"job_{cname}_n", 0.0) + c.samples
        elif kind.startswith("osd-") and leaf == "brw_stats":
            brw = parse_brw_stats(value, name)
            for block, key in ((IO_TIME, "brw_time"), (DISK_IN_FLIGHT, "brw_flight")):
                h = brw.histograms.get(block)
                if h is None:
                    continue
                counts = h.as_dict("write")
                o[f"{key}_n"] = float(sum(counts.values()))
                if block == IO_TIME:
                    s = summarize_log2(counts)
                    o[f"{key}_sum"] = s.mean * s.count if s else 0.0
                else:
                    o[f"{key}_sum"] = float(sum(h.in_flight_value(b) * n for b, n in counts.items()))
    return r


class Sampler:
    """Readings every ``interval_s`` in a thread until :meth:`stop`; a reading that fails
    (lctl missing a parameter) is skipped and counted."""

    def __init__(self, interval_s: float = 2.0, lctl: str = "lctl"):
        self.interval_s, self.lctl = interval_s, lctl
        self.readings: list[Reading] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.readings.append(read_once(self.lctl))
            except Exception:           # a reading is evidence, never a reason to stop the bench
                self.failed += 1
            self._stop.wait(self.interval_s)

    def stop(self) -> list[Reading]:
        self._stop.set()
        self._thread.join()
        return self.readings


def _per_ost(first: Reading, last: Reading, ost: int) -> dict[str, float | None]:
    """Each statistic of :data:`STATISTICS` for ``ost`` between two readings."""
    a, b = first.osts.get(ost, {}), last.osts.get(ost, {})

    def d(key: str) -> float:
        return b.get(key, 0.0) - a.get(key, 0.0)

    def mean(key: str) -> float | None:
        n = d(f"{key}_n")
        return d(f"{key}_sum") / n if n > 0 else None

    writes = d("ofd_write_n")
    out: dict[str, float | None] = {
        "brw_write_io_time_ms": mean("brw_time"), "brw_write_in_flight": mean("brw_flight"),
        "ofd_write_us": mean("ofd_write"), "ofd_sync_us": mean("ofd_sync"),
        "ofd_write_sync_us_per_rpc": (d("ofd_write_sum") + d("ofd_sync_sum")) / writes
        if writes > 0 else None,
        "job_write_us": mean("job_write"), "job_sync_us": mean("job_sync"),
        "write_bytes_per_s": d("ofd_write_bytes_sum") / (last.t - first.t)
        if last.t > first.t else None,
    }
    return out


def _precreated_min(readings: list[Reading], ost: int) -> float | None:
    vals = [r.osts[ost]["prealloc_last_id"] - r.osts[ost]["prealloc_next_id"]
            for r in readings if ost in r.osts and "prealloc_last_id" in r.osts[ost]
            and "prealloc_next_id" in r.osts[ost]]
    return min(vals) if vals else None


def ratios(readings: list[Reading], slow: int, upto_s: float) -> dict[str, float | None]:
    """Per statistic: the slow OST's value over the median of the others, over the readings
    within ``upto_s`` seconds of the first (None: not measured on one side)."""
    if len(readings) < 2:
        return {k: None for k in STATISTICS}
    t0 = readings[0].t
    window = [r for r in readings if r.t - t0 <= upto_s + 1e-6]
    first, last = window[0], window[-1]
    osts = sorted(set(first.osts) | set(last.osts))
    vals = {o: _per_ost(first, last, o) for o in osts}
    for o in osts:
        vals[o]["precreated"] = _precreated_min(window, o)
    out: dict[str, float | None] = {}
    for k in STATISTICS:
        mine = vals.get(slow, {}).get(k)
        others = [vals[o][k] for o in osts if o != slow and vals[o].get(k) is not None]
        med = statistics.median(others) if others else None
        out[k] = None if mine is None or not med else mine / med
    return out


def signal_table(readings: list[Reading], slow: int,
                 checkpoints_s: tuple[float, ...] = (10, 20, 30, 60)) -> dict[str, dict]:
    """Per statistic: its ratio at each checkpoint (seconds of load from the first reading)
    and over everything, and ``shows_after_s``: the first checkpoint from which the ratio
    stays beyond 2x in the slower direction (None: never)."""
    total = readings[-1].t - readings[0].t if readings else 0.0
    marks = [c for c in checkpoints_s if c <= total] + [total]
    by_mark = {c: ratios(readings, slow, c) for c in marks}
    table: dict[str, dict] = {}
    for k, (what, unit, larger_slower) in STATISTICS.items():
        row = {"what": what, "unit": unit, "ratios": {f"{c:.0f}": by_mark[c][k] for c in marks}}
        shows = None
        for i, c in enumerate(marks):
            later = [by_mark[m][k] for m in marks[i:]]
            if all(x is not None and (x >= 2 if larger_slower else x <= 0.5) for x in later):
                shows = c
                break
        row["shows_after_s"] = shows
        table[k] = row
    return table
