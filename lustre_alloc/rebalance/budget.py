"""The migration budget: when a move may start, so that moving data never crowds out jobs.

Four limits, each a site's knob with a borrowed default (:class:`BudgetParams`):

* **bandwidth per OST**: a move reads its file from the old OSTs and writes it to the new
  ones; each OST may spend ``ost_share`` of its measured bandwidth on moves, reads plus
  writes (a disk cannot do both at full speed: Pufferscale, Cheriere et al. 2020, Eq. 21).
  Kept as a token bucket per OST refilled at ``ost_share x rate``: a move starts only while
  every OST it touches is out of debt, and charges each its part (bytes / stripe count), so
  over any long span an OST gives moves at most its share (plus one file).
* **moves per OSS**: at most ``max_per_oss`` running moves touch an OSS (CERN EOS's
  balancer and drainer run 2 transfers per node).
* **all moves together** (``max_mib_s``, 0: no limit): a token bucket like the per-OST
  one, over the whole file system (an admin's absolute cap); with ``-W`` each move's cap is
  also at most this.
* **data in flight**: the bytes of running moves stay under ``max_in_flight_ratio`` of the
  file system's used space (Ceph's balancer, ``target_max_misplaced_ratio`` = 5%).
* **bytes in flight per OST** (only when moves run uncapped: without ``lfs migrate -W``,
  i.e. on every client before Lustre 2.16 and whenever ``lfs_bandwidth_option`` is off):
  each move then copies at whatever speed the OSTs give it, so the bandwidth share above
  bounds only the long-run average (it spaces the starts: after a move of ``b`` bytes on an
  OST, the next waits ``b / (ost_share x rate)``). The running moves touching an OST hold
  at most ``ost_in_flight_mib`` (a single larger file runs alone on its OSTs): this bounds
  how much copying competes with jobs on an OST at once, so a burst at full speed ``F``
  lasts at most ``max(ost_in_flight_mib, largest part) / F``; the share keeps the average.
  With ``-W`` (Lustre 2.16+, ``lfs_bandwidth_option``) every move is also rate-capped at
  :meth:`MigrationBudget.bandwidth_limit` and this limit is not applied.
* **pauses**: nothing starts while an OST is degraded or unavailable for a reason the
  service did not cause (a RAID rebuild, a failover: Ceph's balancer does nothing while
  the cluster is degraded); a move whose source OST is busy with jobs' I/O (its jobs'
  bytes/s above ``busy_share`` of its rated bandwidth, ``peak_bytes_s``: a failing OST
  that jobs keep at its own slow speed is not "busy", or it could never be evacuated) waits.

Units: bytes, bytes/s, seconds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from lustre_alloc.common.settings import setting


@dataclass(frozen=True)
class BudgetParams:
    """The ``[migrate.budget]`` table. Each key's unit, default and source are its
    :func:`~lustre_alloc.common.settings.setting` metadata."""
    ost_share: float = setting(0.1, unit="share of an OST's bandwidth", doc=(
        "each OST gives moves at most this share of its bandwidth, reads plus writes; the "
        "bandwidth is `ost_rate_mib_s` times the mapper's speed estimate over the median, so "
        "a failing OST's share is of what it does now"),
        source="Pufferscale Eq. 21 (reads and writes add on a disk); the `lfs_migrate` habit "
               "of one stream on a busy file system is about this")
    max_per_oss: int = setting(2, unit="moves", doc="moves touching one OSS at a time",
                               source="CERN EOS balancer/drainer: 2 transfers per node")
    max_in_flight_ratio: float = setting(0.05, unit="share of used bytes", doc=(
        "bytes being moved over the file system's used bytes"),
        source="Ceph `target_max_misplaced_ratio`")
    busy_share: float = setting(0.8, unit="share of an OST's bandwidth", doc=(
        "a source OST whose jobs' write rate exceeds this share of its bandwidth defers its "
        "moves"))
    ost_in_flight_mib: float = setting(1024.0, unit="MiB", doc=(
        "without `-W` only: MiB of running moves touching one OST (a larger single file runs "
        "alone on its OSTs)"),
        source="a convention (about a second of a current OST at full speed), not a measurement")
    max_mib_s: float = setting(0.0, unit="MiB/s", doc=(
        "all moves together (0: no limit beyond the per-OST shares)"))

    def __post_init__(self) -> None:
        if not 0 < self.ost_share <= 1:
            raise ValueError(f"ost_share must be in (0, 1], got {self.ost_share}")
        if type(self.max_per_oss) is not int or self.max_per_oss < 1:
            raise ValueError(f"max_per_oss must be an integer >= 1, got {self.max_per_oss!r}")
        if not 0 < self.max_in_flight_ratio <= 1:
            raise ValueError(f"max_in_flight_ratio must be in (0, 1], "
                             f"got {self.max_in_flight_ratio}")
        if not 0 < self.busy_share:
            raise ValueError(f"busy_share must be > 0, got {self.busy_share}")
        if not self.ost_in_flight_mib > 0:
            raise ValueError(f"ost_in_flight_mib must be > 0, got {self.ost_in_flight_mib}")
        if not self.max_mib_s >= 0:
            raise ValueError(f"max_mib_s must be >= 0, got {self.max_mib_s}")


@dataclass
class OstLoad:
    """What the budget needs to know of one OST now.

    Attributes:
        oss: the OSS serving it.
        rate_bytes_s: its measured bandwidth, bytes/s (the budget's share is of it).
        jobs_bytes_s: jobs' write bytes/s in the last sample.
        faulty: degraded or unavailable for a reason the service did not cause (None: fine).
    """
    oss: str
    rate_bytes_s: float
    jobs_bytes_s: float = 0.0
    faulty: str | None = None
    peak_bytes_s: float | None = None
    """Its rated bandwidth, bytes/s, what "busy" is measured against (None: ``rate_bytes_s``)."""


@dataclass
class Move:
    """A move the budget is asked about: ``size`` bytes from ``from_osts`` to ``to_osts``."""
    file: str
    size: float
    from_osts: list[int]
    to_osts: list[int]

    def parts(self) -> dict[int, float]:
        """Bytes each OST reads or writes for this move (reads and writes add up)."""
        out: dict[int, float] = {}
        for osts in (self.from_osts, self.to_osts):
            for o in osts:
                out[o] = out.get(o, 0.0) + self.size / len(osts)
        return out


@dataclass
class MigrationBudget:
    """The limits of the module doc over the moves running now (kept incrementally: a
    check costs the move's OSTs, not the moves running). ``rate_capped``: moves run with
    ``lfs migrate -W`` (then the per-OST bytes in flight are not limited)."""
    params: BudgetParams
    rate_capped: bool = False
    ost_bytes: dict[int, float] = field(default_factory=dict)  # OST -> bytes of its moves
    tokens: dict[int, float] = field(default_factory=dict)    # OST -> bytes it may still spend
    running: dict[str, Move] = field(default_factory=dict)
    per_oss: dict[str, int] = field(default_factory=dict)     # OSS -> moves touching it
    _osses: dict[str, set[str]] = field(default_factory=dict)  # file -> OSSes of its move
    _in_flight: float = 0.0
    _last_s: float | None = None
    _fs_tokens: float = 0.0

    @property
    def _fs_rate(self) -> float:
        return self.params.max_mib_s * (1 << 20)

    def refill(self, now_s: float, osts: Mapping[int, OstLoad]) -> None:
        """Credit each OST ``ost_share x rate`` per second since the last call (a full
        bucket holds one second of it; debt is paid off the same way)."""
        dt = 0.0 if self._last_s is None else max(0.0, now_s - self._last_s)
        self._last_s = now_s
        for o, load in osts.items():
            per_s = self.params.ost_share * load.rate_bytes_s
            self.tokens[o] = min(self.tokens.get(o, per_s) + per_s * dt, per_s)
        if self._fs_rate:
            self._fs_tokens = min(self._fs_tokens + self._fs_rate * dt, self._fs_rate)

    def paused(self, osts: Mapping[int, OstLoad]) -> str | None:
        """Why nothing may start now (an OST degraded or unavailable, not by us), or None."""
        for o in sorted(osts):
            if osts[o].faulty:
                return f"OST {o}: {osts[o].faulty}"
        return None

    def full(self, used_bytes: float) -> bool:
        """No move of any size may start: the data in flight is at its ceiling."""
        return bool(self.running) and \
            self._in_flight >= self.params.max_in_flight_ratio * used_bytes

    def refusal(self, move: Move, osts: Mapping[int, OstLoad], used_bytes: float) -> str | None:
        """Why ``move`` may not start now, or None: it may."""
        if move.file in self.running:
            return "in flight"
        touched = move.from_osts + move.to_osts
        unknown = [o for o in touched if o not in osts]
        if unknown:
            return f"OST {unknown[0]} unknown"
        for o in move.from_osts:
            load = osts[o]
            peak = load.peak_bytes_s if load.peak_bytes_s is not None else load.rate_bytes_s
            if load.jobs_bytes_s > self.params.busy_share * peak:
                return f"OST {o} busy with jobs"
        if self.running and self._in_flight + move.size > \
                self.params.max_in_flight_ratio * used_bytes:
            return "data in flight at its ceiling"
        for oss in {osts[o].oss for o in touched}:
            if self.per_oss.get(oss, 0) >= self.params.max_per_oss:
                return f"OSS {oss} at {self.params.max_per_oss} moves"
        if not self.rate_capped:
            cap = self.params.ost_in_flight_mib * (1 << 20)
            for o, b in move.parts().items():
                held = self.ost_bytes.get(o, 0.0)
                if held > 0 and held + b > cap:
                    return f"OST {o} at {self.params.ost_in_flight_mib:g} MiB in flight"
        for o in move.parts():
            if self.tokens.get(o, 0.0) < 0:
                return f"OST {o} over its bandwidth share"
        if self._fs_rate and self._fs_tokens < 0:
            return f"all moves at {self.params.max_mib_s:g} MiB/s"
        return None

    def start(self, move: Move, osts: Mapping[int, OstLoad]) -> None:
        """Count ``move`` as running and charge each OST its part."""
        self.running[move.file] = move
        self._in_flight += move.size
        osses = {osts[o].oss for o in move.from_osts + move.to_osts if o in osts}
        self._osses[move.file] = osses
        for oss in osses:
            self.per_oss[oss] = self.per_oss.get(oss, 0) + 1
        for o, b in move.parts().items():
            self.tokens[o] = self.tokens.get(o, 0.0) - b
            self.ost_bytes[o] = self.ost_bytes.get(o, 0.0) + b
        if self._fs_rate:
            self._fs_tokens -= move.size

    def end(self, file: str) -> None:
        move = self.running.pop(file, None)
        if move is None:
            return
        self._in_flight -= move.size
        for o, b in move.parts().items():
            self.ost_bytes[o] = max(0.0, self.ost_bytes.get(o, 0.0) - b)
        for oss in self._osses.pop(file, ()):
            self.per_oss[oss] -= 1

    def bandwidth_limit(self, move: Move, osts: Mapping[int, OstLoad]) -> float:
        """A per-move rate cap, bytes/s, for ``lfs migrate --bandwidth`` (Lustre 2.16+):
        the smallest share over the OSTs it touches, split among the moves an OSS may run.
        0 when moves are not rate-capped (no ``-W``: they run at the OSTs' speed)."""
        if not self.rate_capped:
            return 0.0
        shares = [self.params.ost_share * osts[o].rate_bytes_s
                  for o in move.from_osts + move.to_osts if o in osts]
        if self._fs_rate:
            shares.append(self._fs_rate)
        return min(shares) / self.params.max_per_oss if shares else 0.0

    def in_flight_bytes(self) -> float:
        return self._in_flight


def faulty_reason(degraded: bool, available: bool, steered_by_us: bool) -> str | None:
    """Why an OST pauses the migrations, or None: degraded or unavailable for a reason the
    service did not cause (the mapper's own steering sets ``degraded`` on slow OSTs: that
    is the evacuation's cause, not a fault)."""
    if not available:
        return "unavailable"
    if degraded and not steered_by_us:
        return "degraded"
    return None


def loads_from_view(view_osts: Iterable[Mapping], rate_bytes_s: float) -> dict[int, OstLoad]:
    """``{index: OstLoad}`` from the mapper's ``migration_view`` OST entries: each OST's
    bandwidth is ``rate_bytes_s`` (its rating) times its speed ratio, jobs' load its write
    rate, and it is faulty if degraded or unavailable not by the mapper's steering."""
    return {int(o["ost"]): OstLoad(
        oss=str(o["oss"]), rate_bytes_s=rate_bytes_s * max(float(o.get("speed_ratio", 1.0)), 1e-3),
        jobs_bytes_s=float(o.get("jobs_bytes_s", 0.0)), peak_bytes_s=rate_bytes_s,
        faulty=faulty_reason(bool(o.get("degraded")), bool(o.get("available", True)),
                             bool(o.get("steered")))) for o in view_osts}
