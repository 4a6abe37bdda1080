"""The steering agent of a collector: applies the mapper's steering actions to this server's
own targets, and undoes each when its lease runs out.

An OSS's agent flags its own OSTs ``degraded``; the MDS's agent drains OSTs by setting
``max_create_count = 0`` on its own OSP devices (one per MDT it serves). Every action is a
lease: the agent restores the value it found unless the mapper renews it within ``lease_s``,
so a mapper that dies (even by SIGKILL) leaves nothing steered for longer than that; at the
collector's own stop everything is restored.

What the agent refuses (answered with ``ok = False`` and one line, nothing changed):

* a target that is not this server's (an OSS touches only the OSTs it serves; the MDS only
  the OSP devices it has);
* an OST already flagged by someone else (``degraded`` already 1, ``max_create_count``
  already 0): an admin's or a RAID script's action is never taken over or undone;
* a kind this role does not act on, a lease beyond ``max_lease_s``, a malformed request.

The agent journals every lease to disk (``journal``: written atomically at every change, like the
mapper's state file, and *before* the parameter is set: journal first, then act) so that a collector killed with SIGKILL or by the OOM killer does not leave
an OST drained or degraded for good: at start it reads the journal and, for each parameter it
had set, restores the value it found once the lease has run out, or resumes holding it for what
is left. A parameter found changed since (an admin cleared it) is forgotten, not touched.

Two behaviours of Lustre it allows for (docs/reference/lustre-semantics.md, rules 12 and 13):
setting ``max_create_count`` back does not bring ``create_count`` back (lproc_osp.c
``max_create_count_store()`` resets it to 32), so a drain records ``create_count`` and restores
it after ``max_create_count``; ``degraded`` goes back to 0 when the OST is mounted again
(``ofd_init0()``, a failover), so a held flag found reset by :meth:`SteerAgent.expire` is
applied again while its lease runs.

Requests and replies (msgpack maps over :mod:`lustre_alloc.collectors.steer_socket`)::

    {"op": "steer", "ost": "demofs-OST000e", "kind": "degraded" | "drain", "lease_s": 900,
     "reason": "..."}            -> {"ok": true, "params": [...], "until_s": <agent clock>}
    {"op": "release", "ost": ..., "kind": ...}  -> {"ok": true, "restored": [...]}
    {"op": "status"}             -> {"ok": true, "role": ..., "leases": [{...}, ...]}
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from lustre_alloc.common.errors import SourceUnavailable
from lustre_alloc.collectors.lustre_params import (ParamAccess, ParamError, degraded_param,
                                      max_create_count_param, osp_devices_of)

log = logging.getLogger("lustre_alloc.collectors.steer_agent")

KIND_OF_ROLE = {"oss": "degraded", "mds": "drain"}
"""Which action each collector role applies (on its own targets)."""
MAX_LEASE_S = 3600.0
"""Longest lease an agent grants, s (ours: an hour; the controller's default is 900 s)."""


class SteerRequestError(ValueError):
    """A request the agent refuses (the reply's ``error``)."""


@dataclass
class Lease:
    """One parameter this agent changed: what it found, and until when it holds."""
    ost: str
    kind: str
    param: str
    previous: str
    until_s: float
    reason: str
    restore_after: dict[str, str] = field(default_factory=dict)
    """Other parameters to set back after this one (a drain: ``create_count``)."""


class SteerAgent:
    """The rules of the module docstring.

    Args:
        role: ``oss`` or ``mds``.
        targets: returns this server's OST names (OSS) or OSP device names (MDS), now.
        params: the :class:`~lustre_alloc.collectors.lustre_params.ParamAccess` to act through.
        max_lease_s: longest lease granted, s.
        clock: monotonic seconds (tests pass their own).
        journal: the lease journal's path (None: not journalled, tests only); read at once
            (:meth:`recover`).
        wall: wall-clock seconds, for the journal's deadlines (tests pass their own).
    """

    def __init__(self, role: str, targets: Callable[[], Sequence[str]], params: ParamAccess,
                 max_lease_s: float = MAX_LEASE_S, clock: Callable[[], float] = time.monotonic,
                 journal: str | os.PathLike[str] | None = None,
                 wall: Callable[[], float] = time.time):
        if role not in KIND_OF_ROLE:
            raise ValueError(f"role must be oss or mds, not {role!r}")
        self.role = role
        self.kind = KIND_OF_ROLE[role]
        self.targets = targets
        self.params = params
        self.max_lease_s = max_lease_s
        self.clock = clock
        self.leases: dict[str, Lease] = {}          # parameter name -> lease
        self.counts = {"applied": 0, "renewed": 0, "restored": 0, "refused": 0, "failed": 0,
                       "reapplied": 0, "resumed": 0}
        self.wall = wall
        self.journal = Path(journal) if journal else None
        if self.journal is not None:
            self.recover()

    # -- requests ---------------------------------------------------------------------
    def handle(self, request: Any) -> dict[str, Any]:
        """Answer one request (never raises: a bad one gets ``ok = False`` and ``error``)."""
        try:
            if not isinstance(request, dict):
                raise SteerRequestError("request is not a map")
            op = request.get("op")
            if op == "status":
                return {"ok": True, "role": self.role, "kind": self.kind,
                        "leases": [self._lease_dict(x) for x in self.leases.values()]}
            if op == "steer":
                return self.steer(_field(request, "ost"), _field(request, "kind"),
                                  _lease_s(request), str(request.get("reason", ""))[:300])
            if op == "release":
                return self.release(_field(request, "ost"), _field(request, "kind"))
            raise SteerRequestError(f"unknown op {op!r} (steer, release, status)")
        except (SteerRequestError, ParamError) as exc:
            self.counts["refused" if isinstance(exc, SteerRequestError) else "failed"] += 1
            log.warning("steer request not applied: %s", exc,
                        extra={"event": "steer_refused", "error": str(exc)})
            return {"ok": False, "error": str(exc)}

    def steer(self, ost: str, kind: str, lease_s: float, reason: str) -> dict[str, Any]:
        """Apply (or renew) ``kind`` on ``ost`` for ``lease_s``.

        Raises:
            SteerRequestError: not ours, flagged by someone else, wrong kind, bad lease.
            ParamError: the write failed (nothing recorded; already written parameters of
                this request are restored).
        """
        if kind != self.kind:
            raise SteerRequestError(f"a {self.role} agent applies {self.kind!r}, not {kind!r}")
        if not 0 < lease_s <= self.max_lease_s:
            raise SteerRequestError(f"lease_s {lease_s} outside (0, {self.max_lease_s}]")
        names = self._params_of(ost)
        until = self.clock() + lease_s
        held = [n for n in names if n in self.leases]
        if held:
            for n in held:
                self.leases[n].until_s = until
            self._save()
            self.counts["renewed"] += 1
            return {"ok": True, "params": held, "until_s": until, "renewed": True}
        current = {n: self.params.get(n) for n in names}
        for n, v in current.items():
            if v == self._applied_value():
                raise SteerRequestError(f"{n} is already {v}: set by someone else, left alone")
        after = {n: self._companions(n) for n in names}
        # Journal first, then act: a crash between the two leaves a journal entry whose
        # parameter was never set, which recover() forgets (the value is not ours); the
        # other order could leave an OST drained with no record of it.
        for n in names:
            self.leases[n] = Lease(ost, kind, n, current[n], until, reason, after[n])
        try:
            self._save()
        except OSError as exc:
            for n in names:
                del self.leases[n]
            raise ParamError(f"cannot journal the lease before acting: {exc}") from None
        done: list[str] = []
        try:
            for n in names:
                self.params.set(n, self._applied_value())
                done.append(n)
        except ParamError:
            for n in done:
                self._restore_quietly(n, current[n])
            for n in names:
                del self.leases[n]
            self._save_quietly()
            raise
        self.counts["applied"] += 1
        log.info("steered %s: %s", ost, reason, extra={
            "event": "steer_applied", "ost": ost, "kind": kind, "params": names,
            "previous": current, "lease_s": lease_s, "reason": reason})
        return {"ok": True, "params": names, "until_s": until}

    def release(self, ost: str, kind: str) -> dict[str, Any]:
        """Undo ``kind`` on ``ost`` now (nothing to do when not held)."""
        restored = [n for n, x in list(self.leases.items()) if x.ost == ost and x.kind == kind]
        for n in restored:
            self._restore(n, "released by the mapper")
        return {"ok": True, "restored": restored}

    # -- leases -----------------------------------------------------------------------
    def expire(self) -> list[str]:
        """Restore every lease past its end; returns the parameters restored. A restore
        that fails stays held and is retried at the next call. A held parameter found reset
        (``degraded`` after a remount) is applied again."""
        now = self.clock()
        out = []
        for n, x in list(self.leases.items()):
            if x.until_s <= now:
                if self._restore(n, "lease expired"):
                    out.append(n)
            else:
                self._reapply_if_reset(n, x)
        return out

    def _reapply_if_reset(self, name: str, x: Lease) -> None:
        try:
            value = self.params.get(name)
            if value == self._applied_value():
                return
            self.params.set(name, self._applied_value())
        except ParamError as exc:
            log.warning("cannot check or re-apply %s: %s", name, exc,
                        extra={"event": "steer_reapply_failed", "param": name})
            return
        self.counts["reapplied"] += 1
        log.warning("%s was %s while its lease runs (a remount resets it): applied again",
                    name, value, extra={"event": "steer_reapplied", "ost": x.ost,
                                        "param": name, "found": value})

    # -- the journal ------------------------------------------------------------------
    def recover(self) -> None:
        """Read the journal a previous run of this agent left: restore what it set whose
        lease ran out, resume holding the rest, forget what someone changed since. A journal
        that cannot be read is renamed aside (``.bad``) and logged; nothing is touched."""
        try:
            doc = json.loads(self.journal.read_text())
            entries = [Lease(**e) for e in doc["leases"]] if doc.get("role") == self.role \
                else []
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("steer journal %s unreadable (%s): moved to .bad, nothing restored",
                      self.journal, exc, extra={"event": "steer_journal_bad"})
            self.journal.replace(self.journal.with_suffix(".bad"))
            return
        wall_now, now = self.wall(), self.clock()
        for x in entries:
            left = x.until_s - wall_now          # the journal holds wall-clock deadlines
            try:
                value = self.params.get(x.param)
            except ParamError as exc:
                log.error("steer journal: cannot read %s (%s): kept for the next start",
                          x.param, exc, extra={"event": "steer_journal_unread"})
                self.leases[x.param] = Lease(**{**asdict(x), "until_s": now})
                continue
            if value != self._applied_value():
                log.warning("steer journal: %s is %s, not ours any more: forgotten", x.param,
                            value, extra={"event": "steer_journal_forgot", "param": x.param})
                continue
            self.leases[x.param] = Lease(**{**asdict(x), "until_s": now + max(left, 0.0)})
            if left <= 0:
                self._restore(x.param, "lease ran out while the agent was down")
            else:
                self.counts["resumed"] += 1
                log.info("steer journal: %s held for %.0f s more", x.param, left,
                         extra={"event": "steer_resumed", "param": x.param})
        self._save()

    def _save(self) -> None:
        if self.journal is None:
            return
        now, wall_now = self.clock(), self.wall()
        leases = [{**asdict(x), "until_s": wall_now + (x.until_s - now)}
                  for x in self.leases.values()]
        tmp = self.journal.with_name(self.journal.name + ".tmp")
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"version": 1, "role": self.role, "leases": leases}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.journal)

    def _save_quietly(self) -> None:
        try:
            self._save()
        except OSError as exc:
            log.error("cannot write the steer journal %s: %s", self.journal, exc,
                      extra={"event": "steer_journal_unwritable"})

    def release_all(self, why: str) -> list[str]:
        """Restore everything (the collector is stopping)."""
        return [n for n in list(self.leases) if self._restore(n, why)]

    def _restore(self, name: str, why: str) -> bool:
        x = self.leases[name]
        try:
            self.params.set(name, x.previous)
            for other, value in x.restore_after.items():
                self.params.set(other, value)
        except ParamError as exc:
            self.counts["failed"] += 1
            log.error("cannot restore %s: %s", name, exc, extra={
                "event": "steer_restore_failed", "param": name, "error": str(exc)})
            return False
        del self.leases[name]
        self._save()
        self.counts["restored"] += 1
        log.info("restored %s=%s (%s)", name, x.previous, why, extra={
            "event": "steer_restored", "ost": x.ost, "param": name, "value": x.previous,
            "why": why})
        return True

    def _restore_quietly(self, name: str, value: str) -> None:
        try:
            self.params.set(name, value)
        except ParamError as exc:
            log.error("cannot restore %s after a failed request: %s", name, exc)

    # -- helpers ----------------------------------------------------------------------
    def _companions(self, name: str) -> dict[str, str]:
        """What setting ``name`` changes besides itself, to set back after it: a drain's
        ``create_count`` (lproc_osp.c ``max_create_count_store()``)."""
        if not name.endswith(".max_create_count"):
            return {}
        cc = name[: -len("max_create_count")] + "create_count"
        try:
            return {cc: self.params.get(cc)}
        except ParamError:
            return {}

    def _applied_value(self) -> str:
        return "1" if self.kind == "degraded" else "0"

    def _params_of(self, ost: str) -> list[str]:
        try:
            own = list(self.targets())
        except SourceUnavailable as exc:
            raise SteerRequestError(f"cannot list this server's targets: {exc}") from None
        if self.role == "oss":
            if ost not in own:
                raise SteerRequestError(f"{ost} is not served by this OSS")
            return [degraded_param(ost)]
        devices = osp_devices_of(ost, own)
        if not devices:
            raise SteerRequestError(f"this MDS has no OSP device for {ost}")
        return [max_create_count_param(d) for d in devices]

    def _lease_dict(self, x: Lease) -> dict[str, Any]:
        return {"ost": x.ost, "kind": x.kind, "param": x.param, "previous": x.previous,
                "remaining_s": round(x.until_s - self.clock(), 1), "reason": x.reason}


def selftest_journal_of(journal: str | os.PathLike[str]) -> Path:
    """The journal ``lustre-alloc-selftest --steer`` keeps beside the collector's ``journal``
    (``selftest-<name>``): a selftest killed between setting and restoring is settled by the
    next selftest or by the collector's next start (:func:`settle_selftest_journal`)."""
    p = Path(journal)
    return p.with_name("selftest-" + p.name)


def settle_selftest_journal(role: str, targets: Callable[[], Sequence[str]],
                            params: ParamAccess, journal: str | os.PathLike[str]) -> list[str]:
    """Restore everything a killed selftest left in :func:`selftest_journal_of` ``journal``
    (nothing when it has no entry); returns the parameters restored."""
    path = selftest_journal_of(journal)
    if not path.exists():
        return []
    agent = SteerAgent(role, targets, params, journal=path)
    return agent.release_all("left by an interrupted selftest")


def _field(request: dict, key: str) -> str:
    v = request.get(key)
    if not isinstance(v, str) or not v:
        raise SteerRequestError(f"request field {key!r} missing or not a string")
    return v


def _lease_s(request: dict) -> float:
    v = request.get("lease_s")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SteerRequestError("request field 'lease_s' missing or not a number")
    return float(v)
