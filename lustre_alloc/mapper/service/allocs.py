"""One file system's allocation round: the ``alloc`` requests of a batch decided through
the service's one decision path (:mod:`lustre_alloc.mapper.service.decision_path`: bound, decide, check,
record), their replies encoded and counted.

A plain ``alloc`` is one create; a composite (PFL) ``alloc`` (protocol v2,
:mod:`lustre_alloc.mapper.service.wire`) is one create per OST component, decided in the same round
and answered together. Leases (:mod:`lustre_alloc.mapper.service.leases`) take the same path.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

from lustre_alloc.mapper.policies.placement import AllocationError, CreateRequest, Placement
from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.decision_path import Decision, DecisionPath
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.intake import Alloc
from lustre_alloc.mapper.service.metrics import MapperMetrics


class Rounds:
    """One file system's ``alloc`` round at a time: decide every create of the batch through
    ``path``, encode the replies, count them (``requests_total``) and what left
    (:meth:`DecisionPath.count`).

    Args:
        path: the service's decision path.
        mode: the scope mode in force for a file system (live or shadow),
            :meth:`lustre_alloc.mapper.service.intake.Intake.mode`.
        metrics: the service's metrics.
    """

    def __init__(self, path: DecisionPath, mode: Callable[[str], str], metrics: MapperMetrics):
        self.path = path
        self.mode = mode
        self.metrics = metrics
        self.count = 0
        """Rounds run."""

    def run(self, ctx: FsContext, allocs: list[Alloc]) -> list[tuple[bytes, bytes]]:
        """One file system's round: decide every create, encode the replies and count them.
        A composite (PFL) request is one create per OST component, decided in the same
        round."""
        creates: list[CreateRequest] = []
        peers: list[str] = []
        for _, r, peer in allocs:
            parts = r.components or (r.create_request(),)
            creates.extend(parts)
            peers.extend([peer] * len(parts))
        t0 = time.perf_counter()
        decisions = self.path.decide(ctx, creates, peers, self.mode(ctx.fsname))
        out: list[tuple[bytes, bytes]] = []
        tally = _Tally()
        at = 0
        for identity, req, _ in allocs:
            if req.components:
                n = len(req.components)
                out.append((identity, self._composite_reply(ctx, req, decisions[at:at + n],
                                                            tally)))
                at += n
                continue
            d = decisions[at]
            at += 1
            result = d.result
            if d.token and isinstance(result, Placement):
                out.append((identity, wire.encode_shadow(req.id, d.token, result.osts,
                                                         result.policy)))
                tally.shadows += 1
            elif isinstance(result, Placement):
                out.append((identity, wire.encode_placement(
                    req.id, result.osts, d.create.stripe_size, result.policy, result.fallback)))
                tally.placed(result)
            else:
                out.append((identity, wire.encode_error(req.id, result.errno, result.reason)))
                tally.errors += 1
        self.path.count(ctx.store.fsname, tally.layouts)
        self._count(time.perf_counter() - t0, len(allocs), tally)
        return out

    def _composite_reply(self, ctx: FsContext, req: wire.Request,
                         decisions: Sequence[Decision], tally: "_Tally") -> bytes:
        """A composite file's reply: every component's list, or the first component's
        error (then the components that were placed come off the books: the client gives
        the whole file to Lustre's allocator)."""
        results = [d.result for d in decisions]
        failed = next((r for r in results if isinstance(r, AllocationError)), None)
        if failed is not None:
            with self.path.lock:
                for d in decisions:
                    if isinstance(d.result, Placement):
                        ctx.unbook(d.create, d.result.osts)
            tally.errors += 1
            return wire.encode_error(req.id, failed.errno, failed.reason)
        placed = [r for r in results if isinstance(r, Placement)]
        fallback = next((p.fallback for p in placed if p.fallback), "")
        tally.placed_file(placed, fallback)
        return wire.encode_composite(req.id, [p.osts for p in placed], placed[0].policy,
                                         fallback)

    def _count(self, took_s: float, requests: int, tally: "_Tally") -> None:
        m = self.metrics
        self.count += 1
        m.rounds.inc()
        m.round_seconds.observe(took_s)
        m.round_requests.observe(requests)
        if tally.ok:
            m.result("ok", tally.ok)
        if tally.fallback:
            m.result("fallback", tally.fallback)
        if tally.errors:
            m.result("error", tally.errors)
        if tally.shadows:
            m.result("shadow", tally.shadows)


class _Tally:
    """What one round answered: replies that placed a file (by the primary, or by the
    fallback for some layout of it), errors, shadow replies, and the layouts that left."""

    def __init__(self) -> None:
        self.ok = self.fallback = self.errors = self.shadows = 0
        self.layouts: list[Placement] = []

    def placed(self, p: Placement) -> None:
        """One reply with one layout."""
        self.placed_file([p], p.fallback)

    def placed_file(self, layouts: list[Placement], fallback: str) -> None:
        """One reply with a file's layouts (its components), the fallback's for some of
        them when ``fallback`` is not empty."""
        self.layouts.extend(layouts)
        if fallback:
            self.fallback += 1
        else:
            self.ok += 1


__all__ = ["Rounds"]
