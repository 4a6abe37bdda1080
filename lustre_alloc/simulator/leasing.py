"""Layouts leased ahead, in simulation (protocol v2): what a layout chosen up to
one lease lifetime before its create costs in job I/O time.

A policy named ``<policy>+lease`` (``mcmf+lease``) runs ``<policy>`` behind the shim's
leases: a create takes the next layout its class holds; a class that holds none, or only
half of its last grant, asks the policy for a batch of identical creates in one
``allocate_batch`` (as the mapper's lease desk decides a lease,
:mod:`lustre_alloc.mapper.service.leases`), every layout booked as pending load when it is decided.
A layout is used until 80% of the lifetime after its grant; what is left when it expires,
or holds an OST that became unusable (the revocation), is un-booked
(:meth:`~lustre_alloc.mapper.policies.placement.BooksPlacements.unbook`).

The shim's refresh (``la_lease.c``, "Refresh": a class creating more slowly than its
layouts live asks for a fresh lease shortly before its newest layout expires, so its create
finds one without a round trip) is not modelled as such: here a layout is decided at its
create, on that instant's state, where the shim's was decided up to one use window (80% of
the lifetime) before, and the refreshed layouts that expire unused are not booked
meanwhile. The sizing is the shim's: such a refill asks for the class's rate (one layout
for a slow class), not twice its last grant.

While the gated policy leaves a class to Lustre
(:meth:`~lustre_alloc.mapper.policies.gate.GatedPolicy.leaves_to_lustre`: mcmf while the
OSTs look alike and Lustre's allocator would place round-robin), the class's creates are
placed by the gate's fallback, the simulator's Lustre allocator, for one lifetime (the
lease desk's ``allocator: "lustre"`` answer); after it, a create is still Lustre's while
the class asks again (the shim asks in the background: ``la_lease.c``,
``LA_NOLEASE_TO_LUSTRE``), and the answer applies to the next creates.

The sizing and lifetime constants are the shim's and the mapper's
(``liblustre_alloc/la_lease.c``: ``LA_ASK_MIN``, ``LA_ASK_HORIZON_S``, ``LA_USE_FRACTION``;
``la_internal.h``: ``LA_LEASE_ASK_MAX``, ``LA_LEASE_MAX_STRIPES``; the mapper's
``layout_lease_s`` bounded by the primary's ``plan_ttl_s``), restated here because the C shim
cannot run inside the simulator; ``tests/simulator/test_leasing.py`` reads them from the C
sources so the two cannot drift. The class key is the shim's: job, pool, stripe count,
stripe size, expected bytes (the directory is one per job in a trace).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.policies.placement import (AllocationError, BatchPolicy, BooksPlacements,
                                       CreateRequest, LearnsSizes, LeavesToLustre, Placement,
                                       PlacementPolicy,
                                       PlansAhead, ReusesLeasedLists,
                                       allocate_each, decide_batch, lease_order)
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import is_usable

LEASE_SUFFIX = "+lease"
"""A policy name ending so runs the policy behind leases."""
ASK_MIN = 16
"""``LA_ASK_MIN``: the first lease of a class asks at least this many layouts."""
ASK_MAX = 256
"""``LA_LEASE_ASK_MAX`` (the mapper's ``lease_max_layouts`` default too)."""
ASK_HORIZON_S = 0.1
"""``LA_ASK_HORIZON_S``: a refill covers this much of the class's create rate, s."""
USE_FRACTION = 0.8
"""``LA_USE_FRACTION``: a layout is used until this fraction of the lifetime."""
MAX_STRIPES = 64
"""``LA_LEASE_MAX_STRIPES``: wider layouts (and ``-1``) are asked per create."""
LEASE_S = 2.0
"""The mapper's ``layout_lease_s`` default (docs/operations.md), s."""


@dataclass
class _Class:
    """One class's leased layouts (oldest first) and its refill state."""
    held: deque = field(default_factory=deque)       # (osts, use_by_s, bytes_per_stripe)
    last_granted: int = 0
    rate_per_s: float = 0.0
    rate_t_s: float = -math.inf
    taken: int = 0
    rate_taken: int = 0
    last_take_s: float = -math.inf
    gap_s: float = 0.0              # mean gap between takes (``la_note_take``), 0 unknown
    installed: int = 0              # grants so far (the first asks at least ASK_MIN)
    taken_at_grant: int = 0         # ``taken`` when the last grant came
    checked: frozenset | None = None   # the usable set its layouts were last checked on
    lustre_until_s: float = -math.inf  # left to Lustre's allocator until then
    to_lustre: bool = False         # the last answer left it to Lustre (no grant since)


class LeasedCreates(BatchPolicy):
    """``policy`` behind the shim's leases (a :class:`PlacementPolicy`).

    Args:
        policy: the policy under test (gated or not).
        lease_s: the mapper's ``layout_lease_s``; the lifetime is at most the primary's
            ``plan_ttl_s``.

    Attributes:
        stats: ``granted`` / ``taken`` / ``expired`` / ``revoked`` layouts, ``leases``
            asked, ``per_create`` creates asked per create (too wide to lease, or a
            composite file's components, :meth:`allocate_unleased`), ``to_lustre`` creates
            left to Lustre's allocator.
    """

    def __init__(self, policy: PlacementPolicy, lease_s: float = LEASE_S):
        self.policy = policy
        self.name = f"{policy.name}{LEASE_SUFFIX}"
        primary = policy.primary if isinstance(policy, GatedPolicy) else policy
        self._books = primary if isinstance(primary, BooksPlacements) else None
        self._reuses = primary if isinstance(primary, ReusesLeasedLists) else None
        self._leaves = (policy if isinstance(policy, GatedPolicy)
                        and isinstance(primary, LeavesToLustre) else None)
        self._lustre = policy.fallback if isinstance(policy, GatedPolicy) else None
        plans = primary.plans if isinstance(primary, PlansAhead) else None
        self.lifetime_s = lease_s if plans is None else min(lease_s, float(plans.ttl_s))
        self.classes: dict[tuple, _Class] = {}
        self._next_expiry_s = math.inf
        self._usable_of: ClusterSnapshot | None = None
        self._usable_version: int | None = None
        self._usable_set: frozenset[int] = frozenset()
        self.stats = {"granted": 0, "taken": 0, "expired": 0, "revoked": 0, "leases": 0,
                      "per_create": 0, "to_lustre": 0}

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """The next leased layout of ``request``'s class (refilled first when due).

        Raises:
            AllocationError: the policy granted nothing for an empty class.
        """
        if not 0 < request.stripe_count <= MAX_STRIPES:
            return self.allocate_unleased(snapshot, request)
        now = snapshot.time_s
        if now >= self._next_expiry_s:
            self._expire_all(snapshot, now)
        key = (request.jobid, request.pool, request.stripe_count, request.stripe_size,
               request.expected_bytes)
        cls = self.classes.get(key)
        if cls is None:
            cls = self.classes[key] = _Class()
        self._drop_stale(snapshot, cls, now)
        if now < cls.lustre_until_s:
            return self._to_lustre(snapshot, request)
        if cls.to_lustre and not cls.held:
            # the answer is over: this create is Lustre's while the class asks again
            self._refill(snapshot, request, cls, now, waiting=False)
            return self._to_lustre(snapshot, request)
        if len(cls.held) <= cls.last_granted // 2:
            self._refill(snapshot, request, cls, now, waiting=not cls.held)
            if now < cls.lustre_until_s:
                return self._to_lustre(snapshot, request)
        if not cls.held:
            raise AllocationError("no layout granted for this class")
        osts, _, _ = cls.held.popleft()
        cls.taken += 1
        self.stats["taken"] += 1
        if math.isfinite(cls.last_take_s) and now > cls.last_take_s:
            gap = now - cls.last_take_s
            cls.gap_s = 0.5 * (cls.gap_s + gap) if cls.gap_s > 0 else gap
        cls.last_take_s = now
        return Placement(osts, self.name, note="leased")

    def learn_sizes(self, jobid: str, sizes: Sequence[int]) -> int:
        """The policy's :meth:`~lustre_alloc.mapper.policies.placement.LearnsSizes.learn_sizes` (0 when it
        learns none)."""
        return self.policy.learn_sizes(jobid, sizes) if isinstance(self.policy, LearnsSizes) \
            else 0

    def allocate_unleased(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """``request`` asked per create, as the shim asks what it does not lease (a
        composite file's components: ``la_pfl.c`` sends one v2 composite ``alloc`` per
        create); counted in ``per_create``.

        Raises:
            AllocationError: the policy's refusal.
        """
        self.stats["per_create"] += 1
        return self.policy.allocate(snapshot, request)

    def _usable(self, snapshot: ClusterSnapshot) -> frozenset[int]:
        """The usable OST indices of ``snapshot``, computed once per state version (the
        MDS view bumps ``version`` on every in-place update; without one, every call)."""
        if (snapshot is not self._usable_of or snapshot.version is None
                or snapshot.version != self._usable_version):
            self._usable_set = frozenset(o.index for o in snapshot.osts if is_usable(o))
            self._usable_of, self._usable_version = snapshot, snapshot.version
        return self._usable_set

    def _expire_all(self, snapshot: ClusterSnapshot, now: float) -> None:
        """Every class's expired layouts come off the books (the mapper's expiry runs
        whether or not the class creates again)."""
        nxt = math.inf
        for cls in self.classes.values():
            self._drop_stale(snapshot, cls, now)
            if cls.held:
                nxt = min(nxt, cls.held[0][1])
        self._next_expiry_s = nxt

    def _drop_stale(self, snapshot: ClusterSnapshot, cls: _Class, now: float) -> None:
        """Un-book and drop layouts past their use-by time or naming an OST that is no
        longer usable (what the shim skips and the mapper takes back)."""
        if not cls.held:
            return
        usable = self._usable(snapshot)
        if cls.checked is usable and cls.held[0][1] >= now:
            return      # nothing expired (the oldest is first) and no OST changed since
        cls.checked = usable
        keep: deque = deque()
        for osts, use_by, bps in cls.held:
            if use_by < now:
                self.stats["expired"] += 1
            elif not usable.issuperset(osts):
                self.stats["revoked"] += 1
            else:
                keep.append((osts, use_by, bps))
                continue
            if self._books is not None:
                self._books.unbook(osts, bps)
            if self._reuses is not None:
                self._reuses.lease_returned(osts)
        cls.held = keep

    def _to_lustre(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """``request`` placed by Lustre's allocator (the gate's fallback): no list from
        the policy, nothing booked."""
        self.stats["to_lustre"] += 1
        assert self._lustre is not None      # only set with a policy that leaves to Lustre
        got = self._lustre.allocate(snapshot, request)
        return Placement(got.osts, self.name, note="lustre allocator")

    def _refill(self, snapshot: ClusterSnapshot, request: CreateRequest, cls: _Class,
                now: float, waiting: bool) -> None:
        want = self._ask_size(cls, now, waiting, USE_FRACTION * self.lifetime_s)
        self.stats["leases"] += 1
        if self._leaves is not None and self._leaves.leaves_to_lustre(snapshot, request):
            # the lease desk's allocator "lustre" answer: one lifetime, nothing booked
            cls.lustre_until_s = now + self.lifetime_s
            cls.to_lustre = True
            return
        try:
            results: Sequence = decide_batch(self.policy, snapshot, [request] * want)
        except AllocationError:
            return
        use_by = now + USE_FRACTION * self.lifetime_s
        granted = 0
        outstanding = sum(1 for c in self.classes.values() if c is not cls and c.held)
        placed_ok = lease_order([p for p in results if isinstance(p, Placement)], outstanding)
        for placed in placed_ok:
            bps = request.bytes_per_stripe(len(placed.osts))
            cls.held.append((tuple(placed.osts), use_by, bps))
            granted += 1
        cls.last_granted = granted
        cls.to_lustre = False
        cls.installed += 1
        cls.taken_at_grant = cls.taken
        self.stats["granted"] += granted
        self._next_expiry_s = min(self._next_expiry_s, use_by)

    @staticmethod
    def _ask_size(cls: _Class, now: float, waiting: bool, use_s: float) -> int:
        """``la_ask_size``: 100 ms of the class's create rate (one over the mean gap
        between creates; before two creates, a running mean of the rate since the last
        refill), at least
        :data:`ASK_MIN`, but after the first lease no more than the rate uses within
        ``use_s`` (the use window, s; at least 1), at least twice the last
        grant when creates used it up and wait (not when it ran out by expiry), at most
        :data:`ASK_MAX`."""
        dt = now - cls.rate_t_s
        if cls.gap_s > 0:
            cls.rate_per_s = 1.0 / cls.gap_s
        elif math.isfinite(cls.rate_t_s) and dt > 0:
            rate = (cls.taken - cls.rate_taken) / dt
            cls.rate_per_s = 0.5 * (cls.rate_per_s + rate) if cls.rate_per_s > 0 else rate
        cls.rate_t_s, cls.rate_taken = now, cls.taken
        floor = ASK_MIN
        if cls.installed:       # never more than the rate uses before they expire
            floor = max(1, min(floor, math.ceil(cls.rate_per_s * use_s)))
        want = max(floor, math.ceil(cls.rate_per_s * ASK_HORIZON_S))
        if waiting and cls.taken - cls.taken_at_grant >= cls.last_granted:
            want = max(want, 2 * cls.last_granted)
        return min(want, ASK_MAX)

    def allocate_batch(self, snapshot: ClusterSnapshot,
                       requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
        """Each request in turn (:meth:`allocate`), errors in place."""
        return allocate_each(self, snapshot, requests)


def leased(name: str) -> tuple[str, bool]:
    """(the policy's own name, whether ``name`` asks for it behind leases)."""
    if name.endswith(LEASE_SUFFIX):
        return name[: -len(LEASE_SUFFIX)], True
    return name, False


__all__ = ["LEASE_SUFFIX", "LeasedCreates", "leased"]
