"""A snapshot of the cluster as an allocator sees it: OSTs, OSSes and OST pools.

The fields mirror what Lustre's LOD allocator reads from each OST's ``statfs`` (through
the OSP device on the MDS) and what our collectors publish per OSS (Paul et al. 2017,
Table I). Units are in the field names (KiB, percent, seconds).

Flag values are Lustre's ``enum obd_statfs_state`` (lustre_idl.h; restated in
``docs/reference/lustre-lod-allocator.md``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntFlag
from typing import Any, Iterable, Mapping

from lustre_alloc.mapper.state.write_totals import WriteTotals


class OstFlag(IntFlag):
    """``os_state`` bits of an OST's statfs (``OS_STATFS_*`` in lustre_idl.h)."""
    NONE = 0
    DEGRADED = 0x1      # RAID degraded/rebuilding: QOS and RR's first passes avoid it
    READONLY = 0x2      # mounted read-only: EROFS
    NOPRECREATE = 0x4   # max_create_count=0 (being drained): ENOBUFS
    ENOSPC = 0x20       # below the OSP low watermark: no new objects
    ENOINO = 0x40       # out of inodes (ffree < 32)


@dataclass(slots=True)
class OstState:
    """One OST as seen by the MDS.

    Attributes:
        index: OST index (the ``NNNN`` of ``fsname-OSTNNNN``).
        oss: name (NID or host) of the OSS serving it.
        kbytes_total: ``kbytestotal``, KiB.
        kbytes_free: ``kbytesfree``, KiB (includes root-reserved blocks).
        kbytes_avail: ``kbytesavail``, KiB (what new objects may use; LOD's ``bavail``).
        files_free: ``filesfree``, free inodes (LOD's ``ffree``).
        files_precreated: objects the MDS has precreated on it (``fprecreated``);
            RR's first pass and QOS skip an OST with none.
        active: the OSP connection is up (``lod_tgt_desc.ltd_active``).
        flags: statfs state bits.
        write_latency_s: recent mean write I/O time, seconds, from ``brw_stats``
            "I/O time" histograms (None when unknown).
        sample_time_s: when the statistics behind this state were read, seconds on
            the snapshot's clock (None when never sampled: a static or simulated view).
        write_bytes_per_s: bytes/s written to the OST over the last interval (obdfilter
            ``stats`` ``write_bytes`` rate; None when unknown).
        write_in_flight: mean write disk I/Os in flight when each was submitted, itself
            included, over the last interval (brw_stats "disk I/Os in flight"; None when
            unknown or no write ran).
        failed_over: served by an OSS other than the one that first published it (its
            failover partner, Lustre's ``--servicenode``/failover NIDs: the partner's
            collector publishes the target once it is mounted there).
        write_totals: sums over every sample the state store folded
            (:class:`~lustre_alloc.mapper.state.write_totals.WriteTotals`; None when never sampled):
            a reader that looks at some samples only takes the delta since its last look.
    """
    index: int
    oss: str
    kbytes_total: int
    kbytes_free: int
    kbytes_avail: int
    files_free: int = 1 << 24
    files_precreated: int = 128
    active: bool = True
    flags: OstFlag = OstFlag.NONE
    write_latency_s: float | None = None
    sample_time_s: float | None = None
    write_bytes_per_s: float | None = None
    write_in_flight: float | None = None
    failed_over: bool = False
    write_totals: WriteTotals | None = None

    @property
    def kbytes_used(self) -> int:
        """Used space, KiB (``kbytestotal - kbytesfree``, as ``lfs df`` prints it)."""
        return self.kbytes_total - self.kbytes_free


@dataclass(slots=True)
class OssState:
    """One OSS: the server-level load the paper's cost model uses (Section III-C).

    Attributes:
        name: host name or NID.
        cpu_percent: CPU utilisation, 0..100.
        mem_percent: memory utilisation, 0..100.
        lnet_load: normalised LNet load between the MDS and this OSS, 0..100
            (e.g. send+recv bytes/s over link capacity); 0 when unknown.
        sample_time_s: when this server's last sample was taken, seconds on the
            snapshot's clock (None when never sampled).
    """
    name: str
    cpu_percent: float = 0.0
    mem_percent: float = 0.0
    lnet_load: float = 0.0
    sample_time_s: float | None = None


@dataclass(slots=True)
class ClusterSnapshot:
    """Everything an allocation policy may look at for one decision.

    Attributes:
        osts: OSTs in index order (Lustre's LOD target array order).
        osses: OSS name -> state; every ``OstState.oss`` must be a key.
        pools: pool name -> OST indices (``lctl pool_new``/``pool_add``).
        time_s: the decision time, seconds (used by QOS's penalty ageing).
        mds_cpu_percent: CPU utilisation of the MDS, 0..100 (the paper runs prediction
            and flow only below 70%, Section III-D).
        version: a producer that updates the snapshot in place (the mapper's state
            store, the simulator's MDS view) bumps it whenever OSTs, OSSes or pools
            change, so a policy may keep what it derived from them until it changes.
            None (the default) promises nothing: derive afresh every time. ``time_s``
            and ``mds_cpu_percent`` may change without a bump.
        ost_table: the same OST/OSS state as :class:`lustre_alloc.mapper.state.arrays.OstTable`
            arrays, kept current in place by a producer that has one (the state
            store); None: policies derive it from the objects.
        job_sizes: the producer's :class:`lustre_alloc.mapper.state.job_sizes.JobBytesPerCreate`
            (bytes written per file created, per jobid, from job_stats), or None.
    Policies never mutate a snapshot.
    """
    osts: list[OstState]
    osses: dict[str, OssState]
    pools: dict[str, frozenset[int]] = field(default_factory=dict)
    time_s: float = 0.0
    mds_cpu_percent: float = 0.0
    version: int | None = None
    ost_table: Any = None
    job_sizes: Any = None

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for ost in self.osts:
            if ost.index in seen:
                raise ValueError(f"duplicate OST index {ost.index}")
            seen.add(ost.index)
            if ost.oss not in self.osses:
                self.osses[ost.oss] = OssState(ost.oss)

    def changed(self) -> None:
        """Mark an in-place update (bumps ``version``, starting it at 1)."""
        self.version = (self.version or 0) + 1

    def ost_by_index(self) -> dict[int, OstState]:
        """Map OST index -> state."""
        return {o.index: o for o in self.osts}


def osts_by_oss(osts: Iterable[OstState]) -> dict[str, list[OstState]]:
    """Group OSTs by their OSS, keeping OST order inside each group and first-seen
    order of the OSSes (the order OSTs connected, which Lustre's ties keep)."""
    groups: dict[str, list[OstState]] = {}
    for ost in osts:
        groups.setdefault(ost.oss, []).append(ost)
    return groups


def make_uniform_cluster(oss_count: int, osts_per_oss: int, kbytes_total: int,
                         kbytes_used: Mapping[int, int] | None = None) -> ClusterSnapshot:
    """A cluster of ``oss_count`` OSSes with ``osts_per_oss`` equal OSTs each.

    OST ``i`` is on OSS ``oss{i // osts_per_oss}``; ``kbytes_used`` optionally gives
    used KiB per OST index. Used by tests and generated scenarios.
    """
    used = kbytes_used or {}
    osts = []
    for i in range(oss_count * osts_per_oss):
        u = used.get(i, 0)
        osts.append(OstState(index=i, oss=f"oss{i // osts_per_oss}", kbytes_total=kbytes_total,
                             kbytes_free=kbytes_total - u, kbytes_avail=kbytes_total - u))
    return ClusterSnapshot(osts=osts, osses={f"oss{s}": OssState(f"oss{s}") for s in range(oss_count)})
