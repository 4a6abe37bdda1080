"""Layout leases (protocol v2, ``docs/protocol.md``, "Protocol v2: leases"): the book of
what each client holds (:class:`LeaseBook`) and the service's desk that grants, takes back and
expires them (:class:`LeaseDesk`).

A lease request of ``count`` layouts for one class is decided as ``count`` identical
creates through the service's one decision path (:mod:`lustre_alloc.mapper.service.decision_path`), so a leased
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
* While the primary leaves a class to Lustre
  (:class:`~lustre_alloc.mapper.policies.placement.LeavesToLustre`: mcmf while the OSTs look
  alike), the answer is a refusal with ``allocator: "lustre"`` and ``retry_ms`` one
  lifetime: the client creates that class's files plainly meanwhile.
* In shadow mode a lease is refused with ``per_create``: each file's decision needs its
  own report token, so the class asks per create (v1) and gets shadow replies.
* What a client never uses comes off the books again: it says how many layouts of a lease
  it used (it takes them in order, so the used ones are the first ``used``) when it is done
  with it, and the rest are un-booked; a lease nobody returned is un-booked whole when its
  lifetime ends, so a crashed client holds capacity for one lifetime at most.
* At most ``lease_max_layouts`` layouts per lease, ``lease_peer_quota`` outstanding per
  client (its CURVE key or address, :func:`lustre_alloc.mapper.service.limits.peer_of`), and
  :data:`MAX_LEASES` leases in all (the oldest is expired first beyond it).
"""
from __future__ import annotations

import errno
import heapq
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from lustre_alloc.mapper.policies.placement import (AllocationError, CreateRequest, Placement,
                                                    lease_order)
from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.config import MapperConfig
from lustre_alloc.mapper.service.decision_path import DecisionPath
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.intake import Alloc
from lustre_alloc.mapper.service.metrics import MapperMetrics
from lustre_alloc.mapper.service.scope import SHADOW

MAX_LEASES = 100_000
"""Leases held at once, over every client; beyond it the oldest is expired early."""


@dataclass(slots=True)
class Lease:
    """Layouts handed to one client ahead of its creates."""
    id: int
    peer: str
    ctx_key: str
    """The file system context (:class:`lustre_alloc.mapper.service.fs_context.FsContext` key)."""
    create: CreateRequest
    """The class's template (job, pool, stripe count and size, expected bytes, directory)."""
    placements: tuple[Placement, ...]
    """The policy's answers, in the order the client uses them."""
    layouts: tuple[tuple[int, ...], ...]
    """Their OST lists."""
    version: int
    """State version the layouts were made on."""
    granted_s: float
    expires_s: float
    """Monotonic seconds; past it the lease is un-booked whole."""
    revoked: bool = False


@dataclass(slots=True)
class Returned:
    """Layouts to un-book: ``layouts`` of ``lease`` were never used."""
    lease: Lease
    layouts: tuple[tuple[int, ...], ...]
    why: str
    """``released`` (the client returned them) or ``expired``."""

    @property
    def used(self) -> tuple[tuple[int, ...], ...]:
        """The lease's layouts the client created files with (its first ones: a client
        uses a lease's layouts in order)."""
        return self.lease.layouts[:len(self.lease.layouts) - len(self.layouts)]


@dataclass
class LeaseBook:
    """Outstanding leases, per client and by expiry.

    Args:
        lease_s: lifetime of a lease, s (> 0).
        max_layouts: most layouts in one lease (>= 1).
        peer_quota: most layouts one client holds at once (>= 1).
        clock: monotonic seconds.
    """
    lease_s: float
    max_layouts: int
    peer_quota: int
    clock: Callable[[], float] = time.monotonic
    _leases: dict[int, Lease] = field(default_factory=dict)
    _held: dict[str, int] = field(default_factory=dict)
    _by_peer: dict[str, set[int]] = field(default_factory=dict)
    _expiry: list[tuple[float, int]] = field(default_factory=list)
    # ids start at a random point: a restarted mapper must not take a release meant for a
    # lease of its previous life as one for a new lease of the same client
    _next_id: int = field(default_factory=lambda: secrets.randbits(62) + 1)

    def __post_init__(self) -> None:
        if self.lease_s <= 0 or self.max_layouts < 1 or self.peer_quota < 1:
            raise ValueError("lease_s must be > 0, max_layouts and peer_quota >= 1")

    # ------------------------------------------------------------------ granting
    def held(self, peer: str) -> int:
        """Layouts ``peer`` holds now."""
        return self._held.get(peer, 0)

    def grantable(self, peer: str, asked: int) -> int:
        """How many of ``asked`` layouts ``peer`` may get now (0: its quota is used up)."""
        return max(0, min(asked, self.max_layouts, self.peer_quota - self.held(peer)))

    def add(self, peer: str, ctx_key: str, create: CreateRequest,
            placements: list[Placement], version: int,
            lifetime_s: float | None = None) -> Lease:
        """Record a granted lease (its layouts are already booked by the policy) living
        ``lifetime_s`` (default :attr:`lease_s`).

        The layouts are put in :func:`~lustre_alloc.mapper.policies.placement.lease_order`
        for the leases held now."""
        now = self.clock()
        placements = lease_order(placements, len(self._leases))
        lease = Lease(self._next_id, peer, ctx_key, create, tuple(placements),
                      tuple(tuple(p.osts) for p in placements), version, now,
                      now + (self.lease_s if lifetime_s is None else lifetime_s))
        self._next_id += 1
        self._leases[lease.id] = lease
        self._held[peer] = self.held(peer) + len(lease.layouts)
        self._by_peer.setdefault(peer, set()).add(lease.id)
        heapq.heappush(self._expiry, (lease.expires_s, lease.id))
        return lease

    # ------------------------------------------------------------------ giving back
    def _drop(self, lease: Lease) -> None:
        del self._leases[lease.id]
        left = self._held[lease.peer] - len(lease.layouts)
        ids = self._by_peer[lease.peer]
        ids.discard(lease.id)
        if left > 0:
            self._held[lease.peer] = left
        else:
            del self._held[lease.peer]
            del self._by_peer[lease.peer]

    def held_lease(self, peer: str, lease_id: int) -> Lease | None:
        """``lease_id`` if ``peer`` holds it now."""
        lease = self._leases.get(lease_id)
        return lease if lease is not None and lease.peer == peer else None

    def release(self, peer: str, lease_id: int, used: int) -> Returned | None:
        """``peer`` is done with ``lease_id`` after using its first ``used`` layouts; the
        rest to un-book, or None when the lease is not (or no longer) this client's."""
        lease = self.held_lease(peer, lease_id)
        if lease is None:
            return None
        self._drop(lease)
        return Returned(lease, lease.layouts[min(used, len(lease.layouts)):], "released")

    def expire(self, now: float | None = None) -> list[Returned]:
        """Leases past their lifetime (and the oldest beyond :data:`MAX_LEASES`), removed;
        every layout of each to un-book (used or not: a client that kept it past its
        lifetime is gone, and what it wrote shows in the statistics)."""
        now = self.clock() if now is None else now
        out = []
        heap = self._expiry
        while heap and (heap[0][0] <= now or len(self._leases) > MAX_LEASES):
            _, lease_id = heapq.heappop(heap)
            lease = self._leases.get(lease_id)
            if lease is not None:
                self._drop(lease)
                out.append(Returned(lease, lease.layouts, "expired"))
        return out

    def next_expiry_s(self) -> float | None:
        """Monotonic time of the earliest lifetime end, None without leases."""
        while self._expiry and self._expiry[0][1] not in self._leases:
            heapq.heappop(self._expiry)
        return self._expiry[0][0] if self._expiry else None

    # ------------------------------------------------------------------ revoking
    def revocations(self, peer: str, ctx_key: str,
                    unusable: Callable[[tuple[int, ...], str | None], bool]) -> list[int]:
        """Leases of ``peer`` on ``ctx_key`` with a layout that ``unusable(osts, pool)``
        rejects now, marked revoked (each is named once; its layouts stay booked until the
        client returns them or the lifetime ends)."""
        out = []
        for lease_id in sorted(self._by_peer.get(peer, ())):
            lease = self._leases[lease_id]
            if lease.revoked or lease.ctx_key != ctx_key:
                continue
            pool = lease.create.pool
            if any(unusable(osts, pool) for osts in lease.layouts):
                lease.revoked = True
                out.append(lease_id)
        return out

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._leases)

    def __iter__(self) -> Iterator[Lease]:
        return iter(list(self._leases.values()))

    def layouts_held(self) -> int:
        """Layouts outstanding over every client."""
        return sum(self._held.values())

    def clients(self) -> int:
        """Clients holding at least one lease."""
        return len(self._held)


EXPIRY_CHECK_S = 0.1
"""How often the loop looks for leases past their lifetime, s."""


class LeaseDesk:
    """The service's leases: :meth:`grant`, :meth:`release`, :meth:`expire`.

    Args:
        config: the service configuration (``lease_s``, ``lease_max_layouts``,
            ``lease_peer_quota``).
        path: the service's decision path.
        mode: the scope mode in force for a file system (one in shadow mode leases
            nothing), :meth:`lustre_alloc.mapper.service.intake.Intake.mode`.
        contexts: file system key -> context (an expired lease comes off its books).
        lock: the service lock (the book is touched under it).
        metrics: the service's metrics.
    """

    def __init__(self, config: MapperConfig, path: DecisionPath, mode: Callable[[str], str],
                 contexts: dict[str, FsContext], lock: threading.Lock,
                 metrics: MapperMetrics):
        self.lease_s = config.layout_lease_s
        self.quota = config.lease_peer_quota
        self.path = path
        self.mode = mode
        self.contexts = contexts
        self.lock = lock
        self.metrics = metrics
        self.book = LeaseBook(config.layout_lease_s, config.lease_max_layouts, config.lease_peer_quota)
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
        mode = self.mode(ctx.fsname)
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
                out.append((identity, wire.encode_lease_error(
                    req.id, errno.EPERM, "shadow mode: ask per create (v1 alloc) and report "
                    "Lustre's layout", revoke=revoke, per_create=True)))
                self.metrics.leases.labels("per_create").inc()
                continue
            n = self.book.grantable(peer, req.lease_count)
            if n == 0:
                out.append((identity, wire.encode_lease_error(
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
        create = req.create_request()
        why = ctx.leaves_to_lustre(create)
        if why:
            # Lustre's allocator places the class for one lease lifetime: nothing decided,
            # booked or counted per file; the client asks again when it is over
            self.metrics.leases.labels("lustre").inc()
            return wire.encode_lease_error(
                req.id, errno.EAGAIN, f"{why}: Lustre's allocator places these creates",
                revoke=revoke, retry_ms=max(1, int(lifetime * 1000)), allocator="lustre")
        decisions = self.path.decide(ctx, [create] * n, [peer] * n, mode, leased=True)
        placed = [d.result for d in decisions if isinstance(d.result, Placement)]
        if not placed:
            refused = next((d.result for d in decisions
                            if isinstance(d.result, AllocationError)), None)
            err = refused.errno if refused is not None else errno.EAGAIN
            reason = refused.reason if refused is not None else "no layout passed the check"
            self.metrics.leases.labels("refused").inc()
            return wire.encode_lease_error(req.id, err, reason, revoke=revoke)
        create = decisions[0].create
        with self.lock:
            lease = self.book.add(peer, ctx.key, create, placed, version, lifetime)
        # stripes are counted when the client says which layouts it used (release)
        self.path.count(ctx.store.fsname, placed, stripes=False)
        self.metrics.leases.labels("granted").inc()
        self.metrics.leased_layouts.labels("granted").inc(len(lease.layouts))
        return wire.encode_lease(req.id, lease.id, lease.layouts, create.stripe_size,
                                 placed[0].policy,
                                       int(lifetime * 1000), version, revoke)

    # ------------------------------------------------------------------ giving back
    def release(self, releases: list[Alloc]) -> list[tuple[bytes, bytes]]:
        """Answer the clients' releases: record the files created with leased layouts
        (the decision log and ``explain``, :meth:`DecisionDesk.record_leased`), un-book what
        each lease did not use."""
        out = []
        for identity, req, peer in releases:
            results = []
            with self.lock:
                for lease_id, index, name in req.files:
                    lease = self.book.held_lease(peer, lease_id)
                    ctx = self.contexts.get(lease.ctx_key) if lease is not None else None
                    if ctx is not None and index < len(lease.placements):
                        self.path.desk.record_leased(ctx, lease.create, name,
                                                     lease.placements[index], lease.version)
                for lease_id, used in req.released:
                    back = self.book.release(peer, lease_id, used)
                    results.append("unknown" if back is None else "ok")
                    if back is not None:
                        self._unbook(back)
                        self.metrics.leased_layouts.labels("used").inc(len(back.used))
                        ctx = self.contexts.get(back.lease.ctx_key)
                        if ctx is not None:     # files created: their stripes, as per create
                            self.metrics.count_stripes(ctx.store.fsname, back.used)
            self.metrics.leases.labels("released").inc(results.count("ok"))
            out.append((identity, wire.encode_released(req.id, results)))
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
            ctx.lease_returned(create, osts)
        if back.layouts:
            self.metrics.leased_layouts.labels(back.why).inc(len(back.layouts))


__all__ = ["EXPIRY_CHECK_S", "MAX_LEASES", "Lease", "LeaseBook", "LeaseDesk", "Returned"]
