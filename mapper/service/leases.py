"""The mapper's book of layout leases (protocol v2, ``docs/protocol.md``): who holds which
layouts, until when, and what to give back.

A leased layout is decided and booked as pending load when it is handed out, exactly as a
layout answered per create is. What the client never uses must come off the books again:
the client says how many layouts of a lease it used (it takes them in order, so the used
ones are the first ``used``) when it is done with it, and the rest are un-booked; a lease
nobody returned is un-booked whole when its lifetime ends, so a crashed client holds
capacity for at most one lifetime. When an OST of a held layout becomes unusable, the
holder's next reply revokes the lease (the client drops what it has left of it).

Bounds (ours): at most ``max_layouts`` layouts per lease, at most ``peer_quota`` layouts
outstanding per client (its CURVE key or address, :func:`mapper.service.limits.peer_of`),
and at most :data:`MAX_LEASES` leases in all (the oldest is expired first beyond it).
"""
from __future__ import annotations

import heapq
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from mapper.policies.placement import CreateRequest

MAX_LEASES = 100_000
"""Leases held at once, over every client; beyond it the oldest is expired early."""


@dataclass(slots=True)
class Lease:
    """Layouts handed to one client ahead of its creates."""
    id: int
    peer: str
    ctx_key: str
    """The file system context (:class:`mapper.service.fs_context.FsContext` key)."""
    create: CreateRequest
    """The class's template (job, pool, stripe count and size, expected bytes, directory)."""
    layouts: tuple[tuple[int, ...], ...]
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
            layouts: list[tuple[int, ...]], version: int,
            lifetime_s: float | None = None) -> Lease:
        """Record a granted lease (its layouts are already booked by the policy) living
        ``lifetime_s`` (default :attr:`lease_s`)."""
        now = self.clock()
        lease = Lease(self._next_id, peer, ctx_key, create, tuple(layouts), version, now,
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

    def release(self, peer: str, lease_id: int, used: int) -> Returned | None:
        """``peer`` is done with ``lease_id`` after using its first ``used`` layouts; the
        rest to un-book, or None when the lease is not (or no longer) this client's."""
        lease = self._leases.get(lease_id)
        if lease is None or lease.peer != peer:
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


__all__ = ["Lease", "LeaseBook", "MAX_LEASES", "Returned"]
