"""Lustre's free-space weighted QOS allocator (``lod_ost_alloc_qos``), restated exactly.

Source: Lustre lod_qos.c (``lod_ost_alloc_qos``, ``lod_qos_calc_ppo``/
``ltd_qos_penalties_calc``, ``lod_qos_used``/``ltd_qos_update``) and lu_tgt_descs.c
(2.14+), tags 2.12..2.16; restated in ``docs/reference/lustre-lod-allocator.md``
("QOS"). No Lustre code is copied. All arithmetic is integer, as in the kernel.

Outline (quantities in bytes shifted right by 8 unless noted; tunables in 1/256 units):

* ``qos_prio_free`` (default 90% -> stored ``90*256/100 = 230``; 91% -> 232 up to
  2.14) sets ``prio_wide = 256 - prio_free``, the weight of the recency penalties.
* When space changed (DIRTY), penalties per object are recomputed for every active
  OST: ``ba = (bavail*bsize) >> 8``, ``ppo = ((prio_wide*ba) >> 8) / (active-1) >> 1``
  (2.16/master: ``(prio_wide*ba >> 9) / (active-1)``), and per OSS from the sum of its
  OSTs' ``ba`` divided by ``ost_count * (active_servers-1)``. Penalties decay with age
  ``(now - last_used) >> 3`` seconds: zero beyond ``32*qos_maxage``, halved
  ``age/qos_maxage`` times beyond ``qos_maxage`` (default 5 s).
* If the fullest and emptiest OST are within ``qos_threshold_rr`` (17% -> 43/256),
  i.e. ``ba_max*(256-43) >> 8 < ba_min``, QOS declines (EAGAIN) and LOD uses
  round-robin.
* Weight of an OST: ``avail - ost.penalty - oss.penalty`` (floored at 0) with
  ``avail = (bavail*bsize) >> 8`` in 2.16+ (LU-16501) or
  ``((bavail*bsize) >> 16) * (ffree >> 8)`` in 2.15.
* Each stripe: ``r`` uniform in ``[0, total weight)``; walk candidates accumulating
  weight and take the first whose running sum reaches ``r``. Taking an OST halves
  its and its OSS's penalty, adds ``ppo*active_osts`` (``ppo*active_servers``), then
  every penalty decays by one ``ppo`` and weights are recomputed.
* Fewer candidates than stripes, or a failure to find enough: EAGAIN -> round-robin.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from lustre_alloc.common.settings import setting

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstFlag, OstState, osts_by_oss
from lustre_alloc.mapper.state.ost_health import is_usable
from lustre_alloc.mapper.policies.placement import CreateRequest, Placement, QosUnavailable
from lustre_alloc.mapper.policies.pool_cache import version_key
from lustre_alloc.mapper.policies.round_robin import RoundRobin

QOS_SCALE_SHIFT = 8
"""Tunables are stored in 1/256 units (``QOS_THRESHOLD_MAX`` = 256 in master)."""
QOS_MAXAGE_DEFAULT_S = 5
"""``LOV_DESC_QOS_MAXAGE_DEFAULT``, seconds."""
QOS_THRESHOLD_RR_DEFAULT_PCT = 17
QOS_PRIO_FREE_DEFAULT_PCT = 90
"""2.15+ default; 2.14 and older stored 232 (shown as 91%)."""
WEIGHT_VERSIONS = ("2.16", "2.15")
BALANCED = "free space balanced"
"""Why QOS declines while the space it last read is unchanged and within the RR band."""
_BALANCED_NOTE = f"round-robin: {BALANCED}"


def pct_to_stored(pct: int) -> int:
    """Percent -> 1/256 units as ``lctl set_param`` stores it: ``(pct << 8) / 100``."""
    return (pct << QOS_SCALE_SHIFT) // 100


def free_space_within_rr_band(ba_min: int, ba_max: int, threshold_rr: int) -> bool:
    """Lustre's test for "free space is even enough for round-robin" (lod_qos.c
    ``lod_qos_calc_ppo``, LQ_SAME_SPACE): ``(ba_max * (256 - threshold)) >> 8 < ba_min``,
    with ``ba`` an OST's available bytes >> 8 and ``threshold`` the stored
    ``qos_threshold_rr`` (:func:`pct_to_stored`; 17% -> 43). Integers as Lustre's."""
    return ((ba_max * (256 - threshold_rr)) >> 8) < ba_min


def places_round_robin(snapshot: ClusterSnapshot, threshold_rr: int) -> bool:
    """Whether LOD would decline QOS and place round-robin on ``snapshot`` (the test of
    :meth:`LustreQos._calc_penalties`, without its penalty updates): fewer than 2 active
    OSTs, no active OST with space, or the free space of the active OSTs within
    ``threshold_rr`` (stored units, :func:`pct_to_stored`) by
    :func:`free_space_within_rr_band` (lod_qos.c ``lod_qos_calc_ppo``, LQ_SAME_SPACE)."""
    bas = [(o.kbytes_avail * 1024) >> 8 for o in snapshot.osts if o.active]
    spaced = [ba for ba in bas if ba > 0]
    if len(bas) < 2 or not spaced:
        return True
    return free_space_within_rr_band(min(spaced), max(spaced), threshold_rr)


def stored_to_pct(stored: int) -> int:
    """1/256 units -> the percent ``lctl get_param`` shows: ``(stored*100 + 255) >> 8``."""
    return (stored * 100 + 255) >> QOS_SCALE_SHIFT


@dataclass(slots=True)
class _TargetQos:
    penalty: int = 0
    penalty_per_obj: int = 0
    used_s: int = 0
    weight: int = 0


@dataclass(slots=True)
class _ServerQos:
    penalty: int = 0
    penalty_per_obj: int = 0
    used_s: int = 0
    bavail_sum: int = 0
    ost_count: int = 0


@dataclass(frozen=True)
class LustreQosTunables:
    """The ``[policy.lustre_qos]`` table: LOD's own tunables, as the fallback restates them
    (keyword parameters of :class:`LustreQos`; their unit, default and source are their
    :func:`~lustre_alloc.common.settings.setting` metadata). Set them as the file system's
    ``lctl get_param lod.*.qos_*`` shows them, so the fallback places as Lustre does."""
    weight_version: str = setting("2.16", unit="Lustre release", doc=(
        "whose QOS weight to restate: `2.16` (`avail = bavail*bsize >> 8`) or `2.15` "
        "(`avail = (bavail*bsize >> 16) * (ffree >> 8)`)"),
        source="lu_tgt_descs.c `ltd_qos_penalties_calc`, per release")
    qos_prio_free_pct: int = setting(QOS_PRIO_FREE_DEFAULT_PCT, unit="%", doc=(
        "`lod.*.qos_prio_free`: weight of free space against OST/OSS spread"),
        source="Lustre 2.15+ default (2.14 and older: 91)")
    qos_threshold_rr_pct: int = setting(QOS_THRESHOLD_RR_DEFAULT_PCT, unit="%", doc=(
        "`lod.*.qos_threshold_rr`: free space this even is placed round-robin"),
        source="Lustre's default (lod_qos.c `lod_qos_calc_ppo`)")
    qos_maxage_s: int = setting(QOS_MAXAGE_DEFAULT_S, unit="s", doc=(
        "`lod.*.qos_maxage`: statfs results older than this are refreshed"),
        source="`LOV_DESC_QOS_MAXAGE_DEFAULT`")


class LustreQos:
    """Lustre's QOS allocator with its RR fallback, as a placement policy.

    Args:
        seed: seeds the weighted draws and the RR fallback's re-seeding.
        weight_version: ``"2.16"`` (default; ``avail = bavail*bsize >> 8``) or
            ``"2.15"`` (``avail = (bavail*bsize >> 16) * (ffree >> 8)``).
        qos_prio_free_pct: ``lod.*.qos_prio_free`` in percent (default 90).
        qos_threshold_rr_pct: ``lod.*.qos_threshold_rr`` in percent (default 17).
        qos_maxage_s: ``lod.*.qos_maxage`` in seconds (default 5).
    Raises:
        ValueError: unknown weight version or a tunable outside 0..100.
    """
    name = "lustre_qos"

    def __init__(self, seed: int = 0, weight_version: str = LustreQosTunables.weight_version,
                 qos_prio_free_pct: int = LustreQosTunables.qos_prio_free_pct,
                 qos_threshold_rr_pct: int = LustreQosTunables.qos_threshold_rr_pct,
                 qos_maxage_s: int = LustreQosTunables.qos_maxage_s):
        if weight_version not in WEIGHT_VERSIONS:
            raise ValueError(f"weight_version must be one of {WEIGHT_VERSIONS}, got {weight_version!r}")
        for label, pct in (("qos_prio_free_pct", qos_prio_free_pct),
                           ("qos_threshold_rr_pct", qos_threshold_rr_pct)):
            if not 0 <= pct <= 100:
                raise ValueError(f"{label} must be within 0..100, got {pct}")
        if qos_maxage_s < 1:
            raise ValueError(f"qos_maxage_s must be >= 1, got {qos_maxage_s}")
        self.weight_version = weight_version
        self.prio_free = pct_to_stored(qos_prio_free_pct)
        self.threshold_rr = pct_to_stored(qos_threshold_rr_pct)
        self.maxage_s = qos_maxage_s
        self.rr = RoundRobin(seed)
        self._rng = random.Random(seed + 0x9E3779B9)
        self._ost: dict[int, _TargetQos] = {}
        self._srv: dict[str, _ServerQos] = {}
        self._dirty = True
        self._reset = True
        self._same_space = False
        self._active_osts = 0
        self._active_servers = 0
        self._space_key: tuple | None = None
        self._space_view: tuple[int, int] | None = None
        self._active_count = 0
        self.last_fallback_reason: str | None = None

    # -- public -----------------------------------------------------------------------
    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """Allocate with QOS, or with round-robin when QOS declines (EAGAIN).

        ``Placement.note`` is empty for a weighted decision and says why otherwise.
        Raises NoSpaceError when no OST of the pool is usable.
        """
        if (self._same_space and not self._dirty and self._active_count >= 2
                and snapshot.version is not None and version_key(snapshot) == self._space_view):
            # What _alloc_qos decides first, without raising: the space it last read is
            # unchanged (same snapshot version) and was balanced, so QOS declines and
            # round-robin places (pick: the same pool and stripe count resolution, errors
            # included, as below).
            self.last_fallback_reason = BALANCED
            return Placement(tuple(self.rr.pick(snapshot, request)), self.name,
                             note=_BALANCED_NOTE)
        members, count = self.rr.pool_cache.members_and_stripe_count(
            snapshot, request.pool, request.stripe_count)
        try:
            osts = self._alloc_qos(snapshot, members, count)
            self.last_fallback_reason = None
            return Placement(tuple(osts), self.name)
        except QosUnavailable as why:
            self.last_fallback_reason = why.reason
            osts = self.rr.select(snapshot, members, request.pool, count)
            return Placement(tuple(osts), self.name, note=f"round-robin: {why.reason}")

    def prepare(self, snapshot: ClusterSnapshot) -> None:
        """Build the RR fallback's arrays (:meth:`RoundRobin.prepare`) and read the space
        (penalties computed as the first create would, at ``snapshot.time_s``)."""
        self.rr.prepare(snapshot)
        try:
            self._read_space(snapshot, int(snapshot.time_s))
        except QosUnavailable:
            pass                # balanced or too few OSTs: the first create goes to RR

    def places_round_robin(self, snapshot: ClusterSnapshot) -> bool:
        """Whether this allocator would place ``snapshot``'s creates round-robin
        (:func:`places_round_robin` with its ``qos_threshold_rr``)."""
        return places_round_robin(snapshot, self.threshold_rr)

    def penalties(self) -> dict[str, dict]:
        """Current penalty state, for tests and diagnostics (units: bytes >> 8)."""
        return {"ost": {i: (t.penalty, t.penalty_per_obj) for i, t in self._ost.items()},
                "oss": {s: (v.penalty, v.penalty_per_obj) for s, v in self._srv.items()}}

    # -- internals --------------------------------------------------------------------
    def _avail_weight(self, ost: OstState) -> int:
        bytes_avail = ost.kbytes_avail * 1024
        if self.weight_version == "2.15":
            return (bytes_avail >> 16) * (ost.files_free >> 8)
        return bytes_avail >> 8

    def _ppo(self, ba: int, divisor: int) -> int:
        prio_wide = 256 - self.prio_free
        if self.weight_version == "2.15":
            return ((prio_wide * ba) >> 8) // divisor >> 1
        return ((prio_wide * ba) >> 9) // divisor

    def _decay(self, penalty: int, used_s: int, now: int) -> int:
        age = (now - used_s) >> 3
        if self._reset or age > 32 * self.maxage_s:
            return 0
        if age > self.maxage_s:
            return penalty >> (age // self.maxage_s)
        return penalty

    def _calc_penalties(self, snapshot: ClusterSnapshot, now: int) -> None:
        active = [o for o in snapshot.osts if o.active]
        n1 = len(active) - 1
        if n1 < 1:
            raise QosUnavailable("fewer than 2 active OSTs")
        groups = osts_by_oss(snapshot.osts)
        for name, osts in groups.items():
            srv = self._srv.setdefault(name, _ServerQos())
            srv.bavail_sum = 0
            srv.ost_count = len(osts)
        ba_min: int | None = None
        ba_max = 0
        servers_with_space: set[str] = set()
        for ost in active:
            ba = (ost.kbytes_avail * 1024) >> 8
            if ba == 0:
                continue
            tq = self._ost.setdefault(ost.index, _TargetQos())
            ba_min = ba if ba_min is None else min(ba_min, ba)
            ba_max = max(ba_max, ba)
            self._srv[ost.oss].bavail_sum += ba
            servers_with_space.add(ost.oss)
            tq.penalty_per_obj = self._ppo(ba, n1)
            tq.penalty = self._decay(tq.penalty, tq.used_s, now)
        ns1 = len(servers_with_space) - 1
        if ns1 < 1:
            ns1 = 1
            for ost in active:
                if ost.index in self._ost:
                    self._ost[ost.index].penalty_per_obj *= 2
        for name, srv in self._srv.items():
            if name not in groups:
                continue
            srv.penalty_per_obj = self._ppo(srv.bavail_sum, srv.ost_count * ns1)
            srv.penalty = self._decay(srv.penalty, srv.used_s, now)
        self._active_osts = len(active)
        self._active_servers = len(servers_with_space)
        self._dirty = False
        self._reset = False
        if ba_min is None:
            # Lustre starts ba_min at the largest u64 and ba_max at 0, so with no space
            # on any active OST the threshold test holds: SAME_SPACE and RESET are set.
            self._same_space = True
            self._reset = True
            raise QosUnavailable("no active OST has space")
        self._same_space = free_space_within_rr_band(ba_min, ba_max, self.threshold_rr)
        if self._same_space:
            self._reset = True
            raise QosUnavailable("free space within qos_threshold_rr")

    def _weight(self, ost: OstState) -> int:
        tq = self._ost.setdefault(ost.index, _TargetQos())
        srv = self._srv[ost.oss]
        w = self._avail_weight(ost) - tq.penalty - srv.penalty
        tq.weight = w if w > 0 else 0
        return tq.weight

    def _read_space(self, snapshot: ClusterSnapshot, now: int) -> None:
        """Lustre's penalty step (``lod_qos_calc_ppo`` in lod_qos.c to 2.12,
        ``ltd_qos_penalties_calc`` in obdclass/lu_tgt_descs.c from 2.14): mark the space
        dirty when any OST's free space or activity changed, recompute the penalties then;
        QosUnavailable when QOS declines (balanced space, fewer than 2 active OSTs)."""
        # DIRTY: any statfs bavail changed, or an OST was (de)activated.
        # Read only when the snapshot's version moved: at a steady version a declined
        # QOS (balanced space) costs O(1) before round-robin's O(stripe count).
        view = version_key(snapshot)
        if view is None or view != self._space_view:
            space_key = tuple((o.index, o.active, o.kbytes_avail) for o in snapshot.osts)
            if space_key != self._space_key:
                self._space_key = space_key
                self._dirty = True
            self._active_count = sum(1 for o in snapshot.osts if o.active)
            self._space_view = view
        active_count = self._active_count
        if (not self._dirty and self._same_space) or active_count < 2:
            raise QosUnavailable(BALANCED if active_count >= 2 else "fewer than 2 active OSTs")
        if self._dirty:
            self._calc_penalties(snapshot, now)

    def _alloc_qos(self, snapshot: ClusterSnapshot, members: list[OstState], count: int) -> list[int]:
        now = int(snapshot.time_s)
        self._read_space(snapshot, now)
        candidates = [o for o in members if is_usable(o) and not o.flags & OstFlag.DEGRADED]
        if len(candidates) < count:
            raise QosUnavailable(f"{len(candidates)} QOS candidates for {count} stripes")
        for ost in candidates:
            self._weight(ost)
        usable = {o.index for o in candidates}
        total = sum(self._ost[o.index].weight for o in candidates)
        chosen: list[int] = []
        slow = False
        while len(chosen) < count:
            r = self._rng.randrange(total) if total > 0 else 0
            cum = 0
            taken = None
            for ost in candidates:
                if ost.index not in usable:
                    continue
                cum += self._ost[ost.index].weight
                if cum < r:
                    continue
                if not slow and ost.files_precreated == 0:
                    continue  # object reservation fails until precreation catches up
                taken = ost
                break
            if taken is None:
                if not slow:
                    slow = True
                    continue
                break
            chosen.append(taken.index)
            usable.discard(taken.index)
            total = self._used(snapshot, taken, now, candidates, usable)
        if len(chosen) < count:
            self._dirty = True
            self._same_space = False
            raise QosUnavailable(f"QOS found {len(chosen)} of {count} stripes")
        return chosen

    def _used(self, snapshot: ClusterSnapshot, ost: OstState, now: int,
              candidates: list[OstState], usable: set[int]) -> int:
        """Charge a taken OST and its OSS; decay all penalties; return the new total."""
        tq = self._ost[ost.index]
        srv = self._srv[ost.oss]
        tq.penalty >>= 1
        srv.penalty >>= 1
        tq.used_s = srv.used_s = now
        tq.penalty += tq.penalty_per_obj * self._active_osts
        srv.penalty += srv.penalty_per_obj * self._active_servers
        for s in self._srv.values():
            s.penalty = 0 if s.penalty < s.penalty_per_obj else s.penalty - s.penalty_per_obj
        for o in snapshot.osts:
            if not o.active or o.index not in self._ost:
                continue
            t = self._ost[o.index]
            t.penalty = 0 if t.penalty < t.penalty_per_obj else t.penalty - t.penalty_per_obj
        total = 0
        for o in candidates:
            w = self._weight(o)
            if o.index in usable:
                total += w
        return total
