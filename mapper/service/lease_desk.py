"""Protocol v2 on the mapper: grant, take back and expire layout leases
(``docs/protocol.md``, "Protocol v2: leases"; the book itself is :mod:`mapper.service.leases`).

A lease request of ``count`` layouts for one class is decided as ``count`` identical
creates through the service's one decision path (:mod:`mapper.service.decide`), so a leased
layout is bounded, planned, checked, recorded, booked and counted exactly as a layout
answered per create: one the placement guard refuses comes off the books and is replaced
by the fallback's (counted in ``fallbacks_total{reason="check"}``).

Rules (ours):

* The grant is ``min(count, lease_max_layouts, what the client's lease_peer_quota leaves)``;
  a client at its quota gets EDQUOT (it asks per create meanwhile).
* The lifetime is ``lease_s``, at most the primary's ``plan_ttl_s`` when it plans ahead: a
  leased list is never older than a planned one could be.
* Every reply (grant or refusal) names the client's earlier leases that hold an OST that is
  no longer usable (inactive, full, degraded, a straggler, gone) as ``revoke``.
* In shadow mode a lease is refused with ``per_create``: each file's decision needs its
  own report token, so the class asks per create (v1) and gets shadow replies.
"""
from __future__ import annotations

import errno
import logging
import threading
import time
from typing import Any

from mapper.policies.flow_round import bytes_per_stripe
from mapper.policies.placement import AllocationError, Placement
from mapper.service import wire_lease
from mapper.service.config import MapperConfig
from mapper.service.decide import DecisionPath
from mapper.service.fs_context import FsContext
from mapper.service.intake import Alloc
from mapper.service.leases import LeaseBook, Returned
from mapper.service.metrics import MapperMetrics
from mapper.service.scope import SHADOW, Scope

log = logging.getLogger("mapper.service.lease_desk")

EXPIRY_CHECK_S = 0.1
"""How often the loop looks for leases past their lifetime, s."""


class LeaseDesk:
    """The service's leases: :meth:`grant`, :meth:`release`, :meth:`expire`.

    Args:
        config: the service configuration (``lease_s``, ``lease_max_layouts``,
            ``lease_peer_quota``).
        path: the service's decision path.
        scope: the scope rules (a file system in shadow mode leases nothing).
        contexts: file system key -> context (an expired lease comes off its books).
        lock: the service lock (the book is touched under it).
        metrics: the service's metrics.
    """

    def __init__(self, config: MapperConfig, path: DecisionPath, scope: Scope,
                 contexts: dict[str, FsContext], lock: threading.Lock,
                 metrics: MapperMetrics):
        self.lease_s = config.lease_s
        self.quota = config.lease_peer_quota
        self.path = path
        self.scope = scope
        self.contexts = contexts
        self.lock = lock
        self.metrics = metrics
        self.book = LeaseBook(config.lease_s, config.lease_max_layouts, config.lease_peer_quota)
        self._next_expiry_check = 0.0

    def lifetime_s(self, ctx: FsContext) -> float:
        """A new lease's lifetime on ``ctx``: ``lease_s``, at most the plans' TTL."""
        ttl = ctx.plan_ttl_s()
        return self.lease_s if ttl is None else min(self.lease_s, ttl)

    # ------------------------------------------------------------------ granting
    def grant(self, ctx: FsContext, group: list[Alloc]) -> list[tuple[bytes, bytes]]:
        """Answer one file system's lease requests of a batch."""
        out = []
        lifetime = self.lifetime_s(ctx)
        mode = self.scope.mode(ctx.fsname)
        # samples are applied by this same loop between batches: one state for the batch
        snap, version = ctx.store.current(), ctx.store.version

        def unusable(osts: tuple[int, ...], pool: str | None) -> bool:
            return ctx.guard.violation(snap, version, osts, pool) is not None

        for identity, req, peer in group:
            with self.lock:
                revoke = self.book.revocations(peer, ctx.key, unusable)
            if revoke:
                self.metrics.leases.labels("revoked").inc(len(revoke))
            if mode == SHADOW:
                out.append((identity, wire_lease.encode_lease_error(
                    req.id, errno.EPERM, "shadow mode: ask per create (v1 alloc) and report "
                    "Lustre's layout", revoke=revoke, per_create=True)))
                self.metrics.leases.labels("per_create").inc()
                continue
            n = self.book.grantable(peer, req.lease_count)
            if n == 0:
                out.append((identity, wire_lease.encode_lease_error(
                    req.id, errno.EDQUOT, f"lease quota: {peer} holds "
                    f"{self.book.held(peer)} layouts (lease_peer_quota "
                    f"{self.quota}); ask per create", revoke=revoke)))
                self.metrics.leases.labels("quota").inc()
                continue
            out.append((identity, self._decide(ctx, version, mode, req, peer, n, lifetime,
                                               revoke)))
        return out

    def _decide(self, ctx: FsContext, version: int, mode: str, req: Any, peer: str, n: int,
                lifetime: float, revoke: list[int]) -> bytes:
        decisions = self.path.decide(ctx, [req.create_request()] * n, [peer] * n, mode)
        placed = [d.result for d in decisions if isinstance(d.result, Placement)]
        if not placed:
            refused = next((d.result for d in decisions
                            if isinstance(d.result, AllocationError)), None)
            err = refused.errno if refused is not None else errno.EAGAIN
            reason = refused.reason if refused is not None else "no layout passed the check"
            self.metrics.leases.labels("refused").inc()
            return wire_lease.encode_lease_error(req.id, err, reason, revoke=revoke)
        create = decisions[0].create
        layouts = [tuple(p.osts) for p in placed]
        with self.lock:
            lease = self.book.add(peer, ctx.key, create, layouts, version, lifetime)
        self.path.count(ctx.store.fsname, placed)
        self.metrics.leases.labels("granted").inc()
        self.metrics.leased_layouts.labels("granted").inc(len(layouts))
        return wire_lease.encode_lease(req.id, lease.id, layouts, create.stripe_size, placed[0].policy,
                                       int(lifetime * 1000), version, revoke)

    # ------------------------------------------------------------------ giving back
    def release(self, releases: list[Alloc]) -> list[tuple[bytes, bytes]]:
        """Answer the clients' releases: un-book what each lease did not use."""
        out = []
        for identity, req, peer in releases:
            results = []
            with self.lock:
                for lease_id, used in req.released:
                    back = self.book.release(peer, lease_id, used)
                    results.append("unknown" if back is None else "ok")
                    if back is not None:
                        self._unbook(back)
                        self.metrics.leased_layouts.labels("used").inc(
                            len(back.lease.layouts) - len(back.layouts))
            self.metrics.leases.labels("released").inc(results.count("ok"))
            out.append((identity, wire_lease.encode_released(req.id, results)))
        return out

    def expire(self, now: float | None = None) -> int:
        """Un-book every lease past its lifetime (checked at most every
        :data:`EXPIRY_CHECK_S` unless ``now`` is given); the leases expired."""
        clock = time.monotonic() if now is None else now
        if now is None and clock < self._next_expiry_check:
            return 0
        self._next_expiry_check = clock + EXPIRY_CHECK_S
        with self.lock:
            gone = self.book.expire(now)
            for back in gone:
                self._unbook(back)
        if gone:
            self.metrics.leases.labels("expired").inc(len(gone))
        return len(gone)

    def _unbook(self, back: Returned) -> None:
        ctx = self.contexts.get(back.lease.ctx_key)
        if ctx is None:
            return
        create = back.lease.create
        for osts in back.layouts:
            ctx.unbook(osts, bytes_per_stripe(create, len(osts)))
        if back.layouts:
            self.metrics.leased_layouts.labels(back.why).inc(len(back.layouts))


__all__ = ["EXPIRY_CHECK_S", "LeaseDesk"]
