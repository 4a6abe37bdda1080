"""The cluster state as numpy arrays indexed by OST index, updated in place.

A flow round at 3600 OSTs cannot afford to walk 3600 :class:`OstState` objects in Python
for every request (4-5 ms of a 17 ms round did that, measured). The producer
of a snapshot keeps an :class:`OstTable` next to it instead: the state store writes one
OST's row when that OST's sample arrives (:meth:`OstTable.set_ost`, O(1)), and one OSS's
load when the OSS's sample arrives (:meth:`OstTable.set_oss`). A policy then derives a
round's candidate arrays with numpy indexing (:func:`ost_arrays`), never a Python loop
over OSTs.

Rows are OST indices (Lustre's are below 65536: ``LOV_V1_INSANE_STRIPE_COUNT`` and the
``OSTnnnn`` name); arrays grow by doubling when a larger index appears. A row that no
OST of the snapshot has is ``present == False``.

Snapshots without a producer-kept table (the simulator's MDS view, tests' hand-made
clusters) get one from :class:`TableSync`, rebuilt from the objects when the snapshot's
``version`` moves (every call for an unversioned snapshot), as policies derived their
state before.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.mapper.state.ost_health import is_usable


@dataclass(frozen=True)
class OstArrays:
    """The state of the candidate OSTs of one round, as parallel arrays of shape (N,).

    Attributes:
        index: OST index.
        oss: OSS number (position in the round's OSS list).
        kbytes_total: KiB.
        kbytes_avail: KiB usable by new objects.
        pending_bytes: bytes this mapper already placed there that the statistics
            do not show yet (decaying estimate; :class:`lustre_alloc.mapper.policies.mcmf.McmfPolicy`).
        cpu_percent, mem_percent, lnet_load: the OSS's load, 0..100, per OST.
        queue: write requests queued at the OST (``write_latency / base latency - 1``
            plus stripes placed since the last sample), >= 0.
        write_latency_s: brw_stats mean write RPC time, s (NaN: unknown); optional.
        rate_bytes_s: smoothed measured write rate, bytes/s
            (:class:`lustre_alloc.mapper.speed.rates.OstRateTracker`); optional.
        extra_stripes: stripes this mapper placed since the OST's last sample, plus
            stripes reserved by predicted lists (the part of ``queue`` the sample does
            not show yet); optional.
        degraded: ``OS_STATFS_DEGRADED`` set; optional.
        precreate_empty: the MDS had no precreated objects on it at the last MDS sample
            (``files_precreated == 0``; LOD's first pass skips it); optional.
        oss_limit_bytes_s: measured link limit of the OST's OSS, bytes/s (inf:
            unknown); optional.
    """
    index: np.ndarray
    oss: np.ndarray
    kbytes_total: np.ndarray
    kbytes_avail: np.ndarray
    pending_bytes: np.ndarray
    cpu_percent: np.ndarray
    mem_percent: np.ndarray
    lnet_load: np.ndarray
    queue: np.ndarray
    write_latency_s: np.ndarray | None = None
    rate_bytes_s: np.ndarray | None = None
    extra_stripes: np.ndarray | None = None
    degraded: np.ndarray | None = None
    precreate_empty: np.ndarray | None = None
    oss_limit_bytes_s: np.ndarray | None = None

    def take(self, rows: np.ndarray) -> "OstArrays":
        """The same arrays restricted to ``rows`` (positions, int64 (K,)); O(K)."""
        return OstArrays(**{f.name: (None if (v := getattr(self, f.name)) is None else v[rows])
                            for f in dataclasses.fields(self)})

    @property
    def used_fraction(self) -> np.ndarray:
        """``(total - avail) * 1024 + pending`` over ``total * 1024``, in [0, 1]."""
        total = np.maximum(self.kbytes_total.astype(float) * 1024, 1.0)
        used = (self.kbytes_total - self.kbytes_avail) * 1024.0 + self.pending_bytes
        return np.clip(used / total, 0.0, 1.0)


class OstTable:
    """Per-OST and per-OSS state in preallocated arrays.

    Per OST index (shape (capacity,)): ``present``, ``usable``
    (:func:`~lustre_alloc.mapper.state.ost_health.is_usable`), ``degraded`` (``OS_STATFS_DEGRADED``),
    ``precreated`` (``files_precreated > 0``), ``oss`` (OSS id, see ``oss_ids``),
    ``kbytes_total`` and ``kbytes_avail`` (KiB), ``latency_s`` (brw_stats write time, s;
    NaN when unknown, ``latency_known`` says which), ``sample_time_s`` (NaN = never sampled).
    Per OSS id: ``cpu_percent``, ``mem_percent``, ``lnet_load`` (0..100).
    """

    def __init__(self, capacity: int = 64, oss_capacity: int = 16):
        self.version: int | None = None
        """The snapshot version the rows match (the producer stamps it as it writes
        them; a snapshot whose version moved past it without the producer is re-read)."""
        self.capacity = 0
        self.oss_ids: dict[str, int] = {}
        self.cpu_percent = np.zeros(0)
        self.mem_percent = np.zeros(0)
        self.lnet_load = np.zeros(0)
        self._grow(capacity)
        self._grow_oss(oss_capacity)

    # ------------------------------------------------------------------ storage
    def _grow(self, capacity: int) -> None:
        old = self.capacity
        def more(name: str, dtype: type, fill: float | bool | int) -> None:
            a = np.full(capacity, fill, dtype=dtype)
            if old:
                a[:old] = getattr(self, name)
            setattr(self, name, a)
        more("present", bool, False)
        more("usable", bool, False)
        more("degraded", bool, False)
        more("precreated", bool, False)
        more("oss", np.int64, 0)
        more("kbytes_total", np.int64, 0)
        more("kbytes_avail", np.int64, 0)
        more("latency_s", np.float64, math.nan)
        more("latency_known", bool, False)
        more("sample_time_s", np.float64, math.nan)
        self.capacity = capacity

    def _grow_oss(self, capacity: int) -> None:
        for name in ("cpu_percent", "mem_percent", "lnet_load"):
            a = np.zeros(capacity)
            old = getattr(self, name)
            a[:len(old)] = old
            setattr(self, name, a)

    def oss_id(self, name: str) -> int:
        """The id of OSS ``name`` (assigned on first sight, never reused)."""
        sid = self.oss_ids.get(name)
        if sid is None:
            sid = self.oss_ids[name] = len(self.oss_ids)
            if sid >= len(self.cpu_percent):
                self._grow_oss(2 * len(self.cpu_percent) or 16)
        return sid

    # ------------------------------------------------------------------ updates
    def set_ost(self, ost: OstState) -> None:
        """Write one OST's row (O(1)); call after any change of its state."""
        i = ost.index
        if i >= self.capacity:
            cap = self.capacity
            while cap <= i:
                cap *= 2
            self._grow(cap)
        self.present[i] = True
        self.usable[i] = is_usable(ost)
        self.degraded[i] = bool(ost.flags & OstFlag.DEGRADED)
        self.precreated[i] = ost.files_precreated > 0
        self.oss[i] = self.oss_id(ost.oss)
        self.kbytes_total[i] = ost.kbytes_total
        self.kbytes_avail[i] = ost.kbytes_avail
        lat = ost.write_latency_s
        self.latency_known[i] = lat is not None
        self.latency_s[i] = math.nan if lat is None else lat
        t = ost.sample_time_s
        self.sample_time_s[i] = math.nan if t is None else t

    def set_oss(self, oss: OssState) -> None:
        """Write one OSS's load (O(1))."""
        s = self.oss_id(oss.name)
        self.cpu_percent[s] = oss.cpu_percent
        self.mem_percent[s] = oss.mem_percent
        self.lnet_load[s] = oss.lnet_load

    def refresh(self, snapshot: ClusterSnapshot) -> "OstTable":
        """Rewrite every row from ``snapshot`` (O(OSTs); for producers without hooks)."""
        self.present[:] = False
        for oss in snapshot.osses.values():
            self.set_oss(oss)
        for ost in snapshot.osts:
            self.set_ost(ost)
        return self

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot) -> "OstTable":
        """A table holding ``snapshot``'s state."""
        top = max((o.index for o in snapshot.osts), default=0)
        return cls(capacity=max(64, 1 << int(top).bit_length()),
                   oss_capacity=max(16, len(snapshot.osses))).refresh(snapshot)

    # ------------------------------------------------------------------ queries
    def indices(self) -> np.ndarray:
        """OST indices present, ascending (LOD array order), int64."""
        return np.flatnonzero(self.present)

    def usable_indices(self) -> np.ndarray:
        """Usable OST indices, ascending, int64."""
        return np.flatnonzero(self.present & self.usable)

    def usable_at(self, osts: "list[int] | tuple[int, ...]") -> bool:
        """True when every index in ``osts`` is a present, usable OST (O(len(osts)))."""
        cap, present, usable = self.capacity, self.present, self.usable
        for i in osts:
            if not 0 <= i < cap or not present[i] or not usable[i]:
                return False
        return True


def ost_arrays(table: OstTable, rows: np.ndarray) -> OstArrays:
    """The :class:`~lustre_alloc.mapper.flow.costs.OstArrays` of the OSTs ``rows`` (indices, ascending):
    OSS numbers by first appearance among ``rows`` (as a round numbers its OSSes),
    ``queue`` = write latency over the fastest known latency minus 1 (0 when unknown),
    ``write_latency_s`` the sampled brw_stats write RPC time (NaN unknown: the rate cost's
    ``L_j``), nothing placed pending. Vectorized: no Python loop over OSTs."""
    rows = np.asarray(rows, dtype=np.int64)
    gid = table.oss[rows]
    if len(rows):
        _, first, inverse = np.unique(gid, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        oss = rank[inverse.reshape(-1)]
    else:
        oss = np.zeros(0, dtype=np.int64)
    lat = table.latency_s[rows]
    ok = np.isfinite(lat) & (lat > 0)
    base = float(lat[ok].min()) if ok.any() else 1.0
    return OstArrays(
        index=rows.copy(), oss=oss, kbytes_total=table.kbytes_total[rows].copy(),
        kbytes_avail=table.kbytes_avail[rows].copy(), pending_bytes=np.zeros(len(rows)),
        cpu_percent=table.cpu_percent[gid], mem_percent=table.mem_percent[gid],
        lnet_load=table.lnet_load[gid], queue=np.where(ok, lat / base - 1.0, 0.0),
        write_latency_s=lat.copy())


class TableSync:
    """The :class:`OstTable` of a snapshot: the producer's own (``snapshot.ost_table``,
    kept current in place and stamped with the version it matches), else one rebuilt
    here whenever ``snapshot.version`` moves (every call for an unversioned snapshot).
    A producer's table whose stamp lags the snapshot's version (someone changed the
    objects and called ``changed()`` without writing rows) is re-read from the objects."""

    def __init__(self) -> None:
        self._key: tuple[int, int] | None = None
        self._table: OstTable | None = None

    def table(self, snapshot: ClusterSnapshot) -> OstTable:
        own = getattr(snapshot, "ost_table", None)
        if own is not None:
            if snapshot.version is None or own.version != snapshot.version:
                own.refresh(snapshot)
                own.version = snapshot.version
            return own
        key = None if snapshot.version is None else (id(snapshot), snapshot.version)
        if self._table is None or key is None or key != self._key:
            if self._table is None:
                self._table = OstTable.from_snapshot(snapshot)
            else:
                self._table.refresh(snapshot)
            self._key = key
        return self._table
