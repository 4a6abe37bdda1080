"""The discrete-time simulation loop: replay records against a cluster under one policy.

Components mirror Lustre (Paul et al. 2017, Section IV-A1): clients replay trace records;
the MDS/MDT turns each first write of a file into a create and asks the placement
policy (the mapper's real code) for the OST list; OSTs store RAID0 stripes and serve
transfers at the bandwidth they share; OSSes carry CPU/memory load from what their OSTs
serve (:mod:`lustre_alloc.simulator.models`).

Time advances in steps of ``step_s`` (1 s by default). Records whose timestamp falls in
``[t, t+step)`` start at ``t``. Between changes of the set of active transfers the
rates are constant, so steps with no transfer in flight are skipped in bulk (their
per-step metrics are the idle values). The MDS's view of OST space is its statfs cache,
refreshed when older than ``statfs_interval_s`` at the time of a create (LOD refreshes a
stale cache before allocating); the OSS loads the mapper sees are the collectors' last
sample, refreshed every ``stats_interval_s``.
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import numpy as np

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.policies.placement import SteersLustre, PlacementPolicy
from lustre_alloc.simulator.cluster import GIB, MIB, SimCluster
from lustre_alloc.simulator.network.model import NetworkModel
from lustre_alloc.simulator.inflight import SimFile, SimTransfer
from lustre_alloc.simulator.network.transfers import Storage
from lustre_alloc.simulator.mds_view import MdsView
from lustre_alloc.simulator.transfer_book import TransferBook
from lustre_alloc.simulator.client_ops import ClientOps
from lustre_alloc.simulator.create_path import CreatePath
from lustre_alloc.simulator.job_io import AppIo, JobBook, JobIo
from lustre_alloc.simulator.oracle import PerfectInformation, SimulationTruth
from lustre_alloc.simulator.rebalance.plan_event import REBALANCE_JOB, Rebalancer
from lustre_alloc.simulator.scenario import Scenario
from lustre_alloc.traces.format import TraceRecord

HOUR_S = 3600.0


@dataclass
class RunResult:
    """Everything measured in one run of one policy.

    Arrays: ``hours`` (H+1,), ``ost_used_hourly`` and ``ost_free_hourly`` (H+1, N) bytes
    sampled at each hour boundary (hour 0 = initial state); ``oss_cpu_max_mean`` and
    ``oss_cpu_mean`` (steps,) per-step OSS CPU max/mean ratio and mean CPU%;
    ``mds_cpu`` (steps,) MDS CPU%; ``alloc_ns`` (creates,) decision time per request.
    """
    policy: str
    scenario: str
    step_s: float
    ost_capacity_bytes: np.ndarray
    hours: np.ndarray
    ost_used_hourly: np.ndarray
    ost_free_hourly: np.ndarray
    oss_cpu_max_mean: np.ndarray
    oss_cpu_mean: np.ndarray
    mds_cpu: np.ndarray
    alloc_ns: np.ndarray
    apps: dict[str, AppIo]
    counters: Counter
    notes: Counter
    wall_s: float = 0.0
    records: int = 0
    rebalance_log: list = field(default_factory=list)
    jobs: dict[str, JobIo] = field(default_factory=dict)
    file_write_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    file_read_s: np.ndarray = field(default_factory=lambda: np.zeros(0))


class Simulation:
    """One policy's run over one scenario.

    Parts: the MDS's view of the OSTs and the sample path into it
    (:class:`~lustre_alloc.simulator.mds_view.MdsView`), the transfers in flight
    (:class:`~lustre_alloc.simulator.transfer_book.TransferBook`), and here the records, creates, jobs'
    statistics and the step loop. :mod:`lustre_alloc.simulator.rebalance.plan_event` drives migrations through the
    public methods :meth:`start_record`, :meth:`add_transfer` and the two parts.

    Args:
        scenario: the validated scenario.
        cluster: the cluster at t=0 (not modified; the run copies what it changes).
        policy: the placement policy instance (fresh per run).
        records: the time-ordered records to replay.
        network: the network model (rate caps).
        progress: optional callback ``(simulated_s, total_s)``.
        unmanaged_jobs: jobids whose creates go through Lustre's own allocator
            (``scenario.unmanaged_allocator``), not ``policy``.
        size_hints: jobid -> what its creates say of a file's size
            (:func:`lustre_alloc.simulator.workload.size_hints`; absent: ``expected_bytes`` 0).
        held_at_start: run with the events' state at t = 0 held throughout
            (:func:`lustre_alloc.simulator.events.held_at_start`): the day before a warm start.
        file_sizes: file id -> its size once its writes are done
            (:func:`lustre_alloc.simulator.file_sizes.final_sizes`): the shim's close reports and the
            ``"final"`` size hint (:class:`lustre_alloc.simulator.create_path.CreatePath`); None: neither.
    """

    def __init__(self, scenario: Scenario, cluster: SimCluster, policy: PlacementPolicy,
                 records: Iterable[TraceRecord], network: NetworkModel,
                 progress: Callable[[float, float], None] | None = None,
                 unmanaged_jobs: frozenset[str] = frozenset(),
                 size_hints: Mapping[str, str | int] | None = None, held_at_start: bool = False,
                 file_sizes: Mapping[str, int] | None = None):
        from lustre_alloc.simulator.events import added_osts, held_at_start as hold, transition_times
        from lustre_alloc.simulator.fail_slow import realise
        self.sc = scenario
        self.events = realise(scenario.events, cluster.ost_count, scenario.duration_s, scenario.seed)
        """The scenario's events with this run's draws (fail-slow drives) made concrete."""
        if held_at_start:
            self.events = hold(self.events)
        self.initial_osts = cluster.ost_count
        self.initial_osses = len(cluster.oss_names)
        if added_osts(scenario.events):
            cluster = _expanded(cluster, scenario)
        self.cl = cluster
        self.unmanaged = unmanaged_jobs
        lustre_policy = None
        if unmanaged_jobs:
            # The site's LOD settings, if the scenario gives them for this allocator.
            from lustre_alloc.mapper.policies.registry import build_policy
            lustre_policy = build_policy(scenario.unmanaged_allocator, scenario.policy_params,
                                         seed=scenario.seed)
        self.io = JobBook(cluster.ost_count, cluster.ost_oss, unmanaged_jobs)
        self.transitions = transition_times(self.events)
        self.present = np.arange(cluster.ost_count) < self.initial_osts
        self.policy = policy
        self.watcher = policy if isinstance(policy, SteersLustre) else None
        """The policy when it steers Lustre from every sample (:meth:`_sample_for_watcher`)."""
        self.records = iter(records)
        self.network = network
        self.progress = progress
        n = cluster.ost_count
        self.used = cluster.used_bytes.astype(float).copy()
        self.capacity = cluster.capacity_bytes.astype(float)
        self.pos_of_index = {int(ix): p for p, ix in enumerate(cluster.ost_index)}
        self.counters: Counter = Counter()
        self.creates = CreatePath(policy, lustre_policy, unmanaged_jobs, self.counters, size_hints,
                                  scenario.pfl, file_sizes)
        self.io.on_close = self.creates.closed
        if isinstance(policy, PerfectInformation):
            policy.attach(SimulationTruth(self))     # the reference reads the true state
        self.mds = MdsView(scenario, cluster, self.used, self.present, self.initial_osses,
                           network.oss_link_bytes_s)
        self.watch: MdsView | None = None
        """The steering policy's own view, fed every sample interval (:meth:`_sample_for_watcher`)."""
        if self.watcher is not None:
            self.watch = MdsView(scenario, cluster, self.used, self.present, self.initial_osses,
                                 network.oss_link_bytes_s)
            self.watch.readings = self.mds.readings      # one set of counters, two readers
            self.watch.job_readings = self.mds.job_readings
            self.watch.mdt_job_readings = self.mds.mdt_job_readings
        s = len(cluster.oss_names)
        self.oss_bytes_s = np.zeros(s)
        self.oss_ops_s = np.zeros(s)
        self.oss_in_bytes_s = np.zeros(s)   # written (received), bytes/s
        self.storage = Storage(ost_oss=cluster.ost_oss, oss_count=s,
                               ost_bandwidth_bytes_s=cluster.bandwidth_bytes_s,
                               ost_read_bandwidth_bytes_s=cluster.read_bandwidth_bytes_s,
                               oss_cap_bytes_s=cluster.oss_cap_bytes_s,
                               ost_latency_s=cluster.latency_s)
        self.base_storage = self.storage
        self.state = None               # lustre_alloc.simulator.events.EffectiveState when events exist
        self.creates_this_step = 0
        self.mds_cpu_last = scenario.mds_model.cpu_idle_percent  # MDS CPU% of the last busy step
        self.book = TransferBook(n, network, capped=scenario.rebalance is not None)
        self.book.on_leave = self.mds.job_readings.settle
        self.ost_served_bytes = np.zeros(n)
        """Bytes each OST position served (read and written) so far."""
        self.ops = ClientOps(scenario, self.used, self.capacity, lambda: self.present,
                             self.pos_of_index, self.book, self._create, self.add_transfer,
                             self.counters)
        self.files = self.ops.files
        """Path -> file, the files that exist now (the same dict as ``ops.files``)."""
        if scenario.cluster.initial_fill.files_gib:
            self.counters["initial_files"] = self.ops.adopt_initial_fill(
                scenario.cluster.initial_fill.files_gib, 1 << 20)
        self.rebal = Rebalancer(self, scenario.rebalance) if scenario.rebalance else None
        self.ops.rebal = self.rebal

    @property
    def view(self) -> ClusterSnapshot:
        """The snapshot the policies see (:attr:`MdsView.view`)."""
        return self.mds.view

    # -- MDS side --------------------------------------------------------------------
    def refresh_statfs(self, now: float) -> None:
        """The MDS's statfs of every OST now."""
        self.mds.refresh_statfs(now, self.used, self.capacity)

    def _refresh_stats(self, now: float, mds: MdsView | None = None) -> None:
        cpu = self.sc.oss_model.cpu_percent(self.oss_bytes_s, self.oss_ops_s)
        mem = self.sc.oss_model.mem_percent(self.oss_bytes_s)
        out = self.oss_bytes_s - self.oss_in_bytes_s
        (mds or self.mds).refresh_stats(now, cpu, mem, self.oss_in_bytes_s, out,
                                        self.used, self.capacity, self.present, self.state,
                                        inflight=self.book.remaining())

    def _sample_for_watcher(self, now: float) -> None:
        """A policy that steers Lustre (:class:`SteersLustre`) sees every sample interval,
        as the mapper's steering loop does live, not only the snapshots of creates. It sees
        them through a view of its own (:attr:`watch`, the same readings and sample path),
        so the allocator's view at creates is exactly what it would be without it, and the
        other policies keep the create-time samples (their numbers stay as measured)."""
        w = self.watch
        if w.statfs_due(now):
            w.refresh_statfs(now, self.used, self.capacity)
        self._refresh_stats(now, w)
        w.view.time_s = now
        self.watcher.observe(w.view)

    def _apply_events(self, now: float) -> None:
        """Recompute the servers' state from the events active at ``now``."""
        from lustre_alloc.simulator.events import effective_state, storage_under
        cl = self.cl
        st = effective_state(self.events, now, cl.ost_oss, len(cl.oss_names), self.initial_osts)
        self.state = st
        self.present = st.present
        self.book.sync()
        self.storage = storage_under(st, cl, self.base_storage)
        self.book.dirty = True
        self.counters["event_transitions"] += 1

    def _create(self, rec: TraceRecord, now: float) -> SimFile | None:
        """A file's first write: the MDS asks the policy (or, for a job that does not
        preload the shim, Lustre's own allocator, which the mapper never hears of) for
        its layout on the MDS's view."""
        mds = self.mds
        if mds.statfs_due(now):
            self.refresh_statfs(now)
        if mds.stats_due(now):
            self._refresh_stats(now)
        view = mds.view
        view.time_s = now
        view.mds_cpu_percent = self.mds_cpu_last
        app = self.io.app(rec.jobid)
        placed = self.creates.place(view, rec, app)
        if placed is None:
            return None
        app.creates += 1
        mds.mdt_job_readings.created(rec.jobid, now)
        self.counters["creates"] += 1
        self.creates_this_step += 1
        osts = np.array([self.pos_of_index[i] for part in placed for i in part], dtype=np.int64)
        comps: tuple = ()
        if self.sc.pfl:
            # each component's extent and its slots in ``osts``
            slots = np.cumsum([0] + [len(part) for part in placed])
            starts = [0] + [end for end, _ in self.sc.pfl[:-1]]
            comps = tuple((s, end, int(slot), len(part)) for s, (end, _), slot, part
                          in zip(starts, self.sc.pfl, slots, placed))
        return SimFile(job=rec.jobid, osts=osts, stripe_size=rec.stripe_size,
                       landed=np.zeros(len(osts)), last_write_s=now, comps=comps,
                       close_at=self.creates.close_at(rec))

    # -- records ---------------------------------------------------------------------
    def start_record(self, rec: TraceRecord, now: float) -> None:
        """Replay one trace record at ``now`` (:meth:`ClientOps.record`)."""
        self.ops.record(rec, now)

    def add_transfer(self, tr: SimTransfer) -> None:
        """Start a transfer; a job's (not a migration's) also enters its job statistics."""
        if tr.nbytes <= 0:
            return
        tr.client = self.network.client_of(tr.job)
        self.book.add(tr)
        if tr.job != REBALANCE_JOB:          # a migration is not a job's I/O
            self.io.started(tr, self.base_storage)

    # -- transfers -------------------------------------------------------------------
    def _advance(self, now: float, dt: float) -> None:
        """Move every transfer forward by ``dt`` seconds; land bytes; finish transfers."""
        s = len(self.cl.oss_names)
        step = self.book.advance(now, dt, self.storage)
        if step is None:
            self.oss_bytes_s = np.zeros(s)
            self.oss_ops_s = np.zeros(s)
            self.oss_in_bytes_s = np.zeros(s)
            return
        self.used += step.landed
        st = self.storage
        self.mds.readings.step(step.read, step.written, step.sharing,
                               st.ost_read_bandwidth_bytes_s if st.ost_read_bandwidth_bytes_s is not None
                               else st.ost_bandwidth_bytes_s, st.ost_bandwidth_bytes_s,
                               st.ost_latency_s)
        over = self.used - self.capacity
        if (over > 0).any():
            self.counters["bytes_lost_enospc"] += float(over[over > 0].sum())
            np.minimum(self.used, self.capacity, out=self.used)
        self.ost_served_bytes += step.ost_bytes
        ost_oss = self.storage.ost_oss
        self.oss_bytes_s = np.bincount(ost_oss, step.ost_bytes, minlength=s) / dt
        self.oss_ops_s = np.bincount(ost_oss, step.ost_ops, minlength=s) / dt
        self.oss_in_bytes_s = np.bincount(ost_oss, step.written, minlength=s) / dt
        for tr, finish in step.finished:
            self._finished(tr, finish)

    def _finished(self, tr: SimTransfer, finish: float) -> None:
        if tr.job == REBALANCE_JOB:      # not an application's I/O
            self.rebal.transfer_done(tr, finish)
        else:
            self.io.finished(tr, finish)

    # -- main loop -------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to ``scenario.duration_s``; returns the measurements."""
        wall0 = time.perf_counter()
        sc = self.sc
        dt = sc.step_s
        steps = int(math.ceil(sc.duration_s / dt))
        series = _Series.new(steps, int(sc.duration_s // HOUR_S), self._used_now(), sc)
        wake = _Wakeups(next_purge=sc.purge.interval_s if sc.purge.enabled else math.inf,
                        transitions=list(self.transitions))
        pending = next(self.records, None)
        records = 0
        k = 0
        last_progress = 0
        while k < steps:
            if not len(self.book) and not self.book.dirty:
                k = self._skip_idle(k, dt, pending, wake)
            now = k * dt
            self.creates_this_step = self.ops.meta_this_step = 0
            end = now + dt
            if wake.transitions and wake.transitions[0] < end:
                while wake.transitions and wake.transitions[0] < end:
                    wake.transitions.pop(0)
                self._apply_events(now)
            while pending is not None and pending.timestamp_s < end:
                self.start_record(pending, now)
                records += 1
                pending = next(self.records, None)
            self._step(k, now, dt, series)
            if self.watch is not None and self.watch.stats_due(end):
                self._sample_for_watcher(end)
            if end >= wake.next_purge:
                self.ops.purge(end)
                wake.next_purge += sc.purge.interval_s
            if self.rebal is not None:
                self.rebal.tick(end)
            while wake.next_hour <= series.hours and end >= wake.next_hour * HOUR_S:
                series.used_hourly[wake.next_hour] = self._used_now()
                wake.next_hour += 1
            k += 1
            if self.progress and k - last_progress >= 3600:
                self.progress(min(k * dt, sc.duration_s), sc.duration_s)
                last_progress = k
        if self.progress:
            self.progress(sc.duration_s, sc.duration_s)
        return _result(self, series, records, time.perf_counter() - wall0)

    def _used_now(self) -> np.ndarray:
        """Used bytes per OST position, NaN where an OST does not exist yet."""
        return self.used if self.present.all() else np.where(self.present, self.used, np.nan)

    def _skip_idle(self, k: int, dt: float, pending: TraceRecord | None, wake: "_Wakeups") -> int:
        """Nothing in flight: the step of the next thing that happens (a record, an event,
        an hour boundary, a purge, a rebalance wake-up or the end), skipped to in bulk
        (the idle steps' metrics keep their idle values)."""
        sc = self.sc
        nxt = pending.timestamp_s if pending is not None else math.inf
        if wake.transitions:
            nxt = min(nxt, wake.transitions[0])
        target = min(nxt, wake.next_hour * HOUR_S, wake.next_purge, sc.duration_s,
                     self.rebal.next_wake_s() if self.rebal is not None else math.inf)
        skip = int(target // dt) - k
        return k + skip - 1 if skip > 1 else k

    def _step(self, k: int, now: float, dt: float, series: "_Series") -> None:
        """Advance the transfers one step and record the step's OSS and MDS load."""
        sc = self.sc
        if len(self.book) or self.book.dirty:
            self._advance(now, dt)
            cpu = sc.oss_model.cpu_percent(self.oss_bytes_s, self.oss_ops_s)
            mean = float(cpu.mean())
            series.cpu_mean[k] = mean
            series.cpu_ratio[k] = float(cpu.max()) / mean if mean > 0 else 1.0
        else:
            self.oss_bytes_s[:] = 0.0
            self.oss_ops_s[:] = 0.0
            self.oss_in_bytes_s[:] = 0.0
        meta = self.ops.meta_this_step
        if self.creates_this_step or meta:
            series.mds_cpu[k] = sc.mds_model.cpu_percent(self.creates_this_step / dt, meta / dt)
        # What a monitor on the MDS would read at the next create: the last step's load.
        self.mds_cpu_last = float(series.mds_cpu[k])


@dataclass
class _Series:
    """A run's time series: used bytes per OST at each hour boundary (hour 0 = start),
    and per step the OSS CPU max/mean and mean, and the MDS CPU."""
    hours: int
    used_hourly: np.ndarray
    cpu_ratio: np.ndarray
    cpu_mean: np.ndarray
    mds_cpu: np.ndarray

    @classmethod
    def new(cls, steps: int, hours: int, used0: np.ndarray, sc: Scenario) -> "_Series":
        used_h = np.zeros((hours + 1, len(used0)))
        used_h[0] = used0
        return cls(hours, used_h, np.ones(steps, dtype=np.float32),
                   np.full(steps, sc.oss_model.cpu_idle_percent, dtype=np.float32),
                   np.full(steps, sc.mds_model.cpu_idle_percent, dtype=np.float32))


@dataclass
class _Wakeups:
    """When the loop must stop skipping: the next hour boundary, purge and event."""
    next_purge: float
    transitions: list[float]
    next_hour: int = 1


def _expanded(cl: SimCluster, sc: Scenario) -> SimCluster:
    """``cl`` with the OSTs and OSSes every ``add_osts`` event will add appended (in event
    order), so that arrays keep their shape through the run. New OST indices follow the
    highest existing one; new OSSes are named ``oss<k>`` after the existing ones."""
    from dataclasses import replace
    n = cl.ost_count
    cap = [cl.capacity_bytes]
    bw = [cl.bandwidth_bytes_s]
    rbw = [cl.read_bandwidth_bytes_s if cl.read_bandwidth_bytes_s is not None else cl.bandwidth_bytes_s]
    lat = [cl.latency_s if cl.latency_s is not None else np.zeros(n)]
    ost_oss = [cl.ost_oss]
    names = list(cl.oss_names)
    oss_cap = [cl.oss_cap_bytes_s] if cl.oss_cap_bytes_s is not None else None
    next_index = int(cl.ost_index.max()) + 1
    index = [cl.ost_index]
    for e in sorted(sc.events, key=lambda e: (e.at_s, e.index)):
        if e.kind != "add_osts":
            continue
        per = e.osts_per_oss or sc.cluster.osts_per_oss
        size = e.ost_size_gib * GIB if e.ost_size_gib else float(np.median(cl.capacity_bytes))
        b = e.bandwidth_mib_s * MIB if e.bandwidth_mib_s else float(np.median(cl.bandwidth_bytes_s))
        cap.append(np.full(e.count, size))
        bw.append(np.full(e.count, b))
        rbw.append(np.full(e.count, b if cl.read_bandwidth_bytes_s is None
                           else float(np.median(cl.read_bandwidth_bytes_s))))
        lat.append(np.full(e.count, float(np.median(lat[0]))))
        k = np.arange(e.count) // per
        ost_oss.append(len(names) + k)
        new_oss = int(k.max()) + 1
        names += [f"oss{len(names) + j}" for j in range(new_oss)]
        if oss_cap is not None:
            oss_cap.append(np.full(new_oss, float(np.median(cl.oss_cap_bytes_s))))
        index.append(np.arange(next_index, next_index + e.count))
        next_index += e.count
    total = sum(len(c) for c in cap)
    return replace(cl, oss_names=names, ost_index=np.concatenate(index),
                   ost_oss=np.concatenate(ost_oss), capacity_bytes=np.concatenate(cap),
                   used_bytes=np.concatenate([cl.used_bytes, np.zeros(total - n)]),
                   bandwidth_bytes_s=np.concatenate(bw),
                   read_bandwidth_bytes_s=None if cl.read_bandwidth_bytes_s is None else np.concatenate(rbw),
                   latency_s=None if cl.latency_s is None else np.concatenate(lat),
                   oss_cap_bytes_s=None if oss_cap is None else np.concatenate(oss_cap))


def _result(sim: Simulation, series: "_Series", records: int, wall_s: float) -> RunResult:
    """The run's measurements, once it ended (unfinished transfers counted and closed)."""
    sc = sim.sc
    sim.counters["transfers_unfinished"] = len(sim.book)
    if isinstance(sim.policy, SteersLustre):
        for name, n in sim.policy.action_counts().items():
            sim.counters[f"steer_{name}"] = n
    jobs_left = []
    for tr in sim.book.transfers:
        if tr.job == REBALANCE_JOB:
            sim.counters["rebalance_transfers_unfinished"] += 1
        else:
            jobs_left.append(tr)
    sim.io.close(jobs_left)
    ft = sim.ops.times()
    wt = ft[:, 1] - ft[:, 0]
    rt = ft[:, 3] - ft[:, 2]
    used_h = series.used_hourly
    return RunResult(policy=sim.policy.name, scenario=sc.name, step_s=sc.step_s,
                     ost_capacity_bytes=sim.capacity.copy(),
                     hours=np.arange(series.hours + 1, dtype=float), ost_used_hourly=used_h,
                     ost_free_hourly=sim.capacity[None, :] - used_h,
                     oss_cpu_max_mean=series.cpu_ratio, oss_cpu_mean=series.cpu_mean,
                     mds_cpu=series.mds_cpu,
                     alloc_ns=np.array(sim.creates.alloc_ns, dtype=np.int64), apps=sim.io.apps,
                     counters=sim.counters, notes=sim.creates.notes, wall_s=wall_s,
                     records=records, jobs=sim.io.jobs,
                     file_write_s=wt[np.isfinite(wt)], file_read_s=rt[np.isfinite(rt)],
                     rebalance_log=(sim.rebal.log + [x for e in sim.rebal.evacuations
                                                     for x in e.log])
                     if sim.rebal is not None else [])
