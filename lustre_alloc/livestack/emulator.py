"""Emulated Lustre servers for the live stack: directories of statistics files in the real
formats, driven by the simulator's OST model, for real collectors to read.

Each emulated OSS owns a root directory laid out as a Lustre 2.15 server (the collectors'
``--root``, ``lustre_alloc/collectors/locate.py``)::

    sys/fs/lustre/obdfilter/<fs>-OSTxxxx/{kbytestotal,kbytesfree,kbytesavail,filestotal,filesfree}
    proc/fs/lustre/obdfilter/<fs>-OSTxxxx/{stats,job_stats}
    sys/kernel/debug/lustre/osd-ldiskfs/<fs>-OSTxxxx/brw_stats      (debugfs from 2.15, LU-14927)
    sys/kernel/debug/lnet/stats                                     (2.11+, LU-8066)
    sys/fs/lustre/{health_check,version}

The tunables ``obdfilter.<ost>.degraded`` (each OSS) and ``osp.<ost>-osc-MDT0000.
max_create_count`` (the emulated MDS, :attr:`EmulatedCluster.mds_root`) are written once and
then left to ``lctl set_param`` (the steering agents, :mod:`lustre_alloc.collectors.lustre_params`); the
emulated MDS's allocator (:meth:`EmulatedCluster.snapshot`) honours both as LOD does, from
the values read at the last :meth:`EmulatedCluster.flush` (a statfs interval late, as live).

A failover (:meth:`EmulatedCluster.fail_over`, :meth:`EmulatedCluster.fail_back`) moves an
OST's obdfilter/osd directories to its partner's root, as mounting it there does.

The formats are those of the real files (fixtures in ``tests/fixtures/lustre/``; the
readers in ``lustre_alloc/collectors/readers/`` document each with a real example). Every file is
rewritten atomically (temporary file in the same directory, then ``rename``), so a reader
never sees half a file; cumulative counters only grow, as in the kernel.

What drives them is the simulator's model of an OST (:mod:`lustre_alloc.simulator.cluster`,
:mod:`lustre_alloc.simulator.models`): capacity, initial fill and bandwidth come from a scenario's
cluster (:func:`lustre_alloc.simulator.cluster.build_cluster`); a file of ``size`` bytes striped over
``k`` OSTs holds :func:`lustre_alloc.simulator.models.raid0_bytes_per_ost` on each; a write RPC of 1 MiB
on an OST with ``w`` files growing on it in an interval takes ``w * 1 MiB / bandwidth``
(the engine's write latency, ``(queued + 1) * MiB / bandwidth``, published by
:meth:`lustre_alloc.simulator.mds_view.MdsView.refresh_stats`, seen from inside the queue). Not emulated: reads, CPU and
memory (the collectors read the real host's), MDTs.
"""
from __future__ import annotations

import math
import os
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from lustre_alloc.collectors.readers.brw_stats import IN_FLIGHT_BUCKETS
from lustre_alloc.collectors.reduce import log2_bucket
from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.common.fsname import target_name
from lustre_alloc.common.record_file import RecordTail
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.mapper.state.ost_health import statfs_flags
from lustre_alloc.simulator.cluster import KIB, MIB, SimCluster
from lustre_alloc.simulator.models import RPC_BYTES, raid0_bytes_per_ost, rpc_io_time_s

FSNAME = "demofs"
MDS_NAME = "mds0"
"""Directory of the emulated MDS under the cluster's root."""
OSP_MAX_CREATE_COUNT = 20000
"""``osp.*.max_create_count`` default (``OST_MAX_PRECREATE``, lustre/include/obd.h)."""
LUSTRE_VERSION = "2.15.3"
PAGE_BYTES = 4096
FILES_TOTAL = 1 << 26
"""Inodes of an emulated OST (ldiskfs formats one per 64 KiB... plenty: never the limit)."""


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: write a temporary file beside it, then rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(text)
    os.replace(tmp, path)


def bucket_label(bucket: int) -> str:
    """brw_stats row label: 1, 2 ... 512, 1K ... 512K, 1M ..., 1G ... (``osd_brw_stats``)."""
    for suffix, unit in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if bucket >= unit and bucket % unit == 0:
            return f"{bucket // unit}{suffix}"
    return str(bucket)


@dataclass
class _Counter:
    """One lprocfs counter: samples and, for byte/time counters, min/max/sum/sumsq."""
    samples: int = 0
    minimum: int = 0
    maximum: int = 0
    total: int = 0
    sumsq: int = 0

    def add(self, n: int, each: int) -> None:
        """Count ``n`` events of ``each`` units."""
        if n <= 0:
            return
        self.minimum = each if self.samples == 0 else min(self.minimum, each)
        self.maximum = max(self.maximum, each)
        self.samples += n
        self.total += n * each
        self.sumsq += n * each * each


@dataclass
class EmulatedOst:
    """One OST: space, objects and the cumulative counters of its statistics files.

    Units: bytes (``capacity_bytes``, ``used_bytes``), bytes/s (``bandwidth_bytes_s``).
    """
    index: int
    oss: str
    capacity_bytes: float
    used_bytes: float
    bandwidth_bytes_s: float
    objects: int = 0
    write_bytes: _Counter = field(default_factory=_Counter)
    write_usecs: _Counter = field(default_factory=_Counter)
    ops: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    jobs: dict[str, dict[str, _Counter]] = field(default_factory=dict)
    io_time_ms: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    io_size: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    pages: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    in_flight: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    pending_bytes: float = 0.0
    pending_writers: set[str] = field(default_factory=set)
    mds_flags: OstFlag = OstFlag.NONE
    """The statfs state bits the emulated MDS last derived (ENOSPC keeps hysteresis)."""
    tunable_flags: OstFlag = OstFlag.NONE
    """DEGRADED / NOPRECREATE from the tunables, as read at the last flush."""

    @property
    def name(self) -> str:
        return target_name(FSNAME, self.index)

    def job(self, jobid: str) -> dict[str, _Counter]:
        return self.jobs.setdefault(jobid, defaultdict(_Counter))


class EmulatedCluster:
    """The emulated OSSes of one file system, built from a simulator cluster.

    Args:
        cluster: servers, capacities, initial fill and bandwidths (``build_cluster``).
        root: directory under which each OSS gets ``<root>/<oss name>/`` as its proc/sys
            root.
    """

    def __init__(self, cluster: SimCluster, root: str | os.PathLike[str]):
        self.cluster = cluster
        self.root = Path(root)
        self.start_time = time.time()
        self.osts: list[EmulatedOst] = []
        for p in range(cluster.ost_count):
            self.osts.append(EmulatedOst(
                index=int(cluster.ost_index[p]), oss=cluster.oss_names[cluster.ost_oss[p]],
                capacity_bytes=float(cluster.capacity_bytes[p]),
                used_bytes=float(cluster.used_bytes[p]),
                bandwidth_bytes_s=float(cluster.bandwidth_bytes_s[p])))
        self.by_index = {o.index: o for o in self.osts}
        self.lnet: dict[str, list[int]] = {name: [0] * 11 for name in cluster.oss_names}
        self.flushes = 0
        for name in cluster.oss_names:
            self.oss_root(name).mkdir(parents=True, exist_ok=True)
        self.flush()

    # ------------------------------------------------------------------ queries
    @property
    def oss_names(self) -> list[str]:
        return list(self.cluster.oss_names)

    def oss_root(self, oss: str) -> Path:
        """The proc/sys root of one OSS (a collector's ``--root``)."""
        return self.root / oss

    def used_bytes(self) -> np.ndarray:
        """Used bytes per OST, in OST order, shape (N,)."""
        return np.array([o.used_bytes for o in self.osts])

    def capacity_bytes(self) -> np.ndarray:
        return np.array([o.capacity_bytes for o in self.osts])

    def snapshot(self) -> ClusterSnapshot:
        """What Lustre's own allocator on the emulated MDS sees now (space only)."""
        osts = []
        for o in self.osts:
            total = int(o.capacity_bytes // KIB)
            free = max(0, total - int(o.used_bytes // KIB))
            o.mds_flags = statfs_flags(o.mds_flags, free, total, FILES_TOTAL - o.objects)
            osts.append(OstState(index=o.index, oss=o.oss, kbytes_total=total,
                                 kbytes_free=free, kbytes_avail=free,
                                 files_free=FILES_TOTAL - o.objects,
                                 flags=o.mds_flags | o.tunable_flags))
        return ClusterSnapshot(osts=osts, osses={n: OssState(n) for n in self.oss_names},
                               time_s=time.time())

    # ------------------------------------------------------------------ changes
    def charge(self, osts: list[int], stripe_size: int, size_before: int, size_after: int,
               job: str, file_key: str) -> None:
        """A file striped RAID0 over ``osts`` grew (or shrank) from ``size_before`` to
        ``size_after`` bytes: move the bytes of each stripe (``raid0_bytes_per_ost``)."""
        if size_after == size_before or not osts:
            return
        k = len(osts)
        delta = (raid0_bytes_per_ost(size_after, stripe_size, k)
                 - raid0_bytes_per_ost(size_before, stripe_size, k))
        for index, d in zip(osts, delta.tolist()):
            ost = self.by_index.get(index)
            if ost is None or d == 0:
                continue
            ost.used_bytes = min(ost.capacity_bytes, max(0.0, ost.used_bytes + d))
            if d > 0:
                ost.pending_bytes += d
                ost.pending_writers.add(file_key)
                rpcs = max(1, math.ceil(d / RPC_BYTES))
                counters = ost.job(job)
                counters["write_bytes"].add(rpcs, int(d // rpcs))
                self.lnet[ost.oss][4] += rpcs          # recv_count
                self.lnet[ost.oss][8] += int(d)        # recv_length
            else:
                ost.ops["punch"] += 1

    def fail_over(self, oss: str, to_oss: str) -> list[int]:
        """OSS ``oss`` fails: its partner ``to_oss`` mounts its OSTs (Lustre failover), so
        their obdfilter/osd directories leave ``oss``'s proc/sys root and appear under
        ``to_oss``'s at the next :meth:`flush`. Returns the OST indices moved.

        Raises:
            ValueError: an unknown OSS.
        """
        if oss not in self.oss_names or to_oss not in self.oss_names:
            raise ValueError(f"unknown OSS in failover {oss!r} -> {to_oss!r}")
        moved = []
        for ost in self.osts:
            if ost.oss == oss:
                self._unmount(ost)
                ost.oss = to_oss
                moved.append(ost.index)
        self.flush()
        return moved

    def fail_back(self, osts: list[int], oss: str) -> None:
        """The OSTs ``osts`` are mounted on ``oss`` again (failback)."""
        for index in osts:
            ost = self.by_index[index]
            self._unmount(ost)
            ost.oss = oss
        self.flush()

    def _unmount(self, ost: EmulatedOst) -> None:
        root = self.oss_root(ost.oss)
        for base in ("sys/fs/lustre/obdfilter", "proc/fs/lustre/obdfilter",
                     "sys/kernel/debug/lustre/osd-ldiskfs"):
            shutil.rmtree(root / base / ost.name, ignore_errors=True)

    def create_objects(self, osts: list[int], job: str) -> None:
        """The MDS precreated one object per stripe for a new file."""
        for index in osts:
            ost = self.by_index.get(index)
            if ost is not None:
                ost.objects += 1
                ost.ops["create"] += 1
                ost.job(job)["create"].add(1, 0)

    def destroy_objects(self, osts: list[int], job: str) -> None:
        """A file was deleted: its objects go (its bytes are removed by :meth:`charge`)."""
        for index in osts:
            ost = self.by_index.get(index)
            if ost is not None:
                ost.objects = max(0, ost.objects - 1)
                ost.ops["destroy"] += 1
                ost.job(job)["destroy"].add(1, 0)

    def _account_interval(self) -> None:
        """Turn the bytes charged since the last flush into RPCs in the brw_stats
        histograms and the stats counters (the model in the module doc)."""
        for ost in self.osts:
            if ost.pending_bytes <= 0:
                continue
            rpcs = max(1, math.ceil(ost.pending_bytes / RPC_BYTES))
            writers = max(1, len(ost.pending_writers))
            io_ms = rpc_io_time_s(writers, ost.bandwidth_bytes_s) * 1000.0
            ost.write_bytes.add(rpcs, int(ost.pending_bytes // rpcs))
            ost.write_usecs.add(rpcs, int(io_ms * 1000))
            ost.ops["preprw"] += rpcs
            ost.ops["commitrw"] += rpcs
            ost.io_time_ms[log2_bucket(io_ms)] += rpcs
            ost.io_size[log2_bucket(RPC_BYTES)] += rpcs
            ost.pages[log2_bucket(RPC_BYTES // PAGE_BYTES)] += rpcs
            ost.in_flight[min(writers, IN_FLIGHT_BUCKETS - 1)] += rpcs
            ost.pending_bytes = 0.0
            ost.pending_writers.clear()

    # ------------------------------------------------------------------ files
    def flush(self) -> None:
        """Rewrite every statistics file of every OSS from the current state."""
        self._account_interval()
        now = time.time()
        for oss in self.oss_names:
            root = self.oss_root(oss)
            for base in ("sys/fs/lustre", "sys/kernel/debug/lnet"):
                (root / base).mkdir(parents=True, exist_ok=True)
            write_atomic(root / "sys/fs/lustre/health_check", "healthy\n")
            write_atomic(root / "sys/fs/lustre/version", f"lustre: {LUSTRE_VERSION}\n")
            self.lnet[oss][0] = 0
            write_atomic(root / "sys/kernel/debug/lnet/stats",
                         " ".join(str(v) for v in self.lnet[oss]) + "\n")
        for ost in self.osts:
            self._write_ost(ost, now)
            self._write_osp(ost)
            ost.tunable_flags = self.tunable_flags(ost)   # LOD sees them at the next statfs
        self.flushes += 1

    @property
    def mds_root(self) -> Path:
        """The emulated MDS's proc/sys root (an MDS collector's ``--root``): one OSP device
        per OST, ``sys/fs/lustre/osp/<fs>-OSTxxxx-osc-MDT0000/{active,max_create_count,
        prealloc_status}``."""
        return self.root / MDS_NAME

    def _write_osp(self, ost: EmulatedOst) -> None:
        """The OSP tunables of one OST on the emulated MDS, written once (``lctl set_param``
        changes them afterwards, as on a real MDS)."""
        d = self.mds_root / "sys/fs/lustre/osp" / f"{ost.name}-osc-MDT0000"
        d.mkdir(parents=True, exist_ok=True)
        for name, value in (("active", 1), ("max_create_count", OSP_MAX_CREATE_COUNT),
                            ("prealloc_status", 0)):
            if not (d / name).exists():
                write_atomic(d / name, f"{value}\n")

    def tunable_flags(self, ost: EmulatedOst) -> OstFlag:
        """DEGRADED when the OST's ``degraded`` is 1, NOPRECREATE when its OSP's
        ``max_create_count`` is 0 (as the MDS's LOD sees them; unreadable counts as unset)."""
        flags = OstFlag.NONE
        for path, bit, when in (
                (self.oss_root(ost.oss) / "sys/fs/lustre/obdfilter" / ost.name / "degraded",
                 OstFlag.DEGRADED, "1"),
                (self.mds_root / "sys/fs/lustre/osp" / f"{ost.name}-osc-MDT0000" /
                 "max_create_count", OstFlag.NOPRECREATE, "0")):
            try:
                if path.read_text().strip() == when:
                    flags |= bit
            except OSError:
                pass
        return flags

    def _write_ost(self, ost: EmulatedOst, now: float) -> None:
        root = self.oss_root(ost.oss)
        sysdir = root / "sys/fs/lustre/obdfilter" / ost.name
        procdir = root / "proc/fs/lustre/obdfilter" / ost.name
        osddir = root / "sys/kernel/debug/lustre/osd-ldiskfs" / ost.name
        for d in (sysdir, procdir, osddir):
            d.mkdir(parents=True, exist_ok=True)
        total = int(ost.capacity_bytes // KIB)
        free = max(0, total - int(math.ceil(ost.used_bytes / KIB)))
        for name, value in (("kbytestotal", total), ("kbytesfree", free), ("kbytesavail", free),
                            ("filestotal", FILES_TOTAL),
                            ("filesfree", FILES_TOTAL - ost.objects)):
            write_atomic(sysdir / name, f"{value}\n")
        if not (sysdir / "degraded").exists():   # a tunable: set by lctl, never rewritten here
            write_atomic(sysdir / "degraded", "0\n")
        stamp = f"{now:.9f}"
        start = f"{self.start_time:.9f}"
        elapsed = f"{now - self.start_time:.9f}"
        write_atomic(procdir / "stats", self._stats_text(ost, stamp, start, elapsed))
        write_atomic(procdir / "job_stats", self._job_stats_text(ost, stamp, start, elapsed))
        write_atomic(osddir / "brw_stats", self._brw_text(ost, stamp, start, elapsed))

    @staticmethod
    def _stats_text(ost: EmulatedOst, stamp: str, start: str, elapsed: str) -> str:
        # lprocfs_stats_seq_show (2.15): %-25s name, samples, [unit], min max sum sumsq.
        lines = [f"{'snapshot_time':<25} {stamp} secs.nsecs",
                 f"{'start_time':<25} {start} secs.nsecs",
                 f"{'elapsed_time':<25} {elapsed} secs.nsecs"]
        for name, c, unit in (("write_bytes", ost.write_bytes, "bytes"),
                              ("write", ost.write_usecs, "usecs")):
            if c.samples:
                lines.append(f"{name:<25} {c.samples} samples [{unit}] {c.minimum} {c.maximum} "
                             f"{c.total} {c.sumsq}")
        for name in ("create", "destroy", "punch", "preprw", "commitrw"):
            n = ost.ops.get(name, 0)
            if n:
                lines.append(f"{name:<25} {n} samples [usecs] 1 1 {n} {n}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _job_stats_text(ost: EmulatedOst, stamp: str, start: str, elapsed: str) -> str:
        # lprocfs_jobstats_seq_show (2.15): YAML, snapshot/start/elapsed in secs.nsecs.
        lines = ["job_stats:"]
        for jobid, counters in sorted(ost.jobs.items()):
            lines.append(f"- job_id:          {jobid}")
            lines.append(f"  snapshot_time:   {stamp} secs.nsecs")
            lines.append(f"  start_time:      {start} secs.nsecs")
            lines.append(f"  elapsed_time:    {elapsed} secs.nsecs")
            for name in ("read_bytes", "write_bytes"):
                c = counters.get(name) or _Counter()
                lines.append(f"  {name + ':':<16} {{ samples: {c.samples:>11}, unit: bytes, "
                             f"min: {c.minimum:>7}, max: {c.maximum:>7}, sum: {c.total:>15}, "
                             f"sumsq: {c.sumsq} }}")
            for name in ("create", "destroy", "punch"):
                c = counters.get(name) or _Counter()
                lines.append(f"  {name + ':':<16} {{ samples: {c.samples:>11}, unit: usecs, "
                             f"min: 0, max: 0, sum: 0, sumsq: 0 }}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _brw_text(ost: EmulatedOst, stamp: str, start: str, elapsed: str) -> str:
        # osd_brw_stats (osd-ldiskfs/osd_lproc.c, 2.15): time lines, then blocks of
        # "bucket: read % cum% | write % cum%"; rows from the first to the last used bucket.
        out = [f"snapshot_time:            {stamp} secs.nsecs",
               f"start_time:               {start} secs.nsecs",
               f"elapsed_time:             {elapsed} secs.nsecs", ""]
        blocks = (("pages per bulk r/w", "rpcs", ost.pages),
                  ("discontiguous pages", "rpcs", {}),
                  ("disk I/Os in flight", "ios", ost.in_flight),
                  ("I/O time (1/1000s)", "ios", ost.io_time_ms),
                  ("disk I/O size", "ios", ost.io_size))
        for title, unit, hist in blocks:
            out.append("                           read      |     write")
            out.append(f"{title:<22} {unit:<5} % cum % |  {unit:<8}    % cum %")
            used = sorted(b for b, n in hist.items() if n)
            total = sum(hist.values())
            if used:
                cum = 0
                bucket = used[0]
                linear = title == "disk I/Os in flight"
                while bucket <= used[-1]:
                    n = hist.get(bucket, 0)
                    cum += n
                    pct, cpct = (100 * n // total, 100 * cum // total) if total else (0, 0)
                    out.append(f"{bucket_label(bucket)}:\t\t{0:>10} {0:>3} {0:>3}   | "
                               f"{n:>4} {pct:>3} {cpct:>3}")
                    bucket = bucket + 1 if linear else bucket * 2
            out.append("")
        return "\n".join(out)


LOV_XATTR = "user.lustre_alloc.lov"
"""Where the shim's record backend reads a layout (liblustre_alloc/la_backend.c): the bytes
``LL_IOC_LOV_GETSTRIPE`` gives on Lustre."""


def lov_user_md_v1(osts: list[int], stripe_size: int) -> bytes:
    """A plain layout as ``LL_IOC_LOV_GETSTRIPE`` gives it for a file: ``lov_user_md_v1``
    (32 bytes) and one 24-byte ``lov_user_ost_data_v1`` per stripe
    (docs/reference/lustre-client-layout-api.md "Packed layouts")."""
    return ll.stored(list(osts), stripe_size)


@dataclass
class _Tracked:
    job: str
    osts: list[int]
    stripe_size: int
    charged_size: int = 0


class RecordFeed:
    """Feeds what programs under the shim wrote back into the emulated OSTs.

    Follows the shim's record (``LUSTRE_ALLOC_RECORD``, docs/client.md "Record format"):
    each new line names a created file, its OST list and stripe size (``result=layout``),
    or ``result=default`` when Lustre's allocator placed it, emulated here by the mapper's
    own ``lustre_qos`` (Lustre's QOS allocator, restated exactly) on the emulated space; the
    layout so chosen is written on the file as GETSTRIPE would give it (:data:`LOV_XATTR`),
    where the shim reads it back for a shadow report.
    :meth:`poll` then charges each tracked file's growth, RAID0, to its OSTs; a file that
    disappeared is deleted (its objects and bytes go).

    Args:
        cluster: the emulated OSTs to charge.
        record: the shim's record file.
        bytes_scale: emulated bytes per real byte written (the demo writes small files that
            stand for large ones).
        policy_params: ``[policy.lustre_qos]``-style tables for the emulated allocator.
    """

    def __init__(self, cluster: EmulatedCluster, record: str | os.PathLike[str],
                 bytes_scale: float = 1.0, policy_params: Mapping[str, Mapping[str, Any]] | None = None):
        from lustre_alloc.mapper.policies.registry import build_policy
        self.cluster = cluster
        self.record = Path(record)
        self.bytes_scale = bytes_scale
        self.files: dict[str, _Tracked] = {}
        self.lines: list[dict[str, str]] = []
        self._tail = RecordTail(self.record)
        # the emulated MDS's own allocator, with the site's LOD settings if given
        self._default = build_policy("lustre_qos", policy_params, gate=False)
        self.deleted = 0

    def _layout(self, rec: dict[str, str]) -> tuple[list[int], int]:
        if rec.get("result") == "layout" and rec.get("osts"):
            if rec.get("extents"):
                # composite: the emulated bytes go to every OST component's OSTs
                # (the emulator keeps no extents), the first component's stripe size
                parts = [p for p in rec["osts"].split(";") if p[:1].isdigit()]
                osts = list(dict.fromkeys(int(x) for p in parts for x in p.split(",")))
                sizes = [x for x in rec["stripe_size"].split(";") if x]
                return osts, int(sizes[0]) if sizes else MIB
            return [int(x) for x in rec["osts"].split(",")], int(rec["stripe_size"])
        from lustre_alloc.mapper.policies.placement import AllocationError, CreateRequest
        size = int(rec.get("req_size") or MIB)
        count = int(rec.get("req_count") or 1)
        try:
            placed = self._default.allocate(self.cluster.snapshot(), CreateRequest(
                jobid=rec.get("job", ""), stripe_count=count, stripe_size=size))
        except AllocationError:
            return [], size
        try:
            os.setxattr(rec.get("path", ""), LOV_XATTR, lov_user_md_v1(list(placed.osts), size))
        except OSError:
            pass                    # gone already: nobody reads its layout
        return list(placed.osts), size

    def poll(self) -> list[dict[str, str]]:
        """Read new record lines, charge growth and deletions; returns the new lines."""
        new = self._tail.read()
        for rec in new:
            path = rec.get("path", "")
            osts, stripe = self._layout(rec)
            self.files[path] = _Tracked(rec.get("job", ""), osts, stripe)
            self.cluster.create_objects(osts, rec.get("job", ""))
        self.lines.extend(new)
        gone = []
        for path, f in self.files.items():
            try:
                size = int(os.stat(path).st_size * self.bytes_scale)
            except FileNotFoundError:
                gone.append(path)
                continue
            if size != f.charged_size:
                self.cluster.charge(f.osts, f.stripe_size, f.charged_size, size, f.job, path)
                f.charged_size = size
        for path in gone:
            f = self.files.pop(path)
            self.cluster.charge(f.osts, f.stripe_size, f.charged_size, 0, f.job, path)
            self.cluster.destroy_objects(f.osts, f.job)
            self.deleted += 1
        return new
