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

from mapper.state.cluster_state import ClusterSnapshot, OstFlag
from mapper.policies.placement import AllocationError, CreateRequest, PlacementPolicy
from simulator.cluster import KIB, MIB, SimCluster
from simulator.models import raid0_bytes_per_ost
from simulator.network.model import NetworkModel, Storage, TransferSet
from simulator.scenario import Scenario
from traces.format import TraceRecord

HOUR_S = 3600.0


def app_name(job_id: str) -> str:
    """The application a job id belongs to: replays ``job#k`` count as ``job``."""
    return job_id.split("#", 1)[0]


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


@dataclass
class _File:
    job: str
    osts: np.ndarray            # simulated OST positions, stripe order
    stripe_size: int
    size: int = 0               # bytes the file will hold once its writes land
    landed: np.ndarray = field(default_factory=lambda: np.zeros(0))  # bytes landed per stripe
    last_write_s: float = 0.0
    transfers: int = 0          # in flight


@dataclass
class _Transfer:
    write: bool
    job: str
    file: _File | None
    osts: np.ndarray            # positions, only those with bytes
    per_ost: np.ndarray         # bytes per OST of this transfer
    nbytes: float
    remaining: float
    ops: int
    start_s: float
    stripe_pos: np.ndarray | None = None  # write: stripe slots of ``osts`` in the file
    client: int = 0             # client node (network model)


class Simulation:
    """One policy's run over one scenario.

    Args:
        scenario: the validated scenario.
        cluster: the cluster at t=0 (not modified; the run copies what it changes).
        policy: the placement policy instance (fresh per run).
        records: the time-ordered records to replay.
        network: the network model (rate caps).
        progress: optional callback ``(simulated_s, total_s)``.
    """

    def __init__(self, scenario: Scenario, cluster: SimCluster, policy: PlacementPolicy,
                 records: Iterable[TraceRecord], network: NetworkModel,
                 progress: Callable[[float, float], None] | None = None):
        self.sc = scenario
        self.cl = cluster
        self.policy = policy
        self.records = iter(records)
        self.network = network
        self.progress = progress
        n = cluster.ost_count
        self.used = cluster.used_bytes.astype(float).copy()
        self.capacity = cluster.capacity_bytes.astype(float)
        self.pos_of_index = {int(ix): p for p, ix in enumerate(cluster.ost_index)}
        self.files: dict[str, _File] = {}
        self.transfers: list[_Transfer] = []
        self.dirty = True
        self.apps: dict[str, AppStats] = {}
        self.counters: Counter = Counter()
        self.notes: Counter = Counter()
        self.alloc_ns: list[int] = []
        self.view: ClusterSnapshot = cluster.snapshot(self.used)
        self.view_state = [False] * n   # ENOSPC hysteresis per OST
        self.last_statfs_s = -math.inf
        self.last_stats_s = -math.inf
        self.oss_bytes_s = np.zeros(len(cluster.oss_names))
        self.oss_ops_s = np.zeros(len(cluster.oss_names))
        self.oss_in_bytes_s = np.zeros(len(cluster.oss_names))   # written (received), bytes/s
        self.storage = Storage(ost_oss=cluster.ost_oss, oss_count=len(cluster.oss_names),
                               ost_bandwidth_bytes_s=cluster.bandwidth_bytes_s,
                               ost_read_bandwidth_bytes_s=cluster.read_bandwidth_bytes_s,
                               oss_cap_bytes_s=cluster.oss_cap_bytes_s,
                               ost_latency_s=cluster.latency_s)
        self.creates_this_step = 0
        self.meta_this_step = 0
        self.ost_written_bytes = np.zeros(n)   # bytes landed per OST since the last stats sample
        self.mds_cpu_last = scenario.mds_model.cpu_idle_percent  # MDS CPU% of the last busy step
        self._rem: np.ndarray | None = None
        # Reserved-space watermarks (osp_precreate.c): low = max(1, KiB_total >> 20) MiB.
        self.enospc_low = np.maximum(1, (self.capacity // KIB).astype(np.int64) >> 20) * MIB
        self.enospc_high = 2 * self.enospc_low + MIB

    # -- MDS side --------------------------------------------------------------------
    def _refresh_statfs(self, now: float) -> None:
        avail = np.maximum(self.capacity - self.used, 0.0)
        for p, ost in enumerate(self.view.osts):
            kb = int(avail[p] // KIB)
            ost.kbytes_free = ost.kbytes_avail = kb
            full = self.view_state[p]
            full = avail[p] <= self.enospc_high[p] if full else avail[p] < self.enospc_low[p]
            self.view_state[p] = bool(full)
            ost.flags = (ost.flags | OstFlag.ENOSPC) if full else (ost.flags & ~OstFlag.ENOSPC)
        self.view.changed()
        self.last_statfs_s = now

    def _refresh_stats(self, now: float) -> None:
        cpu = self.sc.oss_model.cpu_percent(self.oss_bytes_s, self.oss_ops_s)
        mem = self.sc.oss_model.mem_percent(self.oss_bytes_s)
        # LNet load between the clients/MDS and each OSS: its busier link direction.
        lnet = self.network.lnet_load_percent(self.oss_in_bytes_s,
                                              self.oss_bytes_s - self.oss_in_bytes_s)
        for s, name in enumerate(self.cl.oss_names):
            oss = self.view.osses[name]
            oss.cpu_percent = float(cpu[s])
            oss.mem_percent = float(mem[s])
            oss.lnet_load = float(lnet[s])
            oss.sample_time_s = now
        # The simulator's brw_stats "I/O time": a 1 MiB write RPC queued behind the
        # transfers now sharing the OST's bandwidth (equal shares), seconds.
        if self.dirty:
            self._rebuild()
        queued = np.bincount(self._entry_ost, minlength=self.cl.ost_count)
        latency = (queued + 1) * MIB / self.storage.ost_bandwidth_bytes_s
        if self.storage.ost_latency_s is not None:
            latency = latency + self.storage.ost_latency_s
        for p, ost in enumerate(self.view.osts):
            ost.write_latency_s = float(latency[p])
            ost.sample_time_s = now
        # The collectors' per-OST write rate (obdfilter stats write_bytes over the
        # interval), bytes/s.
        span = now - self.last_stats_s
        if math.isfinite(span) and span > 0:
            rate = self.ost_written_bytes / span
            for p, ost in enumerate(self.view.osts):
                ost.write_bytes_per_s = float(rate[p])
        self.ost_written_bytes = np.zeros(self.cl.ost_count)
        self.view.changed()
        self.last_stats_s = now

    def _create(self, rec: TraceRecord, now: float) -> _File | None:
        if now - self.last_statfs_s >= self.sc.cluster.statfs_interval_s:
            self._refresh_statfs(now)
        if now - self.last_stats_s >= self.sc.cluster.stats_interval_s:
            self._refresh_stats(now)
        self.view.time_s = now
        self.view.mds_cpu_percent = self.mds_cpu_last
        app = self.apps.setdefault(app_name(rec.job_id), AppStats())
        req = CreateRequest(job_id=rec.job_id, stripe_count=rec.stripe_count,
                            stripe_size=rec.stripe_size, expected_bytes=rec.bytes)
        t0 = time.perf_counter_ns()
        try:
            placement = self.policy.allocate(self.view, req)
        except AllocationError as e:
            self.alloc_ns.append(time.perf_counter_ns() - t0)
            app.failed_creates += 1
            self.counters[f"create_failed_{type(e).__name__}"] += 1
            return None
        self.alloc_ns.append(time.perf_counter_ns() - t0)
        if placement.note:
            self.notes[placement.note.split(":")[0]] += 1
        if placement.fallback:
            self.notes[f"fallback {placement.fallback}"] += 1
        app.creates += 1
        self.counters["creates"] += 1
        self.creates_this_step += 1
        osts = np.array([self.pos_of_index[i] for i in placement.osts], dtype=np.int64)
        return _File(job=rec.job_id, osts=osts, stripe_size=rec.stripe_size,
                     landed=np.zeros(len(osts)), last_write_s=now)

    # -- records ---------------------------------------------------------------------
    def _start(self, rec: TraceRecord, now: float) -> None:
        if rec.op == "write":
            f = self.files.get(rec.file_id)
            if f is None:
                f = self._create(rec, now)
                if f is None:
                    self.counters["bytes_not_written"] += rec.bytes
                    return
                self.files[rec.file_id] = f
            if rec.bytes == 0:
                return
            k = len(f.osts)
            before = raid0_bytes_per_ost(f.size, f.stripe_size, k)
            f.size += rec.bytes
            delta = (raid0_bytes_per_ost(f.size, f.stripe_size, k) - before).astype(float)
            nz = np.nonzero(delta)[0]
            f.last_write_s = now
            f.transfers += 1
            self._add(_Transfer(True, rec.job_id, f, f.osts[nz], delta[nz], float(rec.bytes),
                                float(rec.bytes), rec.ops, now, stripe_pos=nz))
        elif rec.op == "read":
            self.meta_this_step += 1
            if rec.file_id:
                f = self.files.get(rec.file_id)
                if f is None or f.size == 0:
                    self.counters["reads_of_missing_files"] += 1
                    return
                share = f.landed if f.landed.sum() > 0 else np.ones(len(f.osts))
                nz = np.nonzero(share)[0]
                per = share[nz] / share[nz].sum() * rec.bytes
                self._add(_Transfer(False, rec.job_id, None, f.osts[nz], per, float(rec.bytes),
                                    float(rec.bytes), rec.ops, now))
            else:
                pos = self.pos_of_index.get(rec.ost)
                self._add(_Transfer(False, rec.job_id, None, np.array([pos]),
                                    np.array([float(rec.bytes)]), float(rec.bytes),
                                    float(rec.bytes), rec.ops, now))
        else:
            self.meta_this_step += 1
            self._delete(rec.file_id)

    def _add(self, tr: _Transfer) -> None:
        if tr.nbytes <= 0:
            return
        tr.client = self.network.client_of(tr.job)
        self.transfers.append(tr)
        self.dirty = True

    def _delete(self, file_id: str) -> bool:
        f = self.files.pop(file_id, None)
        if f is None:
            self.counters["deletes_of_missing_files"] += 1
            return False
        if f.transfers:
            self._sync()
            keep = []
            for tr in self.transfers:
                if tr.file is f:
                    done = (tr.nbytes - tr.remaining) / tr.nbytes
                    f.landed[tr.stripe_pos] += tr.per_ost * done
                    self.counters["transfers_cancelled"] += 1
                else:
                    keep.append(tr)
            self.transfers = keep
            self.dirty = True
        np.subtract.at(self.used, f.osts, f.landed)
        np.maximum(self.used, 0.0, out=self.used)
        self.counters["files_deleted"] += 1
        return True

    # -- transfers -------------------------------------------------------------------
    def _sync(self) -> None:
        """Write the remaining bytes held in ``_rem`` back into the transfer objects.

        ``_rem`` is aligned with the first ``len(_rem)`` transfers (later ones were
        appended since the last rebuild and hold their own ``remaining``). Afterwards
        the objects are authoritative until the next rebuild.
        """
        if self._rem is not None:
            for tr, rem in zip(self.transfers, self._rem):
                tr.remaining = float(rem)
            self._rem = None
            self.dirty = True

    def _rebuild(self) -> None:
        self._sync()
        trs = self.transfers
        f = len(trs)
        if f == 0:
            self._rem = np.zeros(0)
            self._rate = np.zeros(0)
            self._entry_flow = np.zeros(0, dtype=np.int64)
            self._entry_ost = np.zeros(0, dtype=np.int64)
            self._entry_frac = np.zeros(0)
            self._entry_write = np.zeros(0, dtype=bool)
            self._ops_per_byte = np.zeros(0)
            self.dirty = False
            return
        lens = [len(t.osts) for t in trs]
        self._entry_flow = np.repeat(np.arange(f), lens)
        self._entry_ost = np.concatenate([t.osts for t in trs])
        self._entry_frac = np.concatenate([t.per_ost / t.nbytes for t in trs])
        self._entry_write = np.repeat(np.array([t.write for t in trs]), lens)
        self._rem = np.array([t.remaining for t in trs])
        self._ops_per_byte = np.array([t.ops / t.nbytes for t in trs])
        ts = TransferSet(self._entry_flow, self._entry_ost, self._entry_frac, f,
                         np.array([t.write for t in trs]), np.array([t.client for t in trs]),
                         self._ops_per_byte)
        self._rate = self.network.rates(ts, self.storage)
        self.dirty = False

    def _advance(self, now: float, dt: float) -> None:
        """Move every transfer forward by ``dt`` seconds; land bytes; finish transfers."""
        if self.dirty:
            self._rebuild()
        n = self.cl.ost_count
        s = len(self.cl.oss_names)
        if not len(self._rem):
            self.oss_bytes_s = np.zeros(s)
            self.oss_ops_s = np.zeros(s)
            self.oss_in_bytes_s = np.zeros(s)
            return
        progress = np.minimum(self._rate * dt, self._rem)
        self._rem -= progress
        entry_bytes = progress[self._entry_flow] * self._entry_frac
        written = np.bincount(self._entry_ost, entry_bytes * self._entry_write, minlength=n)
        self.used += written
        self.ost_written_bytes += written
        over = self.used - self.capacity
        if (over > 0).any():
            self.counters["bytes_lost_enospc"] += float(over[over > 0].sum())
            np.minimum(self.used, self.capacity, out=self.used)
        ost_bytes = np.bincount(self._entry_ost, entry_bytes, minlength=n)
        ost_ops = np.bincount(self._entry_ost, entry_bytes * self._ops_per_byte[self._entry_flow],
                              minlength=n)
        self.oss_bytes_s = np.bincount(self.cl.ost_oss, ost_bytes, minlength=s) / dt
        self.oss_ops_s = np.bincount(self.cl.ost_oss, ost_ops, minlength=s) / dt
        self.oss_in_bytes_s = np.bincount(self.cl.ost_oss, written, minlength=s) / dt
        done = np.nonzero(self._rem <= 1e-6 * np.maximum(1.0, self._rem + progress))[0]
        if len(done):
            keep_mask = np.ones(len(self.transfers), dtype=bool)
            for i in done:
                tr = self.transfers[i]
                rate = self._rate[i]
                finish = now + (progress[i] / rate if rate > 0 else dt)
                app = self.apps.setdefault(app_name(tr.job), AppStats())
                app.io_time_s += finish - tr.start_s
                app.transfers += 1
                if tr.write:
                    app.bytes_written += tr.nbytes
                    tr.file.landed[tr.stripe_pos] += tr.per_ost
                    tr.file.transfers -= 1
                else:
                    app.bytes_read += tr.nbytes
                keep_mask[i] = False
            self.transfers = [t for t, k in zip(self.transfers, keep_mask) if k]
            self._rem = self._rem[keep_mask]
            self.dirty = True

    def _purge(self, now: float) -> None:
        p = self.sc.purge
        if self.used.sum() / self.capacity.sum() <= p.when_used_above:
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
        used_h[0] = self.used
        cpu_ratio = np.ones(steps, dtype=np.float32)
        cpu_mean = np.full(steps, sc.oss_model.cpu_idle_percent, dtype=np.float32)
        mds_cpu = np.full(steps, sc.mds_model.cpu_idle_percent, dtype=np.float32)
        next_hour = 1
        next_purge = sc.purge.interval_s if sc.purge.enabled else math.inf
        pending = next(self.records, None)
        records = 0
        k = 0
        last_progress = 0
        while k < steps:
            now = k * dt
            # Skip idle steps in bulk: nothing in flight, next record later.
            if not self.transfers and not self.dirty:
                nxt = pending.timestamp_s if pending is not None else math.inf
                target = min(nxt, next_hour * HOUR_S, next_purge, sc.duration_s)
                skip = int(target // dt) - k
                if skip > 1:
                    k += skip - 1
                    now = k * dt
            self.creates_this_step = self.meta_this_step = 0
            end = now + dt
            while pending is not None and pending.timestamp_s < end:
                self._start(pending, now)
                records += 1
                pending = next(self.records, None)
            if self.transfers or self.dirty:
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
            while next_hour <= hours and end >= next_hour * HOUR_S:
                used_h[next_hour] = self.used
                next_hour += 1
            k += 1
            if self.progress and k - last_progress >= 3600:
                self.progress(min(k * dt, sc.duration_s), sc.duration_s)
                last_progress = k
        if self.progress:
            self.progress(sc.duration_s, sc.duration_s)
        self.counters["transfers_unfinished"] = len(self.transfers)
        return RunResult(policy=self.policy.name, scenario=sc.name, step_s=dt,
                         ost_capacity_bytes=self.capacity.copy(),
                         hours=np.arange(hours + 1, dtype=float), ost_used_hourly=used_h,
                         ost_free_hourly=self.capacity[None, :] - used_h,
                         oss_cpu_max_mean=cpu_ratio, oss_cpu_mean=cpu_mean, mds_cpu=mds_cpu,
                         alloc_ns=np.array(self.alloc_ns, dtype=np.int64), apps=self.apps,
                         counters=self.counters, notes=self.notes,
                         wall_s=time.perf_counter() - wall0, records=records)
