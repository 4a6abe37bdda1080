"""The discrete-time simulation loop: replay records against a cluster under one policy.

Components mirror Lustre (Paul et al. 2017, Section IV-A1): clients replay trace records;
the MDS/MDT turns each first write of a file into a create and asks the placement
policy (the mapper's real code) for the OST list; OSTs store RAID0 stripes and serve
transfers at the bandwidth they share; OSSes carry CPU/memory load from what their OSTs
serve (:mod:`simulator.models`).

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
from typing import Callable, Iterable

import numpy as np

from mapper.state.cluster_state import ClusterSnapshot
from mapper.policies.placement import AllocationError, CreateRequest, PlacementPolicy
from simulator.cluster import GIB, KIB, MIB, SimCluster
from simulator.models import raid0_bytes_per_ost
from simulator.network.model import NetworkModel
from simulator.inflight import SimFile, SimTransfer
from simulator.network.transfers import Storage
from simulator.mds_view import MdsView
from simulator.transfer_book import TransferBook
from simulator.rebalance import REBALANCE_JOB, Rebalancer
from simulator.scenario import Scenario
from traces.format import TraceRecord

HOUR_S = 3600.0


def app_name(jobid: str) -> str:
    """The application a job id belongs to: replays ``job#k`` count as ``job``."""
    return jobid.split("#", 1)[0]


@dataclass
class AppStats:
    """Per-application totals. Bytes; seconds of transfer time (sum over transfers)."""
    bytes_written: float = 0.0
    bytes_read: float = 0.0
    io_time_s: float = 0.0
    transfers: int = 0
    creates: int = 0
    failed_creates: int = 0

    @property
    def mean_bandwidth_bytes_s(self) -> float:
        """Bytes moved / summed transfer time (0 when nothing moved)."""
        moved = self.bytes_written + self.bytes_read
        return moved / self.io_time_s if self.io_time_s > 0 else 0.0


PHASE_GAP_S = 60.0
"""A job with nothing in flight for this long starts a new I/O phase (ours: trace jobs of
the generators run all day; their checkpoints and iterations are the phases)."""


@dataclass
class JobStats:
    """One job's I/O (the user's metric). Seconds on the simulation clock.

    Attributes:
        first_io_s: start of its first transfer.
        last_byte_s: end of its last finished transfer.
        alone_s: lower bound of its I/O time alone on the idle cluster (no events, no
            other load): ``max(max over transfers (start - first_io + ideal), max over
            OSTs of its bytes there / that OST's bandwidth)``, ``ideal`` = the
            transfer's slowest stripe (with request latency and OSS limit) at full speed.
        managed: its creates went through the policy (else Lustre's allocator).
        background: replayed background traffic, not a user's job.
        unfinished: transfers still in flight (or stalled) at the end.
        phases: ``(first_io_s, last_byte_s, alone_s)`` of each I/O phase (phases are
            separated by >= :data:`PHASE_GAP_S` with nothing in flight).
    """
    first_io_s: float
    last_byte_s: float = -math.inf
    alone_s: float = 0.0
    managed: bool = True
    background: bool = False
    bytes: float = 0.0
    transfers: int = 0
    unfinished: int = 0
    inflight: int = 0
    phases: list = field(default_factory=list)
    busy_s: np.ndarray | None = None        # per OST: seconds at full bandwidth (job)
    ph_first: float = 0.0
    ph_last: float = -math.inf
    ph_alone: float = 0.0
    ph_busy_s: np.ndarray | None = None     # the same, current phase

    def close_phase(self) -> None:
        """End the current phase (if any byte of it landed)."""
        if self.ph_last > -math.inf:
            alone = max(self.ph_alone, float(self.ph_busy_s.max()))
            self.phases.append((self.ph_first, self.ph_last, alone))
        self.ph_busy_s[:] = 0.0
        self.ph_alone = 0.0
        self.ph_last = -math.inf

    @property
    def io_time_s(self) -> float:
        """First I/O to last byte (0 if nothing finished)."""
        return max(0.0, self.last_byte_s - self.first_io_s)

    @property
    def slowdown(self) -> float:
        """I/O time / alone time (1 = as if alone on the idle cluster)."""
        alone = max(self.alone_s, float(self.busy_s.max()) if self.busy_s is not None else 0.0)
        return self.io_time_s / alone if alone > 0 else 1.0


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
    apps: dict[str, AppStats]
    counters: Counter
    notes: Counter
    wall_s: float = 0.0
    records: int = 0
    rebalance_log: list = field(default_factory=list)
    jobs: dict[str, JobStats] = field(default_factory=dict)
    file_write_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    file_read_s: np.ndarray = field(default_factory=lambda: np.zeros(0))


class Simulation:
    """One policy's run over one scenario.

    Parts: the MDS's view of the OSTs and the sample path into it
    (:class:`~simulator.mds_view.MdsView`), the transfers in flight
    (:class:`~simulator.transfer_book.TransferBook`), and here the records, creates, jobs'
    statistics and the step loop. :mod:`simulator.rebalance` drives migrations through the
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
    """

    def __init__(self, scenario: Scenario, cluster: SimCluster, policy: PlacementPolicy,
                 records: Iterable[TraceRecord], network: NetworkModel,
                 progress: Callable[[float, float], None] | None = None,
                 unmanaged_jobs: frozenset[str] = frozenset()):
        from simulator.events import added_osts, transition_times
        self.sc = scenario
        self.initial_osts = cluster.ost_count
        self.initial_osses = len(cluster.oss_names)
        if added_osts(scenario.events):
            cluster = _expanded(cluster, scenario)
        self.cl = cluster
        self.unmanaged = unmanaged_jobs
        self.lustre_policy: PlacementPolicy | None = None
        if unmanaged_jobs:
            # The site's LOD settings, if the scenario gives them for this allocator.
            from mapper.policies.registry import build_policy
            self.lustre_policy = build_policy(scenario.unmanaged_allocator, scenario.policy_params,
                                              seed=scenario.seed)
        self.jobs: dict[str, JobStats] = {}
        self.file_times: list[list[float]] = []
        self.transitions = transition_times(scenario.events)
        self.present = np.arange(cluster.ost_count) < self.initial_osts
        self.policy = policy
        self.records = iter(records)
        self.network = network
        self.progress = progress
        n = cluster.ost_count
        self.used = cluster.used_bytes.astype(float).copy()
        self.capacity = cluster.capacity_bytes.astype(float)
        self.pos_of_index = {int(ix): p for p, ix in enumerate(cluster.ost_index)}
        self.files: dict[str, SimFile] = {}
        self.apps: dict[str, AppStats] = {}
        self.counters: Counter = Counter()
        self.notes: Counter = Counter()
        self.alloc_ns: list[int] = []
        self.mds = MdsView(scenario, cluster, self.used, self.present, self.initial_osses,
                           network.oss_link_bytes_s)
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
        self.state = None               # simulator.events.EffectiveState when events exist
        self.creates_this_step = 0
        self.meta_this_step = 0
        self.mds_cpu_last = scenario.mds_model.cpu_idle_percent  # MDS CPU% of the last busy step
        self.book = TransferBook(n, network, capped=scenario.rebalance is not None)
        self.ost_served_bytes = np.zeros(n)
        """Bytes each OST position served (read and written) so far."""
        self.rebal = Rebalancer(self, scenario.rebalance) if scenario.rebalance else None

    @property
    def view(self) -> ClusterSnapshot:
        """The snapshot the policies see (:attr:`MdsView.view`)."""
        return self.mds.view

    # -- MDS side --------------------------------------------------------------------
    def refresh_statfs(self, now: float) -> None:
        """The MDS's statfs of every OST now."""
        self.mds.refresh_statfs(now, self.used, self.capacity)

    def _refresh_stats(self, now: float) -> None:
        cpu = self.sc.oss_model.cpu_percent(self.oss_bytes_s, self.oss_ops_s)
        mem = self.sc.oss_model.mem_percent(self.oss_bytes_s)
        out = self.oss_bytes_s - self.oss_in_bytes_s
        # The simulator's brw_stats "I/O time": a 1 MiB write RPC queued behind the
        # transfers now sharing the OST's bandwidth (equal shares), seconds.
        queued = self.book.queued_per_ost(self.storage)
        with np.errstate(divide="ignore"):
            latency = (queued + 1) * MIB / self.storage.ost_bandwidth_bytes_s
        if self.storage.ost_latency_s is not None:
            latency = latency + self.storage.ost_latency_s
        self.mds.refresh_stats(now, latency, cpu, mem, self.oss_in_bytes_s, out,
                               self.used, self.capacity, self.present, self.state)

    def _apply_events(self, now: float) -> None:
        """Recompute the servers' state from the events active at ``now``."""
        from simulator.events import effective_state
        cl, base = self.cl, self.base_storage
        st = effective_state(self.sc.events, now, cl.ost_oss, len(cl.oss_names), self.initial_osts)
        self.state = st
        self.present = st.present
        w = cl.bandwidth_bytes_s * st.bw_factor
        r = (cl.read_bandwidth_bytes_s if cl.read_bandwidth_bytes_s is not None
             else cl.bandwidth_bytes_s) * st.bw_factor
        w = np.where(st.write_stalled, 0.0, w)
        r = np.where(st.read_stalled, 0.0, r)
        cap = None if base.oss_cap_bytes_s is None else base.oss_cap_bytes_s * st.oss_factor
        self.book.sync()
        self.storage = Storage(ost_oss=st.ost_oss, oss_count=len(cl.oss_names),
                               ost_bandwidth_bytes_s=w, ost_read_bandwidth_bytes_s=r,
                               oss_cap_bytes_s=cap, ost_latency_s=base.ost_latency_s)
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
        app = self.apps.setdefault(app_name(rec.jobid), AppStats())
        req = CreateRequest(jobid=rec.jobid, stripe_count=rec.stripe_count,
                            stripe_size=rec.stripe_size, expected_bytes=rec.bytes)
        managed = not (self.unmanaged and rec.jobid in self.unmanaged)
        policy = self.policy if managed else self.lustre_policy
        t0 = time.perf_counter_ns()
        try:
            placement = policy.allocate(view, req)
        except AllocationError as e:
            if managed:
                self.alloc_ns.append(time.perf_counter_ns() - t0)
            app.failed_creates += 1
            self.counters[f"create_failed_{type(e).__name__}"] += 1
            return None
        if managed:
            self.alloc_ns.append(time.perf_counter_ns() - t0)
            if placement.note:
                self.notes[placement.note.split(":")[0]] += 1
            if placement.fallback:
                self.notes[f"fallback {placement.fallback}"] += 1
        else:
            self.counters["creates_unmanaged"] += 1
        app.creates += 1
        self.counters["creates"] += 1
        self.creates_this_step += 1
        osts = np.array([self.pos_of_index[i] for i in placement.osts], dtype=np.int64)
        return SimFile(job=rec.jobid, osts=osts, stripe_size=rec.stripe_size,
                       landed=np.zeros(len(osts)), last_write_s=now)

    # -- records ---------------------------------------------------------------------
    def start_record(self, rec: TraceRecord, now: float) -> None:
        """Replay one trace record at ``now``: background load, a write (creating the
        file first), a read or a delete."""
        if rec.op == "write" and rec.ost is not None:
            # Background traffic (an LMT replay): loads the OST, lands no bytes.
            pos = self.pos_of_index.get(rec.ost)
            self.add_transfer(SimTransfer(True, rec.jobid, None, np.array([pos]),
                                          np.array([float(rec.bytes)]), float(rec.bytes),
                                          float(rec.bytes), rec.ops, now, lands=False))
            return
        if rec.op == "write":
            self._write(rec, now)
        elif rec.op == "read":
            self._read(rec, now)
        else:
            self.meta_this_step += 1
            self._delete(rec.file_id)

    def _write(self, rec: TraceRecord, now: float) -> None:
        f = self.files.get(rec.file_id)
        if f is None:
            f = self._create(rec, now)
            if f is None:
                self.counters["bytes_not_written"] += rec.bytes
                return
            self.files[rec.file_id] = f
        elif self.rebal is not None and self.rebal.migrating(rec.file_id):
            self.rebal.hold(rec.file_id, rec, now)   # blocking lfs migrate: writer waits
            return
        if rec.bytes == 0:
            return
        f.recent_bytes += rec.bytes
        k = len(f.osts)
        before = raid0_bytes_per_ost(f.size, f.stripe_size, k)
        f.size += rec.bytes
        delta = (raid0_bytes_per_ost(f.size, f.stripe_size, k) - before).astype(float)
        nz = np.nonzero(delta)[0]
        f.last_write_s = now
        f.transfers += 1
        self.add_transfer(SimTransfer(True, rec.jobid, f, f.osts[nz], delta[nz], float(rec.bytes),
                                      float(rec.bytes), rec.ops, now, stripe_pos=nz))

    def _read(self, rec: TraceRecord, now: float) -> None:
        self.meta_this_step += 1
        if rec.file_id:
            f = self.files.get(rec.file_id)
            if f is None or f.size == 0:
                self.counters["reads_of_missing_files"] += 1
                return
            f.recent_bytes += rec.bytes
            share = f.landed if f.landed.sum() > 0 else np.ones(len(f.osts))
            nz = np.nonzero(share)[0]
            per = share[nz] / share[nz].sum() * rec.bytes
            self.add_transfer(SimTransfer(False, rec.jobid, None, f.osts[nz], per, float(rec.bytes),
                                          float(rec.bytes), rec.ops, now, rfile=f))
        else:
            pos = self.pos_of_index.get(rec.ost)
            self.add_transfer(SimTransfer(False, rec.jobid, None, np.array([pos]),
                                          np.array([float(rec.bytes)]), float(rec.bytes),
                                          float(rec.bytes), rec.ops, now))

    def add_transfer(self, tr: SimTransfer) -> None:
        """Start a transfer; a job's (not a migration's) also enters its job statistics."""
        if tr.nbytes <= 0:
            return
        tr.client = self.network.client_of(tr.job)
        self.book.add(tr)
        if tr.job == REBALANCE_JOB:          # a migration: not a job's I/O
            return
        job = self.jobs.get(tr.job)
        if job is None:
            n = self.cl.ost_count
            job = self.jobs[tr.job] = JobStats(first_io_s=tr.start_s,
                                               managed=tr.job not in self.unmanaged and tr.lands,
                                               background=not tr.lands, busy_s=np.zeros(n),
                                               ph_first=tr.start_s, ph_busy_s=np.zeros(n))
        elif job.inflight == 0 and tr.start_s - job.ph_last >= PHASE_GAP_S:
            job.close_phase()
            job.ph_first = tr.start_s
        job.inflight += 1
        self._alone_bound(job, tr)
        if tr.write and tr.file is not None:
            tr.file.times[0] = min(tr.file.times[0], tr.start_s)
        elif tr.rfile is not None:
            tr.rfile.times[2] = min(tr.rfile.times[2], tr.start_s)

    def _alone_bound(self, job: JobStats, tr: SimTransfer) -> None:
        """Alone on the idle cluster (no events): the slowest stripe at full bandwidth."""
        base = self.base_storage
        bw = base.ost_bandwidth_bytes_s if tr.write or base.ost_read_bandwidth_bytes_s is None \
            else base.ost_read_bandwidth_bytes_s
        t = tr.per_ost / bw[tr.osts]
        if base.ost_latency_s is not None:
            t = t + tr.per_ost * (tr.ops / tr.nbytes) * base.ost_latency_s[tr.osts] / 8.0
        # A transfer's OSTs are distinct (a layout never repeats an OST): plain fancy-index
        # adds, much cheaper than np.add.at on these short arrays.
        job.busy_s[tr.osts] += t
        job.ph_busy_s[tr.osts] += t
        ideal = float(t.max())
        if base.oss_cap_bytes_s is not None:
            oss = self.cl.ost_oss[tr.osts]
            ideal = max(ideal, float((np.bincount(oss, tr.per_ost) / np.maximum(
                base.oss_cap_bytes_s[:oss.max() + 1], 1e-9)).max()))
        job.alone_s = max(job.alone_s, tr.start_s - job.first_io_s + ideal)
        job.ph_alone = max(job.ph_alone, tr.start_s - job.ph_first + ideal)

    def _delete(self, file_id: str) -> bool:
        if self.rebal is not None:
            self.rebal.on_delete(file_id)
        f = self.files.pop(file_id, None)
        if f is None:
            self.counters["deletes_of_missing_files"] += 1
            return False
        if f.transfers:
            for tr, done in self.book.cancel(lambda tr: tr.file is f):
                f.landed[tr.stripe_pos] += tr.per_ost * done
                self.counters["transfers_cancelled"] += 1
        np.subtract.at(self.used, f.osts, f.landed)
        np.maximum(self.used, 0.0, out=self.used)
        self.counters["files_deleted"] += 1
        self.file_times.append(f.times)
        return True

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
        self.mds.ost_written_bytes += step.written
        self.mds.ost_read_bytes += step.read
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
            return
        app = self.apps.setdefault(app_name(tr.job), AppStats())
        app.io_time_s += finish - tr.start_s
        app.transfers += 1
        job = self.jobs[tr.job]
        job.last_byte_s = max(job.last_byte_s, finish)
        job.ph_last = max(job.ph_last, finish)
        job.inflight -= 1
        job.bytes += tr.nbytes
        job.transfers += 1
        if tr.write:
            app.bytes_written += tr.nbytes
            if tr.file is not None:
                tr.file.landed[tr.stripe_pos] += tr.per_ost
                tr.file.transfers -= 1
                tr.file.times[1] = max(tr.file.times[1], finish)
        else:
            app.bytes_read += tr.nbytes
            if tr.rfile is not None:
                tr.rfile.times[3] = max(tr.rfile.times[3], finish)

    def _purge(self, now: float) -> None:
        p = self.sc.purge
        cap = self.capacity.sum() if self.present.all() else self.capacity[self.present].sum()
        if self.used.sum() / cap <= p.when_used_above:
            return
        old = [fid for fid, f in self.files.items()
               if f.transfers == 0 and now - f.last_write_s >= p.age_s]
        for fid in old:
            before = self.used.sum()
            self._delete(fid)
            self.counters["files_purged"] += 1
            self.counters["bytes_purged"] += before - self.used.sum()

    # -- main loop -------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to ``scenario.duration_s``; returns the measurements."""
        wall0 = time.perf_counter()
        sc = self.sc
        dt = sc.step_s
        steps = int(math.ceil(sc.duration_s / dt))
        hours = int(sc.duration_s // HOUR_S)
        n = self.cl.ost_count
        used_h = np.zeros((hours + 1, n))
        used_h[0] = self.used if self.present.all() else np.where(self.present, self.used, np.nan)
        cpu_ratio = np.ones(steps, dtype=np.float32)
        cpu_mean = np.full(steps, sc.oss_model.cpu_idle_percent, dtype=np.float32)
        mds_cpu = np.full(steps, sc.mds_model.cpu_idle_percent, dtype=np.float32)
        next_hour = 1
        next_purge = sc.purge.interval_s if sc.purge.enabled else math.inf
        transitions = list(self.transitions)
        pending = next(self.records, None)
        records = 0
        k = 0
        last_progress = 0
        while k < steps:
            now = k * dt
            # Skip idle steps in bulk: nothing in flight, next record later.
            if not len(self.book) and not self.book.dirty:
                nxt = pending.timestamp_s if pending is not None else math.inf
                if transitions:
                    nxt = min(nxt, transitions[0])
                target = min(nxt, next_hour * HOUR_S, next_purge, sc.duration_s,
                             self.rebal.next_wake_s() if self.rebal is not None else math.inf)
                skip = int(target // dt) - k
                if skip > 1:
                    k += skip - 1
                    now = k * dt
            self.creates_this_step = self.meta_this_step = 0
            end = now + dt
            if transitions and transitions[0] < end:
                while transitions and transitions[0] < end:
                    transitions.pop(0)
                self._apply_events(now)
            while pending is not None and pending.timestamp_s < end:
                self.start_record(pending, now)
                records += 1
                pending = next(self.records, None)
            if len(self.book) or self.book.dirty:
                self._advance(now, dt)
                cpu = sc.oss_model.cpu_percent(self.oss_bytes_s, self.oss_ops_s)
                mean = float(cpu.mean())
                cpu_mean[k] = mean
                cpu_ratio[k] = float(cpu.max()) / mean if mean > 0 else 1.0
            else:
                self.oss_bytes_s[:] = 0.0
                self.oss_ops_s[:] = 0.0
                self.oss_in_bytes_s[:] = 0.0
            if self.creates_this_step or self.meta_this_step:
                mds_cpu[k] = sc.mds_model.cpu_percent(self.creates_this_step / dt,
                                                      self.meta_this_step / dt)
            # What a monitor on the MDS would read at the next create: the last step's load.
            self.mds_cpu_last = float(mds_cpu[k])
            if end >= next_purge:
                self._purge(end)
                next_purge += sc.purge.interval_s
            if self.rebal is not None:
                self.rebal.tick(end)
            while next_hour <= hours and end >= next_hour * HOUR_S:
                used_h[next_hour] = self.used if self.present.all() else \
                    np.where(self.present, self.used, np.nan)
                next_hour += 1
            k += 1
            if self.progress and k - last_progress >= 3600:
                self.progress(min(k * dt, sc.duration_s), sc.duration_s)
                last_progress = k
        if self.progress:
            self.progress(sc.duration_s, sc.duration_s)
        self.counters["transfers_unfinished"] = len(self.book)
        for tr in self.book.transfers:
            if tr.job == REBALANCE_JOB:
                self.counters["rebalance_transfers_unfinished"] += 1
            else:
                self.jobs[tr.job].unfinished += 1
        for job in self.jobs.values():
            if not job.inflight:
                job.close_phase()
        self.file_times.extend(f.times for f in self.files.values())
        ft = np.array(self.file_times, dtype=float).reshape(-1, 4)
        wt = ft[:, 1] - ft[:, 0]
        rt = ft[:, 3] - ft[:, 2]
        return RunResult(policy=self.policy.name, scenario=sc.name, step_s=dt,
                         ost_capacity_bytes=self.capacity.copy(),
                         hours=np.arange(hours + 1, dtype=float), ost_used_hourly=used_h,
                         ost_free_hourly=self.capacity[None, :] - used_h,
                         oss_cpu_max_mean=cpu_ratio, oss_cpu_mean=cpu_mean, mds_cpu=mds_cpu,
                         alloc_ns=np.array(self.alloc_ns, dtype=np.int64), apps=self.apps,
                         counters=self.counters, notes=self.notes,
                         wall_s=time.perf_counter() - wall0, records=records, jobs=self.jobs,
                         file_write_s=wt[np.isfinite(wt)], file_read_s=rt[np.isfinite(rt)],
                         rebalance_log=self.rebal.log if self.rebal is not None else [])


def _expanded(cl: SimCluster, sc: Scenario) -> SimCluster:
    """``cl`` with the OSTs and OSSes every ``add_osts`` event will add appended (in event
    order), so that arrays keep their shape through the run. New OST indices follow the
    highest existing one; new OSSes are named ``oss<k>`` after the existing ones."""
    from dataclasses import replace
    n, s = cl.ost_count, len(cl.oss_names)
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
