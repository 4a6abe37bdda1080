"""The steering controller: which OSTs Lustre's own allocator should stop giving new objects,
decided from the per-OST speed estimates the placement uses.

Lustre has two knobs that steer its own allocator (LOD) away from an OST while the OST stays
readable (``docs/operations.md``, "Steering Lustre's allocator"):

* ``degraded``: ``obdfilter.<fsname>-OST<idx>.degraded=1`` on the OSS. The OST reports
  ``OS_STATFS_DEGRADED``; LOD's QOS allocator skips it and round-robin takes it only on its
  last pass (``lod_qos.c``, LU-522; :mod:`lustre_alloc.mapper.policies.round_robin`).
* ``drain``: ``osp.<fsname>-OST<idx>-osc-MDT<idx>.max_create_count=0`` on the MDS. The OSP
  reports NOPRECREATE and neither RR nor QOS places an object there (Lustre Operations
  Manual, "Removing an OST from the File System").

The rule, at every evaluation, over the active OSTs of one file system (``r_j``: the OST's
estimated write speed, :class:`lustre_alloc.mapper.speed.rates.OstRateTracker` fed only the snapshot, that is
what the collectors publish; ``m``: the median of the measured OSTs, at least
:data:`lustre_alloc.mapper.speed.rates.MIN_PEERS` of them):

* **enter** when ``r_j < m / slow_factor`` has held at every evaluation for ``confirm_s``
  (a busy OST looks slow through its own RPCs while it serves other streams, reads
  included, for minutes; a slow one stays slow), slowest first, while the steered OSTs stay within
  ``max_fraction`` of the file system and of every pool the OST belongs to, at least one OST of
  each such pool stays unsteered, and the unsteered OSTs of each such pool keep at least
  ``min_free_share`` of its available space (steering never leaves a pool's new objects to
  the OSTs that have no room);
* **leave** when ``r_j >= m / recover_factor`` (hysteresis: ``recover_factor < slow_factor``)
  and the action is at least ``min_dwell_s`` old, or when keeping it would break the share
  or space rules above;
* a steered OST gets few or no new objects, so its samples soon carry no evidence; the
  tracker then relaxes its estimate toward the median with time constant ``rate_relax_s``
  (never reset at once), which is how a recovered OST is retried: after about
  ``rate_relax_s`` it leaves, takes new objects, and shows its speed again;
* **bounded retries**: an OST steered again within ``action_lease_s`` of being returned was not
  recovered; each such strike doubles its minimum dwell (``min_dwell_s * 2**strikes``, at most
  :data:`MAX_DWELL_DOUBLINGS` doublings), so a still-slow OST is retried less and less often
  (exponential backoff, as a circuit breaker retries); a return that lasts ``action_lease_s``
  clears the strikes;
* every action is a **lease** of ``action_lease_s``: the agent that applied it undoes it unless the
  controller renews it (renewed once less than half is left), so a mapper that dies leaves
  nothing steered for longer than ``action_lease_s``.

An OST already flagged by someone else (a RAID script's ``degraded``, an admin's drain) is not
ours: the controller never takes it over and never undoes it.

The controller only decides. The mapper service sends its decisions to the agents
(:mod:`lustre_alloc.mapper.steer.service`); the simulator applies them to the snapshot Lustre's allocator
sees (:mod:`lustre_alloc.mapper.policies.steered_qos`). One rule in both.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import numpy as np

from lustre_alloc.common.settings import setting
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.speed.rates import MIN_PEERS
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstFlag, OstState

ACTIONS = {"degraded": OstFlag.DEGRADED, "drain": OstFlag.NOPRECREATE}
"""Action name -> the statfs bit Lustre's allocator sees once the action is applied."""
MODES = ("off", "dry_run", "on")
MAX_DWELL_DOUBLINGS = 4
"""Most doublings of a still-slow OST's minimum dwell (ours: 600 s grows to 160 min, longer
than the hourly jobs of the bundled worlds' traces, shorter than a working day)."""


@dataclass(frozen=True)
class SteerParams:
    """The ``[steer]`` table of the mapper's configuration (and of a scenario's
    ``[policy_params.qos_steer]``).

    Each key's unit, default and source are its :func:`~lustre_alloc.common.settings.setting`
    metadata (docs/operations.md's ``[steer]`` table is generated from them).

    Raises:
        ValueError: from :meth:`check`, naming the key.
    """
    mode: str = setting("off", unit="off/dry_run/on", doc=(
        "`off`; `dry_run`: decide and log, touch nothing; `on`: act through the collectors' "
        "agents"))
    action: str = setting("degraded", unit="degraded/drain", doc=(
        "`degraded`: `obdfilter.*.degraded=1`, Lustre's own \"this OST is slow\" flag "
        "(LU-522); `drain`: `osp.*.max_create_count=0` on every MDS"))
    slow_factor: float = setting(3.0, unit="x the median", doc=(
        "an OST this many times slower than the median of the measured OSTs is steered"),
        source="the straggler rule's factor (lustre_alloc/mapper/flow/stragglers.py)")
    recover_factor: float = setting(1.5, unit="x the median", doc=(
        "a steered OST within this factor of the median is returned (1 < recover_factor < "
        "slow_factor: the hysteresis band)"))
    confirm_s: float = setting(120.0, unit="s", doc=(
        "an OST must stay below the threshold this long before it is steered"),
        source="a busy OST looks slow through its own RPCs for minutes; a slow one stays slow")
    min_dwell_s: float = setting(600.0, unit="s", doc=(
        "an action stays at least this long (no flapping); doubled per strike, at most "
        "4 doublings"))
    action_lease_s: float = setting(900.0, unit="s", doc=(
        "an action lasts this long unless renewed (renewed with half left): the agent undoes "
        "it otherwise, so a mapper that dies leaves nothing steered longer; an OST steered "
        "again within it of a return was not recovered (a strike)"))
    max_fraction: float = setting(0.1, unit="share of OSTs", doc=(
        "most OSTs steered at once, of the file system and of each pool, in (0, 1)"))
    min_free_share: float = setting(0.5, unit="share of kbytesavail", doc=(
        "the unsteered OSTs of a pool keep at least this share of its available space"))
    rate_smoothing: float = setting(0.05, unit="weight 0..1", development=True, doc=(
        "weight of a new sample in the steering's speed estimate (slower than the placement's "
        "0.3: steering waits `confirm_s` anyway); tests set 1 to react at once"))
    rate_relax_s: float = setting(1800.0, unit="s", doc=(
        "time constant of a quiet (steered) OST's estimate relaxing toward the median: how a "
        "recovered OST is retried"))

    def check(self) -> "SteerParams":
        """Validate every key; returns self.

        Raises:
            ValueError: the first key out of range, named.
        """
        if self.mode not in MODES:
            raise ValueError(f"steer mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.action not in ACTIONS:
            raise ValueError(f"steer action must be degraded or drain, not {self.action!r}")
        if not 1.0 < self.recover_factor < self.slow_factor:
            raise ValueError("steer needs 1 < recover_factor < slow_factor, got "
                             f"{self.recover_factor} and {self.slow_factor}")
        if self.min_dwell_s < 0 or self.confirm_s < 0 or not self.action_lease_s > 0:
            raise ValueError("steer min_dwell_s and confirm_s must be >= 0 and action_lease_s > 0")
        if not 0.0 < self.max_fraction < 1.0:
            raise ValueError(f"steer max_fraction must be in (0, 1), got {self.max_fraction}")
        if not 0.0 <= self.min_free_share < 1.0:
            raise ValueError(f"steer min_free_share must be in [0, 1), got {self.min_free_share}")
        if not 0.0 < self.rate_smoothing <= 1.0 or not self.rate_relax_s > 0:
            raise ValueError("steer rate_smoothing must be in (0, 1] and rate_relax_s > 0")
        return self

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> "SteerParams":
        """From a TOML table.

        Raises:
            ValueError: an unknown key (named) or a value out of range.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ValueError(f"unknown [steer] key {unknown[0]!r} (known: {', '.join(sorted(known))})")
        return cls(**dict(table)).check()


@dataclass
class SteerAction:
    """One OST steered by this controller.

    Attributes:
        ost: OST index.
        kind: ``degraded`` or ``drain``.
        since_s: when it was applied, s (snapshot clock).
        until_s: when its lease ends unless renewed, s.
        reason: why, one line with the evidence.
        rate_bytes_s, median_bytes_s: the evidence at the last decision, bytes/s.
        slow_since_s: since when the OST has been steered for slowness, s: ``since_s``,
            or for a strike (steered again within ``action_lease_s`` of a return that did not
            last) the first action's, so a probe does not restart the count (the
            migration service's ``evacuate_after_s`` reads it).
    """
    ost: int
    kind: str
    since_s: float
    until_s: float
    reason: str
    rate_bytes_s: float
    median_bytes_s: float
    slow_since_s: float = -1.0

    def __post_init__(self) -> None:
        if self.slow_since_s < 0:
            self.slow_since_s = self.since_s

    def as_dict(self) -> dict[str, Any]:
        return {"ost": self.ost, "kind": self.kind, "since_s": self.since_s,
                "slow_since_s": self.slow_since_s,
                "until_s": self.until_s, "reason": self.reason,
                "rate_bytes_s": self.rate_bytes_s, "median_bytes_s": self.median_bytes_s}


@dataclass
class SteerDecision:
    """What one evaluation changed: actions to apply, leases to renew, actions to undo
    (each with its reason in ``SteerAction.reason``)."""
    apply: list[SteerAction] = field(default_factory=list)
    renew: list[SteerAction] = field(default_factory=list)
    undo: list[SteerAction] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.apply or self.renew or self.undo)


class SteerController:
    """The rule of the module docstring for one file system.

    Args:
        params: the ``[steer]`` settings (checked).
    """

    def __init__(self, params: SteerParams):
        self.params = params.check()
        self.tracker = OstRateTracker(smoothing=params.rate_smoothing, relax_s=params.rate_relax_s)
        self.active: dict[int, SteerAction] = {}
        self.strikes: dict[int, int] = {}
        self._returned_s: dict[int, float] = {}     # when each OST was last returned
        self._slow_since: dict[int, float] = {}     # the returned action's slow_since_s
        self._below_since: dict[int, float] = {}    # since when each OST looks slow
        self.counts = {"applied": 0, "undone": 0, "renewed": 0, "refused": 0}

    @property
    def flag(self) -> OstFlag:
        """The statfs bit this controller's action makes Lustre's allocator see."""
        return ACTIONS[self.params.action]

    def evaluate(self, snapshot: ClusterSnapshot, now_s: float) -> SteerDecision:
        """Fold in the snapshot's new samples and decide (the module docstring's rule).

        Args:
            snapshot: the mapper's view (only what the collectors publish).
            now_s: the decision time, s, on the clock of the snapshot's sample times.
        Returns:
            the changes; :attr:`active` is updated to match.
        """
        p = self.params
        self.tracker.update(snapshot.osts)
        out = SteerDecision()
        live = {o.index: o for o in snapshot.osts if o.active}
        measured = [i for i in live if i in self.tracker.rate]
        if len(measured) < MIN_PEERS:
            for act in list(self.active.values()):
                self._undo(act, "too few measured OSTs to compare", out)
            return out
        rate = dict(zip(measured, self.tracker.rates(measured).tolist()))
        median = float(np.median(list(rate.values())))
        for act in sorted(self.active.values(), key=lambda a: a.ost):
            r = rate.get(act.ost, median)
            act.rate_bytes_s, act.median_bytes_s = r, median
            if act.ost not in live:
                self._undo(act, "OST no longer active", out)
            elif r >= median / p.recover_factor and now_s - act.since_s >= self.dwell_s(act.ost):
                self._returned_s[act.ost] = now_s
                self._slow_since[act.ost] = act.slow_since_s
                self._undo(act, f"recovered: {_mb(r)} MB/s >= median {_mb(median)} / "
                                f"{p.recover_factor}", out)
            elif not self._safe(snapshot, set(self.active) - {act.ost}, act.ost):
                self._undo(act, "share or free-space rule no longer holds", out)
            elif act.until_s - now_s < p.action_lease_s / 2:
                act.until_s = now_s + p.action_lease_s
                self.counts["renewed"] += 1
                out.renew.append(act)
        below = {i for i, r in rate.items() if r < median / p.slow_factor}
        self._below_since = {i: self._below_since.get(i, now_s) for i in below}
        slow = sorted((rate[i], i) for i in below
                      if now_s - self._below_since[i] >= p.confirm_s and i not in self.active
                      and not live[i].flags & self.flag)        # flagged by someone else
        for r, i in slow:
            if not self._safe(snapshot, set(self.active), i):
                self.counts["refused"] += 1
                continue
            returned = self._returned_s.pop(i, None)
            slow_since = self._slow_since.pop(i, now_s)
            if returned is not None and now_s - returned < p.action_lease_s:
                self.strikes[i] = min(self.strikes.get(i, 0) + 1, MAX_DWELL_DOUBLINGS)
            else:
                self.strikes.pop(i, None)
                slow_since = now_s
            act = SteerAction(i, p.action, now_s, now_s + p.action_lease_s,
                              f"slow: {_mb(r)} MB/s < median {_mb(median)} / {p.slow_factor}",
                              r, median, slow_since)
            self.active[i] = act
            self.counts["applied"] += 1
            out.apply.append(act)
        return out

    def dwell_s(self, ost: int) -> float:
        """Minimum dwell of an action on ``ost`` now, s: ``min_dwell_s * 2**strikes``."""
        return self.params.min_dwell_s * 2 ** self.strikes.get(ost, 0)

    def _undo(self, act: SteerAction, reason: str, out: SteerDecision) -> None:
        del self.active[act.ost]
        act.reason = reason
        self.counts["undone"] += 1
        out.undo.append(act)

    def _safe(self, snapshot: ClusterSnapshot, steered: set[int], candidate: int) -> bool:
        """Whether steering ``candidate`` besides ``steered`` keeps the share and space
        rules, file system wide and in every pool that holds ``candidate``."""
        p = self.params
        groups = [[o for o in snapshot.osts]]
        groups += [[o for o in snapshot.osts if o.index in members]
                   for members in snapshot.pools.values() if candidate in members]
        after = steered | {candidate}
        for group in groups:
            if not _group_ok(group, after, p.max_fraction, p.min_free_share):
                return False
        return True

    def release_all(self, reason: str) -> list[SteerAction]:
        """Forget every action (the service undoes them at stop); returns them."""
        out = SteerDecision()
        for act in list(self.active.values()):
            self._undo(act, reason, out)
        return out.undo

    def steered_view(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """``snapshot`` as Lustre's allocator sees it once the agents applied the actions:
        the steered OSTs carry the action's statfs bit (copies; ``snapshot`` is not
        changed). The same object when nothing is steered."""
        if not self.active:
            return snapshot
        flag = self.flag
        osts = [dataclasses.replace(o, flags=o.flags | flag) if o.index in self.active else o
                for o in snapshot.osts]
        return ClusterSnapshot(osts=osts, osses=snapshot.osses, pools=snapshot.pools,
                               time_s=snapshot.time_s, mds_cpu_percent=snapshot.mds_cpu_percent)


def _group_ok(group: list[OstState], steered: set[int], max_fraction: float,
              min_free_share: float) -> bool:
    inside = [o for o in group if o.index in steered]
    if len(inside) > math.floor(max_fraction * len(group)) or len(inside) >= len(group):
        return False
    avail = sum(max(o.kbytes_avail, 0) for o in group)
    kept = sum(max(o.kbytes_avail, 0) for o in group if o.index not in steered)
    return avail == 0 or kept >= min_free_share * avail


def _mb(bytes_s: float) -> str:
    return f"{bytes_s / 1e6:.1f}"
