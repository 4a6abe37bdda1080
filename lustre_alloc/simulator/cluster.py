"""The simulated servers' static description and initial fill, built from a scenario.

OST ``i`` of a generated cluster sits on OSS ``i // osts_per_oss`` (``oss0``...), as
``mkfs.lustre --index`` numbering usually follows servers. A real ``lfs df`` snapshot
(:mod:`lustre_alloc.traces.lfs_df`) gives real OST sizes and used space; an ``lctl dl -t`` OST map
gives the real OST -> OSS assignment, else OSTs are grouped ``osts_per_oss`` at a time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstState
from lustre_alloc.simulator.scenario import ClusterSpec, ScenarioError

KIB = 1024
GIB = 1 << 30
MIB = 1 << 20


@dataclass
class SimCluster:
    """Static cluster description plus the initial used space.

    Attributes:
        oss_names: OSS names, shape (S,).
        ost_index: Lustre OST index of each simulated OST, shape (N,).
        ost_oss: OSS position (into ``oss_names``) of each OST, shape (N,).
        capacity_bytes: OST sizes, shape (N,).
        used_bytes: used space at t=0, shape (N,).
        bandwidth_bytes_s: OST write bandwidths, shape (N,).
        read_bandwidth_bytes_s: OST read bandwidths, shape (N,) (None: the write values).
        latency_s: per-request service latency of each OST, seconds, shape (N,) (None: 0).
        oss_cap_bytes_s: throughput limit of each OSS (min of its NIC/LNet and CPU limits),
            bytes/s, shape (S,) (None: unlimited).
        osd: the OSTs' OSD, ``ldiskfs`` or ``zfs`` (what their collectors read).
    """
    oss_names: list[str]
    ost_index: np.ndarray
    ost_oss: np.ndarray
    capacity_bytes: np.ndarray
    used_bytes: np.ndarray
    bandwidth_bytes_s: np.ndarray
    read_bandwidth_bytes_s: np.ndarray | None = None
    latency_s: np.ndarray | None = None
    oss_cap_bytes_s: np.ndarray | None = None
    osd: str = "ldiskfs"

    @property
    def uniform(self) -> bool:
        """True for today's model: one bandwidth for reads and writes, no latency, no OSS cap."""
        return self.read_bandwidth_bytes_s is None and self.latency_s is None \
            and self.oss_cap_bytes_s is None

    @property
    def ost_count(self) -> int:
        return int(self.ost_index.shape[0])

    def snapshot(self, used_bytes: np.ndarray | None = None) -> ClusterSnapshot:
        """A mapper :class:`ClusterSnapshot` of this cluster (t=0 state by default)."""
        used = self.used_bytes if used_bytes is None else used_bytes
        osts = []
        for i in range(self.ost_count):
            total = int(self.capacity_bytes[i] // KIB)
            free = max(0, total - int(used[i] // KIB))
            osts.append(OstState(index=int(self.ost_index[i]), oss=self.oss_names[self.ost_oss[i]],
                                 kbytes_total=total, kbytes_free=free, kbytes_avail=free))
        return ClusterSnapshot(osts=osts, osses={n: OssState(n) for n in self.oss_names})


def build_cluster(spec: ClusterSpec, seed: int) -> SimCluster:
    """Build the cluster, its initial fill and per-target performance (deterministic
    for ``seed``).

    Raises:
        ScenarioError: an ``lfs df`` snapshot or filesystem that does not exist.
        TargetValueError: a per-target value that does not fit the cluster (list
            length, range).
    """
    fill = spec.initial_fill
    if fill.mode == "lfs_df":
        return _performance(spec, _from_lfs_df(spec, 0.0))
    n = spec.oss_count * spec.osts_per_oss
    capacity = np.full(n, spec.ost_size_gib * GIB)
    if fill.mode == "explicit":
        used_frac = np.asarray(fill.used_fraction, dtype=float)
    else:
        rng = np.random.default_rng(seed)
        used_frac = rng.uniform(fill.cold_fraction[0], fill.cold_fraction[1], size=n)
        hot = rng.choice(n, size=fill.hot_osts, replace=False)
        used_frac[hot] = fill.hot_fraction
    return _performance(spec, SimCluster(
        oss_names=[f"oss{s}" for s in range(spec.oss_count)],
        ost_index=np.arange(n), ost_oss=np.arange(n) // spec.osts_per_oss,
        capacity_bytes=capacity, used_bytes=np.floor(capacity * used_frac),
        bandwidth_bytes_s=np.zeros(n)))


def _performance(spec: ClusterSpec, cl: SimCluster) -> SimCluster:
    """Fill in the per-OST and per-OSS performance arrays (units: bytes/s, s)."""
    n, s = cl.ost_count, len(cl.oss_names)
    # TargetValueError propagates; runner.prepare names the scenario file.
    bw = spec.ost_bandwidth_mib_s
    # A constant keeps today's exact arithmetic (value * MIB, then np.full).
    cl.bandwidth_bytes_s = (np.full(n, bw.constant * MIB) if bw.is_constant
                            else bw.resolve(n) * MIB)
    if spec.ost_read_bandwidth_mib_s is not None:
        cl.read_bandwidth_bytes_s = spec.ost_read_bandwidth_mib_s.resolve(n) * MIB
    if spec.ost_latency_ms is not None:
        lat = spec.ost_latency_ms.resolve(n, allow_zero=True) / 1000.0
        cl.latency_s = lat if lat.any() else None
    caps = [t.resolve(s) * MIB for t in (spec.oss_nic_mib_s, spec.oss_cpu_mib_s) if t is not None]
    if caps:
        cl.oss_cap_bytes_s = np.minimum.reduce(caps)
    cl.osd = spec.osd
    return cl


def _from_lfs_df(spec: ClusterSpec, bw: float) -> SimCluster:
    """The cluster of a real ``lfs df`` snapshot (bandwidth ``bw`` everywhere until
    :func:`_performance` sets it)."""
    from lustre_alloc.traces.lfs_df import read_lctl_dl, read_lfs_df
    fill = spec.initial_fill
    df = read_lfs_df(fill.path)
    if fill.snapshot >= len(df.snapshots):
        raise ScenarioError(f"{fill.path}: snapshot {fill.snapshot} requested, "
                            f"the file has {len(df.snapshots)}")
    fss = df.snapshots[fill.snapshot].filesystems
    if fill.filesystem not in fss:
        raise ScenarioError(f"{fill.path}: no file system {fill.filesystem!r} in snapshot "
                            f"{fill.snapshot} (has: {', '.join(sorted(fss))})")
    osts = sorted(fss[fill.filesystem].osts, key=lambda o: o.index)
    if not osts:
        raise ScenarioError(f"{fill.path}: file system {fill.filesystem!r} has no OSTs")
    nid_of: dict[int, str] = {}
    if fill.ost_map is not None:
        dl = read_lctl_dl(fill.ost_map)
        nid_of = dl.snapshots[0].ost_nids.get(fill.filesystem, {}) if dl.snapshots else {}
        missing = [o.index for o in osts if o.index not in nid_of]
        if missing:
            raise ScenarioError(f"{fill.ost_map}: no OSS for OSTs {missing[:5]} of {fill.filesystem}")
    names: list[str] = []
    pos: dict[str, int] = {}
    ost_oss = np.empty(len(osts), dtype=np.int64)
    for k, o in enumerate(osts):
        name = nid_of.get(o.index, f"oss{k // spec.osts_per_oss}")
        if name not in pos:
            pos[name] = len(names)
            names.append(name)
        ost_oss[k] = pos[name]
    capacity = np.array([o.kbytes_total * KIB for o in osts], dtype=float)
    # lfs df "Used" excludes root-reserved blocks; "Available" is what new objects get.
    used = capacity - np.array([o.kbytes_avail * KIB for o in osts], dtype=float)
    return SimCluster(oss_names=names, ost_index=np.array([o.index for o in osts]),
                      ost_oss=ost_oss, capacity_bytes=capacity, used_bytes=used,
                      bandwidth_bytes_s=np.full(len(osts), bw))
