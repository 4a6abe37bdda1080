"""The mapper's view of the cluster, kept from the collectors' samples (samples -> snapshot).

One :class:`StateStore` holds one :class:`~lustre_alloc.mapper.state.cluster_state.ClusterSnapshot` that is
updated in place as samples arrive (as the simulator's MDS view is) and handed to the
policies for each round; the service calls it from its single loop thread, so a policy
never sees a half-applied sample. Sample fields are those of ``docs/protocol.md``
(collector schema 1); units are converted where the snapshot's differ (latency ms -> s).

Rules (decisions where the paper is silent are marked as ours):

* A store serves ONE file system: state is keyed by (fsname, OST index). An OST is the target
  of kind ``ost`` with an ``index`` and this store's ``fsname`` (field ``fsname`` of the
  target, else the ``<fsname>-OSTxxxx`` of its name) in an OSS sample; its OSS is the
  sample's ``host``. Targets without an index are ignored (counted); targets of another file
  system are skipped (counted in ``foreign_targets``): the mapper keeps one store per fsname.
* ``available`` false (space or stats unreadable, or ``health_check`` names it) makes the
  OST inactive for us: we do not know it can take objects, so we never hand it out
  (ours; Lustre's allocator, which the client falls back to, has its own view).
* ``ENOSPC`` and ``ENOINO`` from ``kbytes_avail``, ``kbytes_total`` and ``files_free`` by
  :func:`lustre_alloc.mapper.state.ost_health.statfs_flags` (OSP's watermarks with hysteresis; the
  simulator and the live stack use the same function); ``DEGRADED`` from ``degraded``.
* Write latency: the mean time per write RPC, s, from what the OST's OSD measures
  (:func:`lustre_alloc.mapper.state.write_time.write_time`): brw_stats
  ``write_io_time_ms_mean`` when it timed writes (ldiskfs), else the OFD's ``write`` and
  ``sync`` service times over its write RPCs (ZFS, 2.14+); None when neither timed a write. Write rate:
  ``write_bytes_per_s`` (B/s, obdfilter ``stats``), the field the simulator fills too.
  Write concurrency: ``write_ios_in_flight_mean`` (brw_stats "disk I/Os in flight").
* OSS load: ``cpu_percent``, ``mem_percent``; LNet load from ``lnet_send_bytes_per_s`` and
  ``lnet_recv_bytes_per_s`` over ``lnet_capacity_bytes_per_s``
  (:func:`lustre_alloc.mapper.state.ost_health.lnet_load_percent`, the simulator's rule too).
* The MDS's own view (``osts`` and ``pools`` of an ``mds`` sample, lustre_alloc/collectors/mds_view.py),
  for this store's fsname: an OST whose OSP is inactive (``active`` false) or whose
  ``prealloc_status`` is a non-ENOSPC error is inactive; ``max_create_count`` 0 (drained)
  sets ``NOPRECREATE``; ``prealloc_status`` ``-ENOSPC`` sets ``ENOSPC`` (:func:`lustre_alloc.mapper.state.ost_health.osp_view`);
  ``precreated_objects`` is the OST's ``files_precreated``. Applied on arrival, so a
  drained OST is out of every round that follows the MDS sample (within one stats
  interval); undone by the next MDS sample that says otherwise. Pools published by the MDS
  (``lod.*.pools.*``) replace the configured ones for this file system.
* Bytes written per file created, per jobid (:mod:`lustre_alloc.mapper.state.job_sizes`): the OST
  targets' and the MDTs' ``jobs`` rows, kept in ``job_sizes`` (the snapshot's too).
* MDS CPU: ``cpu_percent`` of the newest ``mds`` sample (Section III-D gate). An MDS sample
  older than the staleness limit counts as unknown: 0 % (the gate is then open; the
  ``stale`` rule still guards the OSS data).
* Sample time: a live sample is timed when the mapper received it (its own clock, so a
  skewed server clock cannot make it look stale or fresh); a last-value-cache sample
  keeps the collector's ``time`` (it may be old).
"""
from __future__ import annotations

import bisect
import logging
import time
from typing import Any, Mapping

from lustre_alloc.mapper.state.arrays import OstTable
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.collectors.schema import TARGET_GONE
from lustre_alloc.common.fsname import target_fsname
from lustre_alloc.mapper.state.job_sizes import JobBytesPerCreate
from lustre_alloc.mapper.state.write_time import write_time
from lustre_alloc.mapper.state.write_totals import WriteTotals
from lustre_alloc.mapper.state.ost_health import lnet_load_percent, osp_view, stale_servers_until, statfs_flags

log = logging.getLogger("lustre_alloc.mapper.state.state_store")

DEFAULT_INTERVAL_S = 5.0
"""Collector interval assumed before any sample arrives (Section III-A: 5 s)."""


def _num(values: Mapping[str, Any], name: str) -> float | None:
    v = values.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _gone(target: Mapping[str, Any]) -> bool:
    """The one report a collector sends for a target it no longer lists."""
    unavailable = target.get("unavailable")
    return target.get("available") is not True and isinstance(unavailable, Mapping) \
        and unavailable.get("target") == TARGET_GONE


def _unavailable(target: Mapping[str, Any]) -> dict[str, Any]:
    """The sample's ``unavailable`` map (statistic -> why it could not be read)."""
    unavailable = target.get("unavailable")
    return dict(unavailable) if isinstance(unavailable, Mapping) else {}


class StateStore:
    """Cluster state from samples.

    Args:
        pools: pool name -> OST indices (from the configuration; the collectors do not
            publish pools).
        lnet_capacity_bytes_per_s: link capacity used to normalise LNet load, B/s.
        stale_after_s: a sample older than this is stale; 0 = twice the largest
            collector interval seen (the issue's "2 x interval").
        fsname: the file system this store serves; ``""`` = the fsname of the first OST
            sample (logged), others are skipped from then on.
    """

    def __init__(self, pools: Mapping[str, list[int]] | None = None, *,
                 lnet_capacity_bytes_per_s: float = 12.5e9, stale_after_s: float = 0.0,
                 fsname: str = ""):
        self.fsname = fsname
        self.foreign_targets = 0
        """OST targets skipped because they belong to another file system."""
        self.snapshot = ClusterSnapshot(osts=[], osses={},
                                        pools={k: frozenset(v) for k, v in (pools or {}).items()},
                                        version=0, ost_table=OstTable())
        self.job_sizes = JobBytesPerCreate()
        """Bytes written per file created, per jobid, from the OSTs' and MDTs' job_stats."""
        self.snapshot.job_sizes = self.job_sizes
        self.lnet_capacity_bytes_per_s = lnet_capacity_bytes_per_s
        self.stale_after_s = stale_after_s
        self.static = False
        self.interval_s = 0.0
        self.mds_cpu_percent: float | None = None
        self.mds_sample_time_s: float | None = None
        self.mds_cpu_override: float | None = None
        self.version = 0
        """Bumped whenever an OST's usability inputs or the OST set change."""
        self.samples = 0
        self.ignored_targets = 0
        self.superseded_reports = 0
        """Unavailable reports of an OST from an OSS that no longer serves it, skipped."""
        self._by_index: dict[int, OstState] = {}
        self._home_oss: dict[int, str] = {}
        """OST index -> the OSS that first published it (its home; another one serving it
        later is its failover partner)."""
        self.mds_view: dict[int, tuple[bool, int | None, int]] = {}
        """OST index -> (OSP active, max_create_count, prealloc_status) from the MDS."""
        self.pools_from_mds = False
        self._oss_view: dict[int, tuple[bool, OstFlag]] = {}
        self._stale_key: tuple[int, int, float] | None = None
        self._stale: list[str] = []
        self._stale_valid_until = float("-inf")
        self._stale_since = float("inf")

    # ------------------------------------------------------------------ building
    @classmethod
    def static_cluster(cls, oss_count: int, osts_per_oss: int,
                       kbytes_total: int = 1 << 32, pools: Mapping[str, list[int]] | None = None,
                       fsname: str = "") -> "StateStore":
        """A fixed emulated cluster (``make_uniform_cluster``) whose state never goes stale
        (samples times stay None and the service disables the stale rule)."""
        from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster
        store = cls(pools, fsname=fsname)
        snap = make_uniform_cluster(oss_count, osts_per_oss, kbytes_total)
        snap.pools = store.snapshot.pools
        snap.version = 0        # fixed: policies may keep what they derive from it
        snap.ost_table = OstTable.from_snapshot(snap)
        snap.ost_table.version = 0
        store.snapshot = snap
        store._by_index = snap.ost_by_index()
        store.static = True
        store.version = 1
        return store

    @property
    def ost_count(self) -> int:
        return len(self.snapshot.osts)

    def max_age_s(self) -> float:
        """Staleness limit, seconds: configured, else 2 x the collectors' interval."""
        if self.stale_after_s > 0:
            return self.stale_after_s
        return 2.0 * (self.interval_s or DEFAULT_INTERVAL_S)

    # ------------------------------------------------------------------ samples
    def apply(self, role: str, host: str, sample_time_s: float, interval_s: float,
              server: Mapping[str, Any], targets: Mapping[str, Any]) -> None:
        """Fold one sample into the state (fields as in docs/protocol.md).

        ``sample_time_s`` is the time to record (see the module doc for which clock).
        Malformed parts (a value of the wrong type, a target that is not a map) are
        ignored, never fatal.
        """
        self.samples += 1
        self.snapshot.changed()
        self.snapshot.ost_table.version = self.snapshot.version   # rows follow below
        if interval_s > self.interval_s:
            self.interval_s = float(interval_s)
        values = server.get("values") if isinstance(server, Mapping) else None
        values = values if isinstance(values, Mapping) else {}
        if role == "mds":
            cpu = _num(values, "cpu_percent")
            if cpu is not None:
                self.mds_cpu_percent = cpu
                self.mds_sample_time_s = sample_time_s
            if isinstance(server, Mapping):
                self._apply_mds_view(server)
            self._apply_mdts(targets, sample_time_s, interval_s)
            return
        if role != "oss":
            return
        mine = self._own_osts(targets)
        if not mine and host not in self.snapshot.osses:
            return                       # an OSS of another file system only
        oss = self.snapshot.osses.get(host)
        if oss is None:
            oss = self.snapshot.osses[host] = OssState(host)
        oss.cpu_percent = _num(values, "cpu_percent") or 0.0
        oss.mem_percent = _num(values, "mem_percent") or 0.0
        oss.lnet_load = float(lnet_load_percent(_num(values, "lnet_send_bytes_per_s") or 0.0,
                                                _num(values, "lnet_recv_bytes_per_s") or 0.0,
                                                self.lnet_capacity_bytes_per_s))
        oss.sample_time_s = sample_time_s
        self.snapshot.ost_table.set_oss(oss)
        for index, target in mine:
            self._apply_ost(index, host, sample_time_s, interval_s, target)

    def _apply_mdts(self, targets: Mapping[str, Any], t: float, interval_s: float) -> None:
        """The MDTs' job_stats rows (their creates) of this store's file system."""
        if not isinstance(targets, Mapping):
            return
        for name, target in targets.items():
            if (isinstance(target, Mapping) and target.get("kind") == "mdt"
                    and target_fsname(str(name), target) in (self.fsname, None)):
                self.job_sizes.absorb_rows(target.get("jobs"), t, interval_s)

    def _own_osts(self, targets: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
        """(index, target) of the OST targets of this store's file system."""
        out = []
        for name, target in targets.items():
            if not isinstance(target, Mapping) or target.get("kind") != "ost":
                continue
            index = target.get("index")
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                self.ignored_targets += 1
                continue
            fs = target_fsname(str(name), target)
            if not self.fsname and fs:
                self.fsname = fs
                log.info("file system adopted from the first OST sample",
                         extra={"event": "fsname_adopted", "fsname": fs})
            if fs != self.fsname and fs is not None:
                self.foreign_targets += 1
                continue
            out.append((index, target))
        return out

    def _apply_ost(self, index: int, host: str, t: float, interval_s: float,
                   target: Mapping[str, Any]) -> None:
        values = target.get("values")
        values = values if isinstance(values, Mapping) else {}
        ost = self._by_index.get(index)
        if ost is None:
            ost = OstState(index=index, oss=host, kbytes_total=0, kbytes_free=0, kbytes_avail=0)
            self._by_index[index] = ost
            pos = bisect.bisect_left([o.index for o in self.snapshot.osts], index)
            self.snapshot.osts.insert(pos, ost)
            self.version += 1
            log.info("new OST", extra={"event": "ost_new", "ost": index, "oss": host})
        elif host != ost.oss and _gone(target) and self._served_elsewhere(ost, t):
            # The OSS it left (a failover, or the partner after failback) reports it gone
            # once; the OSS serving it now said otherwise.
            self.superseded_reports += 1
            return
        before = (ost.active, ost.flags, ost.oss)
        ost.oss = host
        ost.failed_over = host != self._home_oss.setdefault(index, host)
        total, free = _num(values, "kbytes_total"), _num(values, "kbytes_free")
        avail = _num(values, "kbytes_avail")
        if total is not None:
            ost.kbytes_total = int(total)
        if free is not None:
            ost.kbytes_free = int(free)
        if avail is not None:
            ost.kbytes_avail = int(avail)
        elif free is not None:
            ost.kbytes_avail = int(free)
        files_free = _num(values, "files_free")
        if files_free is not None:
            ost.files_free = int(files_free)
        # from the OSS's own previous bits, so the MDS view's bits (merged below) never stick
        oss_flags = self._oss_view.get(index, (True, ost.flags))[1]
        flags = statfs_flags(oss_flags, ost.kbytes_avail, ost.kbytes_total, ost.files_free)
        if _num(values, "degraded"):
            flags |= OstFlag.DEGRADED
        else:
            flags &= ~OstFlag.DEGRADED
        self._oss_view[index] = (target.get("available") is True and ost.kbytes_total > 0, flags)
        self._merge_views(ost)
        totals = ost.write_totals
        if totals is None:
            totals = ost.write_totals = WriteTotals()
        span = t - totals.time_s if totals.time_s is not None and t > totals.time_s \
            else float(interval_s)
        # the OFD's rates are over the collector's interval, not the mapper's gap
        timed = write_time(values, float(interval_s))
        ost.write_latency_s = timed.latency_s if timed is not None else None
        ost.write_bytes_per_s = _num(values, "write_bytes_per_s")   # as the simulator's view
        ost.write_in_flight = timed.in_flight if timed is not None else None
        totals.add_sample(t, span, timed, ost.write_bytes_per_s)
        ost.sample_time_s = t
        self.job_sizes.absorb_rows(target.get("jobs"), t, interval_s)
        self.snapshot.ost_table.set_ost(ost)      # the arrays follow in place, O(1)
        if (ost.active, ost.flags, ost.oss) != before:
            self.version += 1
            if ost.active != before[0]:
                log.info("OST usability changed", extra={
                    "event": "ost_active" if ost.active else "ost_inactive", "ost": index,
                    "oss": host, "unavailable": _unavailable(target)})

    def _served_elsewhere(self, ost: OstState, t: float) -> bool:
        """``ost``'s current OSS reported it available at its last sample, within
        :meth:`max_age_s` of ``t``."""
        served = self._oss_view.get(ost.index, (False, ost.flags))[0]
        return bool(served and ost.sample_time_s is not None
                    and t - ost.sample_time_s <= self.max_age_s())

    def _merge_views(self, ost: OstState) -> None:
        """``active``/``flags`` of ``ost`` from the OSS's sample and the MDS's view."""
        active, flags = self._oss_view.get(ost.index, (ost.active, ost.flags))
        view = self.mds_view.get(ost.index)
        if view is not None:
            active, flags = osp_view(active, flags, *view)
        ost.active, ost.flags = active, flags

    def _apply_mds_view(self, server: Mapping[str, Any]) -> None:
        osts, pools = server.get("osts"), server.get("pools")
        if isinstance(osts, Mapping) and self.fsname:
            view: dict[int, tuple[bool, int | None, int]] = {}
            for name, o in osts.items():
                if not isinstance(o, Mapping) or target_fsname(str(name), o) != self.fsname:
                    continue
                index = o.get("index")
                if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                    continue
                max_create = _num(o, "max_create_count")
                prealloc = _num(o, "prealloc_status")
                view[index] = (o.get("active") is not False,
                               None if max_create is None else int(max_create),
                               0 if prealloc is None else int(prealloc))
            self._apply_precreated(osts)
            if view != self.mds_view:
                changed = {i for i in set(view) | set(self.mds_view)
                           if view.get(i) != self.mds_view.get(i)}
                self.mds_view = view
                for index in sorted(changed):
                    ost = self._by_index.get(index)
                    if ost is None:
                        continue
                    before = (ost.active, ost.flags)
                    self._merge_views(ost)
                    self.snapshot.ost_table.set_ost(ost)
                    if (ost.active, ost.flags) != before:
                        self.version += 1
                        log.info("MDS view of an OST changed", extra={
                            "event": "ost_mds_view", "fsname": self.fsname, "ost": index,
                            "osp": dict(zip(("active", "max_create_count", "prealloc_status"),
                                            view.get(index, (True, None, 0))))})
        if isinstance(pools, Mapping) and self.fsname and isinstance(pools.get(self.fsname),
                                                                     Mapping):
            new = {str(k): frozenset(i for i in v if isinstance(i, int) and not isinstance(i, bool))
                   for k, v in pools[self.fsname].items() if isinstance(v, list)}
            if new != self.snapshot.pools:
                self.snapshot.pools = new
                self.pools_from_mds = True
                self.version += 1
                log.info("pools from the MDS", extra={"event": "pools_from_mds",
                                                      "fsname": self.fsname,
                                                      "pools": {k: sorted(v) for k, v in new.items()}})

    def _apply_precreated(self, osts: Mapping[str, Any]) -> None:
        """``files_precreated`` of this fsname's OSTs from the MDS view's
        ``precreated_objects`` (lustre_alloc/collectors/readers/osp.py); an OST whose count
        goes to 0 or back moves the snapshot's version (rounds read it: LOD's first pass
        skips an OST with none, ``lod_qos.c`` ``lod_check_and_reserve_ost()``)."""
        for name, o in osts.items():
            if not isinstance(o, Mapping) or target_fsname(str(name), o) != self.fsname:
                continue
            index, ready = o.get("index"), _num(o, "precreated_objects")
            ost = self._by_index.get(index) if isinstance(index, int) else None
            if ost is None or ready is None or int(ready) == ost.files_precreated:
                continue
            emptied = (int(ready) == 0) != (ost.files_precreated == 0)
            ost.files_precreated = int(ready)
            self.snapshot.ost_table.set_ost(ost)
            if emptied:
                self.version += 1
                log.debug("OST precreation empty" if ready == 0 else "OST precreation ready",
                          extra={"event": "ost_precreated", "fsname": self.fsname,
                                 "ost": index, "precreated_objects": int(ready)})

    def apply_sample(self, sample: Any) -> None:
        """Fold a :class:`lustre_alloc.collectors.subscriber.Sample` (see the module doc for its time)."""
        t = sample.time if sample.from_cache else sample.received_at
        self.apply(sample.role, sample.host, t, sample.interval_s, sample.server, sample.targets)

    # ------------------------------------------------------------------ staleness
    def stale_servers(self, snapshot: ClusterSnapshot, max_age_s: float) -> list[str]:
        """:func:`lustre_alloc.mapper.state.ost_health.stale_servers` (OSSes serving a usable OST
        whose OST or OSS sample is older than ``max_age_s`` at ``snapshot.time_s``), cached:
        recomputed (O(OSTs)) only after new samples or once the time passes the moment the
        oldest fresh sample turns stale. ``snapshot`` must be this store's."""
        now = snapshot.time_s
        key = (self.samples, self.version, max_age_s)
        if key == self._stale_key and self._stale_since <= now < self._stale_valid_until:
            return self._stale
        stale, turns_stale = stale_servers_until(snapshot, max_age_s)
        self._stale = stale
        self._stale_key = key
        self._stale_valid_until = turns_stale
        self._stale_since = now
        return self._stale

    # ------------------------------------------------------------------ rounds
    def current(self, now_s: float | None = None) -> ClusterSnapshot:
        """The snapshot for a round at ``now_s`` (Unix seconds; default: now)."""
        snap = self.snapshot
        now = time.time() if now_s is None else now_s
        snap.time_s = now
        if self.mds_cpu_override is not None:
            snap.mds_cpu_percent = self.mds_cpu_override
        elif self.mds_cpu_percent is not None and self.mds_sample_time_s is not None \
                and now - self.mds_sample_time_s <= self.max_age_s():
            snap.mds_cpu_percent = self.mds_cpu_percent
        else:
            snap.mds_cpu_percent = 0.0
        return snap
