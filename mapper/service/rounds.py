"""One file system's allocation round: the requests of a batch bounded, decided by the gated
policy under the service lock, every answer checked by the placement guard (a failing one
is replaced by the fallback's), recorded in the decision desk, encoded and counted.

A plain ``alloc`` is one create; a composite (PFL) ``alloc`` (protocol v2,
:mod:`mapper.service.wire_pfl`) is one create per OST component, decided in the same round
and answered together. Leases are decided by :class:`mapper.service.lease_desk.LeaseDesk`
with the same policy and books.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Sequence

from mapper.policies.flow_round import bytes_per_stripe
from mapper.policies.placement import AllocationError, CreateRequest, Placement
from mapper.service import wire, wire_pfl
from mapper.service.decision_desk import DecisionDesk
from mapper.service.fs_context import FsContext
from mapper.service.intake import Alloc, Intake
from mapper.service.lease_desk import LeaseDesk
from mapper.service.metrics import MapperMetrics
from mapper.service.scope import SHADOW
from mapper.state.cluster_state import ClusterSnapshot

log = logging.getLogger("mapper.service.server")


class Rounds:
    """One file system's round at a time: bound the requests, let the gated policy decide
    under the service lock, check every answer (a failing one is replaced by the fallback's,
    reason ``check``), encode the replies, count everything.

    Args:
        intake: the request intake (its client bounds).
        lock: the service lock (the planner threads hold it while they touch the policy).
        metrics: the service's metrics.
    """

    def __init__(self, intake: Intake, lock: threading.Lock, metrics: MapperMetrics):
        self.intake = intake
        self.lock = lock
        self.metrics = metrics
        self.count = 0
        """Rounds run."""
        self.check_violations = 0
        """Answers the placement check rejected."""
        self.desk = DecisionDesk(intake.config.decision_log_per_s, intake.contexts)
        """The decision log (its rate is reloadable), the explain index, the shadow ledger."""
        self.leases = LeaseDesk(intake.config, intake, intake.contexts, lock, metrics,
                                self.desk)
        """Layout leases (protocol v2)."""

    def run(self, ctx: FsContext, allocs: list[Alloc]) -> list[tuple[bytes, bytes]]:
        """One file system's round: bound the requests, let the gated policy decide, check
        every answer, encode the replies and count them. A composite (PFL) request is one
        create per OST component, decided in the same round."""
        # one CreateRequest per create (a composite file: one per component); the bounded
        # one goes to the policy, the client's own (its pool, its stripe size) shapes the
        # check and the reply
        creates: list[CreateRequest] = []
        peers: list[str] = []
        for _, r, peer in allocs:
            parts = r.components or (r.create_request(),)
            creates.extend(parts)
            peers.extend([peer] * len(parts))
        t0 = time.perf_counter()
        requests, checked, mode = self._decide(ctx, creates, peers)
        out: list[tuple[bytes, bytes]] = []
        tally = _Tally()
        at = 0
        for identity, req, _ in allocs:
            if req.components:
                n = len(req.components)
                out.append((identity, self._composite_reply(
                    ctx, req, requests[at:at + n], checked[at:at + n], tally)))
                at += n
                continue
            create, (result, token) = creates[at], checked[at]
            at += 1
            if token and isinstance(result, Placement):
                out.append((identity, wire.encode_shadow(req.id, token, result.osts,
                                                         result.policy)))
                tally.shadows += 1
            elif isinstance(result, Placement):
                out.append((identity, wire.encode_placement(
                    req.id, result.osts, create.stripe_size, result.policy, result.fallback)))
                tally.placed(result.osts, result.fallback)
            else:
                out.append((identity, wire.encode_error(req.id, result.errno, result.reason)))
                tally.errors += 1
        self._count(ctx.store.fsname, time.perf_counter() - t0, len(allocs), tally)
        return out

    def _decide(self, ctx: FsContext, creates: list[CreateRequest], peers: list[str]
                ) -> tuple[list[CreateRequest], list[tuple[Placement | AllocationError, int]], str]:
        """The round itself: (the bounded requests the policy got, each answer checked by
        the placement guard with its shadow token, the scope mode)."""
        store, gate = ctx.store, ctx.gate
        snap = store.current()
        requests = self.intake.bounded(ctx, snap, store.version, creates, peers)
        planner = ctx.planner
        misses = planner.plans.stats["misses"] if planner is not None else 0
        mode = self.intake.scope.mode(ctx.fsname)
        try:
            with self.lock:
                if mode == SHADOW:
                    with ctx.not_booking():
                        results = gate.allocate_batch(snap, requests)
                else:
                    results = gate.allocate_batch(snap, requests)
            if planner is not None and planner.plans.stats["misses"] != misses:
                planner.wake.set()          # a class ran dry: refill now
        except Exception:  # noqa: BLE001 - the fallback itself failed: answer errors
            log.exception("round failed", extra={"event": "round_error", "requests": len(creates)})
            results = [AllocationError("mapper internal error") for _ in requests]
        version = store.version
        violation = ctx.guard.violation
        record = self.desk.record
        checked: list[tuple[Placement | AllocationError, int]] = []
        with self.lock:             # the control socket reads the desk under it
            for create, result in zip(creates, results):
                if isinstance(result, Placement):
                    problem = violation(snap, version, result.osts, create.pool)
                    if problem is not None:
                        result = self._after_violation(ctx, snap, version, create, result,
                                                       problem)
                checked.append((result, record(ctx, snap, mode, create, result, version)))
        return requests, checked, mode

    def _composite_reply(self, ctx: FsContext, req: wire.Request, requests: list[CreateRequest],
                         checked: list[tuple[Placement | AllocationError, int]],
                         tally: "_Tally") -> bytes:
        """A composite file's reply: every component's list, or the first component's
        error (then the components that were placed come off the books: the client gives
        the whole file to Lustre's allocator)."""
        results = [result for result, _ in checked]
        failed = next((r for r in results if isinstance(r, AllocationError)), None)
        if failed is not None:
            with self.lock:
                for create, result in zip(requests, results):
                    if isinstance(result, Placement):
                        ctx.unbook(result.osts, bytes_per_stripe(create, len(result.osts)))
            tally.errors += 1
            return wire.encode_error(req.id, failed.errno, failed.reason)
        placed = [r for r in results if isinstance(r, Placement)]
        fallback = next((p.fallback for p in placed if p.fallback), "")
        tally.placed([o for p in placed for o in p.osts], fallback)
        return wire_pfl.encode_composite(req.id, [p.osts for p in placed], placed[0].policy,
                                         fallback)

    def reports(self, reports: list[tuple[bytes, wire.Request]]) -> list[tuple[bytes, bytes]]:
        """Answer the shims' shadow reports (Lustre's layouts), pricing both choices."""
        out = []
        counted = self.metrics.shadow_reports
        for identity, req in reports:
            rep = req.report
            if rep is None:
                continue
            with self.lock:
                result = self.desk.report(rep.token, rep.osts, rep.stripe_size)
            counted.labels(result).inc()
            out.append((identity, wire.encode_reported(req.id, result)))
        if out:
            self.metrics.result("report", len(out))
        return out

    def _count(self, fsname: str, took_s: float, requests: int, tally: "_Tally") -> None:
        m = self.metrics
        m.count_stripes(fsname, tally.stripes)
        for reason, n in tally.fallbacks.items():
            m.fallbacks.labels(reason).inc(n)
        self.count += 1
        m.rounds.inc()
        m.round_seconds.observe(took_s)
        m.round_requests.observe(requests)
        if tally.ok:
            m.result("ok", tally.ok)
        if tally.fallbacks:
            m.result("fallback", sum(tally.fallbacks.values()))
        if tally.errors:
            m.result("error", tally.errors)
        if tally.shadows:
            m.result("shadow", tally.shadows)

    def _after_violation(self, ctx: FsContext, snap: ClusterSnapshot, version: int,
                         create: CreateRequest, bad: Placement,
                         problem: str) -> Placement | AllocationError:
        self.check_violations += 1
        self.metrics.check_violations.inc()
        log.error("policy returned an invalid layout; the fallback answers", extra={
            "event": "check_violation", "policy": bad.policy, "osts": list(bad.osts),
            "pool": create.pool, "job": create.jobid, "problem": problem})
        try:
            placed = ctx.gate.fallback.allocate(snap, create)
        except AllocationError as exc:
            return exc
        if ctx.guard.violation(snap, version, placed.osts, create.pool) is not None:
            return AllocationError("no layout passed the placement check")
        ctx.gate.fallbacks["check"] += 1
        return Placement(placed.osts, placed.policy, placed.note, fallback="check")


class _Tally:
    """What one round answered, for the metrics: replies that placed (by the primary, or
    per fallback reason), errors, shadow replies, and the OSTs handed out."""

    def __init__(self) -> None:
        self.ok = self.errors = self.shadows = 0
        self.fallbacks: dict[str, int] = {}
        self.stripes: list[int] = []

    def placed(self, osts: Sequence[int], fallback: str) -> None:
        """One reply that placed ``osts`` (all of a file's), by the primary when
        ``fallback`` is empty."""
        self.stripes.extend(osts)
        if fallback:
            self.fallbacks[fallback] = self.fallbacks.get(fallback, 0) + 1
        else:
            self.ok += 1


__all__ = ["Rounds"]
