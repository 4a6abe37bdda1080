"""The one decision path of the service, for every create whatever asked for it: a plain or
composite (PFL) ``alloc`` (:mod:`lustre_alloc.mapper.service.allocs`) and each layout of a lease
(:mod:`lustre_alloc.mapper.service.leases`).

For one file system and a batch of creates: **bound** (the client bounds of
:mod:`lustre_alloc.mapper.service.limits`), **decide** (the gated policy under the service lock; in
shadow mode without booking), **check** (the placement guard, ``check_placement``'s rules;
a layout that fails is taken off the primary's books and replaced by the fallback's, reason
``check``; shadow decisions are booked as live ones until Lustre's layout is reported),
**record** (the decision log, the explain index, the shadow ledger; a leased
layout when the client says which file it created with it), and, once
the caller knows which layouts leave, **count** them (``layouts_total``, ``fallbacks_total``,
and ``ost_stripes_total`` for the files created).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from lustre_alloc.mapper.policies.placement import AllocationError, CreateRequest, Placement
from lustre_alloc.mapper.service.decision_record import DecisionDesk
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.metrics import MapperMetrics
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot

log = logging.getLogger("lustre_alloc.mapper.service.decision_path")

Bound = Callable[[FsContext, ClusterSnapshot, int, list[CreateRequest], list[str]],
                 list[CreateRequest]]
"""The client bounds: (context, snapshot, state version, creates, client names) -> the
creates the policy gets (:meth:`lustre_alloc.mapper.service.intake.Intake.bounded`)."""


@dataclass(frozen=True)
class Decision:
    """One create decided: the request as the client sent it (its pool and stripe size
    shape the reply), the answer after the check, and its shadow token (0 unless shadow)."""
    create: CreateRequest
    result: Placement | AllocationError
    token: int


class DecisionPath:
    """Bound, decide, check, record and count (module docstring).

    Args:
        bound: the client bounds.
        lock: the service lock (policies, books and the decision desk are touched under it).
        metrics: the service's metrics.
        desk: the decision log, explain index and shadow ledger.
    """

    def __init__(self, bound: Bound, lock: threading.Lock, metrics: MapperMetrics,
                 desk: DecisionDesk):
        self.bound = bound
        self.lock = lock
        self.metrics = metrics
        self.desk = desk
        self.check_violations = 0
        """Answers the placement check rejected."""

    def decide(self, ctx: FsContext, creates: list[CreateRequest], peers: list[str],
               mode: str, leased: bool = False) -> list[Decision]:
        """Decide ``creates`` (``peers[i]`` asked for ``creates[i]``) on ``ctx`` in scope
        mode ``mode``: one :class:`Decision` each, in order. ``leased``: layouts of a lease,
        recorded when a file is created with one
        (:meth:`lustre_alloc.mapper.service.decision_record.DecisionDesk.record_leased`), not here; a
        refusal is recorded at once either way."""
        store, gate = ctx.store, ctx.gate
        snap = store.current()
        version = store.version
        requests = self.bound(ctx, snap, version, creates, peers)
        planner = ctx.background_planner
        misses = planner.plans.stats["misses"] if planner is not None else 0
        try:
            # a shadow decision is booked as a live one would be, until the shim reports
            # Lustre's layout (DecisionDesk.report): the next decisions then spread as live
            # ones do, and the shadow report shows what this mapper would do live
            with self.lock:
                results = gate.allocate_batch(snap, requests)
            if planner is not None and planner.plans.stats["misses"] != misses:
                planner.wake.set()          # a class ran dry: refill now
        except Exception:  # noqa: BLE001 - the fallback itself failed: answer errors
            log.exception("round failed", extra={"event": "round_error",
                                                 "requests": len(creates)})
            results = [AllocationError("mapper internal error") for _ in requests]
        violation = ctx.guard.violation
        record = self.desk.record
        out: list[Decision] = []
        with self.lock:             # the control socket reads the desk under it
            for create, request, result in zip(creates, requests, results):
                if isinstance(result, Placement):
                    problem = violation(snap, version, result.osts, create.pool)
                    if problem is not None:
                        result = self._replace(ctx, snap, version, create, request, result,
                                               problem, mode)
                token = (0 if leased and isinstance(result, Placement)
                         else record(ctx, snap, mode, create, result, version))
                out.append(Decision(create, result, token))
        return out

    def count(self, fsname: str, placed: Sequence[Placement], stripes: bool = True) -> None:
        """Count layouts that left the mapper (not shadow decisions): by who decided
        (``layouts_total{result="ok"|"fallback"}``, ``fallbacks_total{reason}``) and, with
        ``stripes``, their stripes per OST (``ost_stripes_total``: files created; a leased
        layout's stripes are counted when the client says it used it,
        :meth:`lustre_alloc.mapper.service.leases.LeaseDesk.release`)."""
        m = self.metrics
        ok = 0
        for p in placed:
            if p.fallback:
                m.fallbacks.labels(p.fallback).inc()
            else:
                ok += 1
        if stripes:
            m.count_stripes(fsname, [p.osts for p in placed])
        if ok:
            m.layouts.labels("ok").inc(ok)
        if len(placed) > ok:
            m.layouts.labels("fallback").inc(len(placed) - ok)

    def _replace(self, ctx: FsContext, snap: ClusterSnapshot, version: int,
                 create: CreateRequest, request: CreateRequest, bad: Placement, problem: str,
                 mode: str) -> Placement | AllocationError:
        """The fallback's answer for a layout the check refused; the refused one comes off
        the primary's books (it never leaves)."""
        self.check_violations += 1
        self.metrics.check_violations.inc()
        log.error("policy returned an invalid layout; the fallback answers", extra={
            "event": "check_violation", "policy": bad.policy, "osts": list(bad.osts),
            "pool": create.pool, "job": create.jobid, "problem": problem})
        ctx.unbook(request, bad.osts)
        (placed,) = ctx.gate.fall_back(snap, [request], "check")
        if isinstance(placed, Placement) and ctx.guard.violation(
                snap, version, placed.osts, create.pool) is not None:
            return AllocationError("no layout passed the placement check")
        return placed


__all__ = ["Bound", "Decision", "DecisionPath"]
