"""Events on a scenario's timeline (``[[event]]`` tables): what happens to the servers.

Each event has ``at_s`` (seconds from the start, ``0 <= at_s < duration_s``) and a ``kind``:

``degrade``
    ``ost = i | [i, ...]`` or ``oss = s | [s, ...]`` (OSS position, ``oss0`` = 0) run at
    ``fraction`` (0 < f <= 1) of their bandwidth for ``duration_s`` (default: to the end):
    a RAID rebuild or a slow disk (OST: its write and read bandwidth; the collectors' sample
    reports ``degraded = 1``, obdfilter's flag, as the RAID layer raises it, unless
    ``flagged = false``: a fail-slow drive or a straggler nothing in Lustre flags), a sick server
    (OSS: every OST on it and its NIC/CPU limit; no ``degraded`` flag, nothing on the
    server raises one). Overlapping degradations multiply.
``ost_state``
    ``ost = i | [...]``, ``state`` one of ``inactive`` (the MDS's OSP is deactivated: no
    new objects, I/O to existing objects continues), ``deactivated`` (the same, for
    removal: ``max_create_count = 0`` then drain), ``readonly`` (no new objects; writes to
    it stall, reads continue), ``failed`` (no new objects; all I/O to it stalls, as clients
    block in recovery) for ``duration_s`` (default: to the end), then ``active`` again.
``add_osts``
    ``count`` new, empty OSTs on ``count / osts_per_oss`` new OSSes (a file-system
    expansion); ``ost_size_gib`` (default: the median OST size), ``bandwidth_mib_s``
    (default: the median OST bandwidth), ``osts_per_oss`` (default: the cluster's).
``failover``
    OSS ``oss``'s OSTs move to OSS ``to_oss``: for ``recovery_s`` (default 0) their I/O
    stalls and they take no new objects (recovery), then they are served by ``to_oss``
    (its NIC/CPU limit shared by both sets of OSTs) until failback after ``duration_s``
    (default: never).
``fail_slow``
    fail-slow drives at a measured incidence, drawn per run from the seed
    (:mod:`lustre_alloc.simulator.fail_slow`): ``drives_per_ost``, ``rate_per_drive_day``,
    ``persistence_days``, ``fraction``; ``at_s = 0``. Each slow OST becomes an unflagged
    ``degrade`` (:func:`lustre_alloc.simulator.fail_slow.realise`, called by the engine).

Errors are one line naming the file and ``event[i].key``; every check that does not need
the built cluster is done by :func:`parse_events`, the rest by :func:`check_events`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lustre_alloc.simulator import fail_slow
from lustre_alloc.simulator.network.transfers import Storage

KINDS = ("degrade", "ost_state", "add_osts", "failover", "fail_slow")
OST_STATES = ("inactive", "deactivated", "readonly", "failed", "active")


class EventError(ValueError):
    """A bad ``[[event]]`` table; ``str()`` is one line naming the file and key."""


@dataclass(frozen=True)
class Event:
    """One parsed event (see the module doc). Times in seconds; ``end_s`` is inf when the
    event lasts to the end of the run."""
    index: int
    kind: str
    at_s: float
    end_s: float = math.inf
    osts: tuple[int, ...] = ()
    osses: tuple[int, ...] = ()
    fraction: float = 1.0
    state: str = ""
    count: int = 0
    ost_size_gib: float | None = None
    bandwidth_mib_s: float | None = None
    osts_per_oss: int | None = None
    to_oss: int = -1
    recovery_s: float = 0.0
    flagged: bool = True
    extra: dict = field(default_factory=dict)


def _ints(where: str, key: str, raw: Any) -> tuple[int, ...]:
    vals = raw if isinstance(raw, list) else [raw]
    if not vals or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in vals):
        raise EventError(f"{where}{key}: expected an index >= 0 or a list of them, got {raw!r}")
    return tuple(vals)


def _num(where: str, key: str, raw: Any, lo: float, lo_open: bool = False,
         hi: float | None = None) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise EventError(f"{where}{key}: expected a number, got {raw!r}")
    if raw < lo or (lo_open and raw == lo) or (hi is not None and raw > hi):
        rng = f"{'>' if lo_open else '>='} {lo:g}" + (f" and <= {hi:g}" if hi is not None else "")
        raise EventError(f"{where}{key}: must be {rng}, got {raw}")
    return float(raw)


def parse_events(path: Path, raw: Any, duration_s: float) -> tuple[Event, ...]:
    """Parse and check the ``[[event]]`` tables of scenario ``path``.

    Raises:
        EventError: unknown kind or key, missing key, a negative or out-of-range value,
            an event at or after the end of the run.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise EventError(f"{path}: event: expected [[event]] tables")
    out = []
    for i, t in enumerate(raw):
        where = f"{path}: event[{i}]."
        if not isinstance(t, dict):
            raise EventError(f"{where[:-1]}: expected a table")
        kind = t.get("kind")
        if kind in ("rebalance", "migrate"):    # parsed by lustre_alloc.simulator.rebalance.plan_event, .evacuation
            continue
        if kind not in KINDS:
            raise EventError(f"{where}kind: unknown event kind {kind!r} "
                             f"(known: {', '.join(KINDS + ('rebalance', 'migrate'))})")
        if "at_s" not in t:
            raise EventError(f"{where}at_s: missing")
        at = _num(where, "at_s", t["at_s"], 0.0)
        if at >= duration_s:
            raise EventError(f"{where}at_s: {at:g} is at or after the end of the run ({duration_s:g} s)")
        allowed = {"kind", "at_s", "duration_s"} | _KIND_KEYS[kind]
        for k in t:
            if k not in allowed:
                raise EventError(f"{where}{k}: unknown key for kind {kind!r} "
                                 f"(known: {', '.join(sorted(allowed))})")
        end = at + _num(where, "duration_s", t["duration_s"], 0.0, lo_open=True) \
            if "duration_s" in t else math.inf
        out.append(Event(index=i, kind=kind, at_s=at, end_s=end, **_KIND_PARSERS[kind](where, t)))
    return tuple(out)


def _degrade(where: str, t: dict) -> dict[str, Any]:
    """``degrade``: ``ost`` or ``oss`` (exactly one), ``fraction`` in (0, 1], ``flagged``."""
    if ("ost" in t) == ("oss" in t):
        raise EventError(f"{where}ost|oss: exactly one of these keys is needed")
    kw: dict[str, Any] = ({"osts": _ints(where, "ost", t["ost"])} if "ost" in t
                          else {"osses": _ints(where, "oss", t["oss"])})
    if "fraction" not in t:
        raise EventError(f"{where}fraction: missing")
    kw["fraction"] = _num(where, "fraction", t["fraction"], 0.0, lo_open=True, hi=1.0)
    if not isinstance(t.get("flagged", True), bool):
        raise EventError(f"{where}flagged: expected true or false, got {t['flagged']!r}")
    kw["flagged"] = t.get("flagged", True)
    return kw


def _ost_state(where: str, t: dict) -> dict[str, Any]:
    """``ost_state``: ``ost`` and one of :data:`OST_STATES`."""
    if "ost" not in t:
        raise EventError(f"{where}ost: missing")
    osts = _ints(where, "ost", t["ost"])
    if t.get("state") not in OST_STATES:
        raise EventError(f"{where}state: unknown state {t.get('state')!r} "
                         f"(known: {', '.join(OST_STATES)})")
    return {"osts": osts, "state": t["state"]}


def _positive_int(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EventError(f"{where}{key}: expected an integer >= 1, got {value!r}")
    return value


def _add_osts(where: str, t: dict) -> dict[str, Any]:
    """``add_osts``: ``count`` (>= 1), optional ``ost_size_gib``, ``bandwidth_mib_s`` and
    ``osts_per_oss``; permanent (no ``duration_s``)."""
    if "count" not in t:
        raise EventError(f"{where}count: missing")
    kw: dict[str, Any] = {"count": _positive_int(where, "count", t["count"])}
    for key in ("ost_size_gib", "bandwidth_mib_s"):
        if key in t:
            kw[key] = _num(where, key, t[key], 0.0, lo_open=True)
    if "osts_per_oss" in t:
        kw["osts_per_oss"] = _positive_int(where, "osts_per_oss", t["osts_per_oss"])
    if "duration_s" in t:
        raise EventError(f"{where}duration_s: an expansion is permanent")
    return kw


def _failover(where: str, t: dict) -> dict[str, Any]:
    """``failover``: one ``oss`` to another ``to_oss``, ``recovery_s`` (default 0)."""
    for k in ("oss", "to_oss"):
        if k not in t:
            raise EventError(f"{where}{k}: missing")
    osses = _ints(where, "oss", t["oss"])
    if len(osses) != 1:
        raise EventError(f"{where}oss: one OSS per failover")
    to_oss = _ints(where, "to_oss", t["to_oss"])[0]
    if to_oss == osses[0]:
        raise EventError(f"{where}to_oss: the same OSS as oss")
    return {"osses": osses, "to_oss": to_oss,
            "recovery_s": _num(where, "recovery_s", t.get("recovery_s", 0.0), 0.0)}


_KIND_KEYS: dict[str, set[str]] = {
    "degrade": {"ost", "oss", "fraction", "flagged"}, "ost_state": {"ost", "state"},
    "add_osts": {"count", "ost_size_gib", "bandwidth_mib_s", "osts_per_oss"},
    "failover": {"oss", "to_oss", "recovery_s"}, "fail_slow": set(fail_slow.KEYS)}
"""Each kind's own keys, beside ``kind``, ``at_s`` and ``duration_s``."""
_KIND_PARSERS = {
    "degrade": _degrade, "ost_state": _ost_state, "add_osts": _add_osts, "failover": _failover,
    "fail_slow": lambda where, t: fail_slow.parse(where, t, _num, EventError)}
"""Each kind's parser: ``(where, table) -> the Event fields of that kind``."""


def added_osts(events: tuple[Event, ...]) -> int:
    """OSTs the expansions add over the run."""
    return sum(e.count for e in events if e.kind == "add_osts")


def check_events(path: Path, events: tuple[Event, ...], ost_count: int, oss_count: int) -> None:
    """Check OST/OSS indices against the built cluster (before any run).

    ``ost_count``/``oss_count`` are those at t=0; an event may name an OST or OSS that an
    earlier expansion added.

    Raises:
        EventError: an index out of range.
    """
    n, s = ost_count, oss_count
    for e in sorted(events, key=lambda e: e.at_s):
        where = f"{path}: event[{e.index}]."
        if e.kind == "add_osts":
            per = e.osts_per_oss or 1
            n += e.count
            s += math.ceil(e.count / per)
            continue
        for o in e.osts:
            if o >= n:
                raise EventError(f"{where}ost: OST {o} out of range (the cluster has OSTs "
                                 f"0..{n - 1} at t={e.at_s:g})")
        for k in e.osses:
            if k >= s:
                raise EventError(f"{where}oss: OSS {k} out of range (the cluster has OSSes "
                                 f"0..{s - 1} at t={e.at_s:g})")
        if e.kind == "failover" and e.to_oss >= s:
            raise EventError(f"{where}to_oss: OSS {e.to_oss} out of range (0..{s - 1})")


@dataclass
class EffectiveState:
    """The servers' state at one moment, from the events active then (arrays over OSTs
    (N,) or OSSes (S,) of the pre-sized cluster).

    Attributes:
        bw_factor: multiplier of each OST's bandwidth (degradations).
        write_stalled, read_stalled: I/O to the OST makes no progress.
        available: the OST may take new objects (the collectors' ``available``).
        degraded: obdfilter ``degraded`` flag.
        ost_oss: the OSS serving each OST (failover).
        oss_factor: multiplier of each OSS's NIC/CPU limit.
        present: the OST exists (expansion).
    """
    bw_factor: np.ndarray
    write_stalled: np.ndarray
    read_stalled: np.ndarray
    available: np.ndarray
    unavailable_reason: list[str]
    degraded: np.ndarray
    ost_oss: np.ndarray
    oss_factor: np.ndarray
    present: np.ndarray


def effective_state(events: tuple[Event, ...], now: float, base_ost_oss: np.ndarray,
                    oss_count: int, initial_osts: int) -> EffectiveState:
    """The state at ``now`` from every event with ``at_s <= now < end_s`` (in order).

    ``base_ost_oss`` maps each of the N pre-sized OSTs to its home OSS; OSTs at positions
    >= ``initial_osts`` exist only after their expansion event.
    """
    n = base_ost_oss.shape[0]
    st = EffectiveState(bw_factor=np.ones(n), write_stalled=np.zeros(n, bool),
                        read_stalled=np.zeros(n, bool), available=np.ones(n, bool),
                        unavailable_reason=[""] * n, degraded=np.zeros(n, bool),
                        ost_oss=base_ost_oss.copy(), oss_factor=np.ones(oss_count),
                        present=np.arange(n) < initial_osts)
    next_new = initial_osts
    for e in sorted(events, key=lambda e: (e.at_s, e.index)):
        if e.kind == "add_osts":
            if e.at_s <= now:
                st.present[next_new:next_new + e.count] = True
            next_new += e.count
            continue
        if not (e.at_s <= now < e.end_s):
            continue
        if e.kind == "degrade":
            if e.osts:
                idx = np.array(e.osts)
                st.bw_factor[idx] *= e.fraction
                if e.flagged:
                    st.degraded[idx] = True
            else:
                for s in e.osses:
                    st.bw_factor[base_ost_oss == s] *= e.fraction
                    st.oss_factor[s] *= e.fraction
        elif e.kind == "ost_state":
            for o in e.osts:
                if e.state == "active":
                    st.available[o] = True
                    st.write_stalled[o] = st.read_stalled[o] = False
                    st.unavailable_reason[o] = ""
                    continue
                st.available[o] = False
                st.unavailable_reason[o] = e.state
                if e.state in ("readonly", "failed"):
                    st.write_stalled[o] = True
                if e.state == "failed":
                    st.read_stalled[o] = True
        else:
            moved = base_ost_oss == e.osses[0]
            if now < e.at_s + e.recovery_s:
                st.available[moved] = False
                st.write_stalled[moved] = st.read_stalled[moved] = True
                for o in np.nonzero(moved)[0]:
                    st.unavailable_reason[o] = "recovery"
            st.ost_oss[moved] = e.to_oss
    return st


def held_at_start(events: tuple[Event, ...]) -> tuple[Event, ...]:
    """The servers' state at t = 0 held for a whole run: the events active at the start,
    lasting to its end; those starting later left out. What the day before a run looked
    like to a mapper that was already running (``bench/placement_eval.py``'s warm start):
    it learns what was true at t = 0, never an onset still to come."""
    from dataclasses import replace
    return tuple(replace(e, end_s=math.inf) for e in events if e.at_s <= 0)


def transition_times(events: tuple[Event, ...]) -> list[float]:
    """Sorted distinct times at which the effective state may change."""
    times = set()
    for e in events:
        times.add(e.at_s)
        if math.isfinite(e.end_s):
            times.add(e.end_s)
        if e.kind == "failover" and e.recovery_s > 0:
            times.add(e.at_s + e.recovery_s)
    return sorted(times)


def storage_under(st: "EffectiveState", cl: Any, base: Storage) -> Storage:
    """What the servers deliver under the events' effective state ``st``: each OST's write
    and read bandwidth scaled by its factor (0 where stalled), each OSS's limit by its
    factor, the serving OSS of each OST (failover); ``cl`` is the simulated cluster and
    ``base`` its storage without events."""
    w = cl.bandwidth_bytes_s * st.bw_factor
    r = (cl.read_bandwidth_bytes_s if cl.read_bandwidth_bytes_s is not None
         else cl.bandwidth_bytes_s) * st.bw_factor
    w = np.where(st.write_stalled, 0.0, w)
    r = np.where(st.read_stalled, 0.0, r)
    cap = None if base.oss_cap_bytes_s is None else base.oss_cap_bytes_s * st.oss_factor
    return Storage(ost_oss=st.ost_oss, oss_count=len(cl.oss_names), ost_bandwidth_bytes_s=w,
                   ost_read_bandwidth_bytes_s=r, oss_cap_bytes_s=cap,
                   ost_latency_s=base.ost_latency_s)
