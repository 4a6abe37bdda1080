"""The MDS's view of the OSTs in the simulator: what the placement policies see.

Two sources, refreshed lazily at a create when due, as on a real MDS:

* **statfs** (every ``statfs_interval_s``): kbytes free/avail per OST and the OSP flags
  (:func:`lustre_alloc.mapper.state.ost_health.statfs_flags`, watermarks with hysteresis); LOD refreshes
  a stale cache before allocating.
* **the collectors' samples** (every ``stats_interval_s``): what each OSS's collector would
  publish, reduced by the collectors' own code from readings kept as Lustre keeps them
  (:mod:`lustre_alloc.simulator.ost_readings`: brw_stats histograms and obdfilter counters advanced only
  by RPCs that ran; kbytes; degraded, available; per OSS CPU, memory and LNet bytes),
  folded by the mapper's own
  :class:`~lustre_alloc.mapper.state.state_store.StateStore`, in every world; the view's load fields
  (RPC time, write rate, OSS CPU/memory/LNet load, ``active``, ``DEGRADED``, serving OSS,
  new OSTs) are copied from the store's outputs: the engine has no way to hand the
  policies a number that did not come through the store.
"""
from __future__ import annotations

import math

import numpy as np

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.mapper.state.ost_health import statfs_flags
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.collectors.collector import DEFAULT_MAX_JOBS, reduce_brw, reduce_jobs, reduce_stats
from lustre_alloc.collectors.readers.job_stats import JobStats
from lustre_alloc.simulator.cluster import KIB, SimCluster
from lustre_alloc.simulator.job_readings import JobReadings, MdtJobReadings
from lustre_alloc.simulator.ost_readings import OstReadings
from lustre_alloc.simulator.scenario import Scenario


class MdsView:
    """The policies' snapshot (``view``) and the sample path into it.

    Args:
        scenario: the scenario (intervals, OSS model).
        cluster: the (expanded) simulated cluster.
        used: initial used bytes per OST position.
        present: OST positions present at t=0 (expansions add the rest later).
        initial_osses: OSSes present at t=0.
        lnet_link_bytes_s: the OSS link rate LNet load is normalised to, bytes/s (the
            state store's ``lnet_capacity_bytes_per_s``).
    """

    def __init__(self, scenario: Scenario, cluster: SimCluster, used: np.ndarray,
                 present: np.ndarray, initial_osses: int, lnet_link_bytes_s: float):
        self.sc = scenario
        self.cl = cluster
        n = cluster.ost_count
        self.view: ClusterSnapshot = cluster.snapshot(used)
        self.view_p = np.arange(n)      # engine position of each OST of the view
        if not present.all():
            keep = [p for p in range(n) if present[p]]
            self.view.osts = [self.view.osts[p] for p in keep]
            for name in cluster.oss_names[initial_osses:]:
                self.view.osses.pop(name, None)
            self.view_p = np.array(keep)
        self.store = StateStore(lnet_capacity_bytes_per_s=lnet_link_bytes_s)
        self.last_statfs_s = -math.inf
        self.last_stats_s = -math.inf
        self.readings = OstReadings(n, brw_times_writes=cluster.osd != "zfs")
        """What each OST's brw_stats and obdfilter stats hold (the engine advances them)."""
        self.job_readings = JobReadings()
        """What each OST's job_stats holds (the engine's transfer book settles into it)."""
        self.mdt_job_readings = MdtJobReadings()
        """What the MDT's job_stats holds (the engine counts each create into it)."""
        self._prev_mdt = JobStats()
        self.view.job_sizes = self.store.job_sizes
        self._prev: dict[int, tuple] = {}      # position -> its readings at the last sample
        self.last_jobs: dict[int, list[dict]] = {}
        """Position -> the job_stats rows its OSS's collector published at the last sample."""

    # -- statfs --------------------------------------------------------------------------
    def refresh_statfs(self, now: float, used: np.ndarray, capacity: np.ndarray) -> None:
        """The MDS's statfs of every OST now (bytes used and capacity per position)."""
        avail = np.maximum(capacity - used, 0.0)
        for p, ost in zip(self.view_p.tolist(), self.view.osts):
            kb = int(avail[p] // KIB)
            ost.kbytes_free = ost.kbytes_avail = kb
            # The service's rule (OSP watermarks with hysteresis), on the statfs KiB.
            ost.flags = statfs_flags(ost.flags, kb, ost.kbytes_total, ost.files_free)
        self.view.changed()
        self.last_statfs_s = now

    def statfs_due(self, now: float) -> bool:
        return now - self.last_statfs_s >= self.sc.cluster.statfs_interval_s

    def stats_due(self, now: float) -> bool:
        return now - self.last_stats_s >= self.sc.cluster.stats_interval_s

    # -- samples -------------------------------------------------------------------------
    def refresh_stats(self, now: float, cpu: np.ndarray, mem: np.ndarray,
                      oss_in_bytes_s: np.ndarray, oss_out_bytes_s: np.ndarray,
                      used: np.ndarray, capacity: np.ndarray, present: np.ndarray,
                      state, inflight: list | tuple = ()) -> None:
        """One sample interval ends at ``now``: each OSS's collector reduces its OSTs'
        readings (:attr:`readings`) against the previous ones with the collectors' own code
        (:func:`lustre_alloc.collectors.collector.reduce_stats`, :func:`lustre_alloc.collectors.collector.reduce_brw`),
        the samples are folded into the mapper's state store
        (:class:`lustre_alloc.mapper.state.state_store.StateStore`, the live stack's sample -> state rules)
        and the view takes the store's outputs.

        Per OST target: ``kbytes_total/free/avail``, obdfilter ``write/read_bytes_per_s`` and
        ``_ops_per_s``, brw_stats ``write/read_ios`` and, for RPCs that ran, their I/O time
        mean/p50/p99 (ms) and disk I/O size, ``degraded``, ``available``, and job_stats'
        ``jobs`` rows (the busiest :data:`lustre_alloc.collectors.collector.DEFAULT_MAX_JOBS`) with
        ``jobs_active``. Per OSS:
        ``cpu_percent``, ``mem_percent``, ``lnet_send_bytes_per_s``, ``lnet_recv_bytes_per_s``.

        Args:
            cpu, mem: per OSS, percent.
            oss_in_bytes_s, oss_out_bytes_s: per OSS, bytes/s received and sent.
            used, capacity: per OST position, bytes.
            present: OST positions that exist now.
            state: the events' effective state (None without events).
            inflight: the transfers in flight with their bytes remaining
                (:meth:`lustre_alloc.simulator.transfer_book.TransferBook.remaining`), for job_stats.
        """
        st = state
        tables = self.job_readings.job_stats(now, inflight)
        ost_oss = self.cl.ost_oss if st is None else st.ost_oss
        avail = np.maximum(capacity - used, 0.0)
        interval = self.sc.cluster.stats_interval_s
        local_dt = now - self.last_stats_s if math.isfinite(self.last_stats_s) else now
        by_oss: dict[int, dict] = {}
        for p in np.nonzero(present)[0].tolist():
            kb_free = int(avail[p] // KIB)
            ok = True if st is None else bool(st.available[p])
            values: dict = {"kbytes_total": int(capacity[p] // KIB), "kbytes_free": kb_free,
                            "kbytes_avail": kb_free, "degraded": int(st is not None and st.degraded[p])}
            unavailable: dict = {}
            rows = self._reduce(p, now, local_dt, values, unavailable, tables.get(p))
            self.last_jobs[p] = (rows or [])[:DEFAULT_MAX_JOBS]
            target = {"kind": "ost", "index": int(self.cl.ost_index[p]), "available": ok,
                      "values": values, "unavailable": unavailable,
                      "jobs": self.last_jobs[p]}
            if not ok:
                unavailable["ost"] = st.unavailable_reason[p] or "unavailable"
            by_oss.setdefault(int(ost_oss[p]), {})[f"OST{int(self.cl.ost_index[p]):04x}"] = target
        for s_pos, targets in by_oss.items():
            self.store.apply("oss", self.cl.oss_names[s_pos], now, interval,
                             {"values": {"cpu_percent": float(cpu[s_pos]),
                                         "mem_percent": float(mem[s_pos]),
                                         "lnet_send_bytes_per_s": float(oss_out_bytes_s[s_pos]),
                                         "lnet_recv_bytes_per_s": float(oss_in_bytes_s[s_pos])}},
                             targets)
        self._apply_mdt(now, local_dt, interval)
        self._adopt_store(present)
        self.view.changed()
        self.last_stats_s = now

    def _apply_mdt(self, now: float, local_dt: float, interval: float) -> None:
        """The MDS collector's sample of the MDT: its job_stats rows (each job's creates,
        :class:`lustre_alloc.simulator.job_readings.MdtJobReadings`) reduced by the collectors' code and
        folded by the store (:mod:`lustre_alloc.mapper.state.job_sizes`)."""
        cur = self.mdt_job_readings.job_stats(now)
        values: dict = {}
        unavailable: dict = {}
        rows = reduce_jobs(self._prev_mdt, cur, local_dt, values, unavailable) or []
        self._prev_mdt = cur
        self.store.apply("mds", "mds", now, interval, {"values": {}},
                         {"MDT0000": {"kind": "mdt", "index": 0, "available": True,
                                      "values": values, "unavailable": unavailable,
                                      "jobs": rows[:DEFAULT_MAX_JOBS]}})

    def _reduce(self, p: int, now: float, local_dt: float, values: dict, unavailable: dict,
                jobs: JobStats | None = None) -> list[dict] | None:
        """The collectors' reduction of OST position ``p``'s readings since the last sample;
        returns its job_stats rows (``jobs``: the OST's job table now, empty if None).
        The collectors start with the run: before the first sample, an empty reading at t=0."""
        r = self.readings
        prev_stats, prev_brw, prev_jobs = self._prev.get(p) or (r.empty_stats(0.0),
                                                                 r.empty_brw(0.0), JobStats())
        cur_stats, cur_brw = r.stats(p, now), r.brw_stats(p, now)
        cur_jobs = jobs if jobs is not None else JobStats()
        reduce_stats("ost", "stats", prev_stats, cur_stats, local_dt, values, unavailable)
        reduce_brw(prev_brw, cur_brw, values, unavailable)
        rows = reduce_jobs(prev_jobs, cur_jobs, local_dt, values, unavailable)
        self._prev[p] = (cur_stats, cur_brw, cur_jobs)
        return rows

    def _adopt_store(self, present: np.ndarray) -> None:
        """Copy the store's outputs into the view: per OSS its load and sample time; per OST
        its RPC time, write rate, write totals, sample time, failover, ``active``, ``DEGRADED`` and serving OSS (the
        statfs fields stay the MDS's own); OSTs the samples introduced join the view."""
        known = {o.index for o in self.view.osts}
        seen = self.store.snapshot.ost_by_index()
        idx = self.cl.ost_index
        new = [p for p in np.nonzero(present)[0].tolist() if int(idx[p]) not in known
               and int(idx[p]) in seen]
        if new:
            order = sorted(list(zip(self.view_p.tolist(), self.view.osts))
                           + [(p, seen[int(idx[p])]) for p in new],
                           key=lambda x: int(idx[x[0]]))
            self.view_p = np.array([p for p, _ in order])
            fresh = set(new)
            osts = []
            for p, o in order:
                if p in fresh:  # the view's own copy of the OST the samples introduced
                    o = OstState(index=o.index, oss=o.oss, kbytes_total=o.kbytes_total,
                                 kbytes_free=o.kbytes_free, kbytes_avail=o.kbytes_avail)
                osts.append(o)
            self.view.osts = osts
            for o in osts:
                if o.oss not in self.view.osses:
                    self.view.osses[o.oss] = OssState(o.oss)
        for name, oss in self.view.osses.items():
            ruled_oss = self.store.snapshot.osses.get(name)
            if ruled_oss is None:   # an expansion's OSS the samples have not announced yet
                continue
            oss.cpu_percent = ruled_oss.cpu_percent
            oss.mem_percent = ruled_oss.mem_percent
            oss.lnet_load = ruled_oss.lnet_load
            oss.sample_time_s = ruled_oss.sample_time_s
        for ost in self.view.osts:
            ruled = seen.get(ost.index)
            if ruled is None:
                continue
            ost.write_latency_s = ruled.write_latency_s
            ost.write_bytes_per_s = ruled.write_bytes_per_s
            ost.write_in_flight = ruled.write_in_flight
            ost.write_totals = ruled.write_totals
            ost.failed_over = ruled.failed_over
            ost.sample_time_s = ruled.sample_time_s
            ost.active = ruled.active
            ost.flags = (ost.flags & ~OstFlag.DEGRADED) | (ruled.flags & OstFlag.DEGRADED)
            if ruled.oss != ost.oss:
                ost.oss = ruled.oss
                if ost.oss not in self.view.osses:
                    self.view.osses[ost.oss] = OssState(ost.oss)


__all__ = ["MdsView"]
