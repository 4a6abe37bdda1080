"""Ready OST lists per request class, planned ahead by the flow.

An MDS creates thousands of files per second; a flow round at thousands of OSTs takes
milliseconds. So the flow runs *ahead* of the requests: per request class (pool, stripe
count, stripe size band) a short queue of OST lists is computed by one flow over the
demand expected in the next interval, and a request is answered by popping its class's
head after an O(stripe count) check. This module holds the queues, the per-class
arrival rate and bytes-per-stripe estimates that size the demand, and the checks; the
flow itself is :meth:`lustre_alloc.mapper.policies.mcmf.McmfPolicy.plan`.

Rules (ours; the paper solves every request in its round):

* Class: ``(pool, resolved stripe count, stripe size band, size band)``; the stripe size
  band is ``floor(log2(stripe size))`` (1 MiB and 1.5 MiB share a list: the OST choice
  depends on the stripe size only through capacity, which the check covers), the size
  band ``floor(log4(expected bytes per stripe))`` (the flow's fill cost depends on it).
* A planned list is handed out only while it is younger than ``ttl_s`` and every OST of
  it is present, usable (:func:`lustre_alloc.mapper.state.ost_health.is_usable` via the arrays) and
  not a straggler of the current view; otherwise it is dropped (counted ``invalid`` or
  ``expired``). So a stale plan can be suboptimal by at most ``ttl_s`` of state drift,
  never invalid.
* On a miss, the head of a *compatible* class (same pool and stripe size band, at least
  as many stripes; the nearest size band, then the fewest extra stripes) is taken and cut
  to the requested count (its first stripes keep the OSS interleaving).
* Target depth of a class: its arrival rate (requests/s, decayed with time constant
  ``ttl_s``) times ``horizon_s``, at least 1 and at most ``max_depth``: lists that
  would expire unused are not planned.
* A class is refilled to its target once it is down to half of it (low water): a
  planning round has fixed costs of O(OSTs) numpy work, so lists are made in batches;
  a round that runs (for one class, or for predictions) tops up every class.
* Planned stripes are reserved in the pending overlay (queued writes) until handed out
  or dropped, so other rounds and other classes spread around them.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from lustre_alloc.mapper.state.arrays import OstTable
from lustre_alloc.mapper.state.pending import PendingOverlay

ClassKey = tuple  # (pool, stripe_count, stripe_size_band, bytes_band)


def stripe_size_band(stripe_size: int) -> int:
    """``floor(log2(stripe_size))``: stripe sizes within a factor 2 share plans."""
    return max(int(stripe_size), 1).bit_length() - 1


def bytes_band(bytes_per_stripe: float) -> int:
    """``floor(log4(expected bytes per stripe))``: files within a factor 4 share plans
    (a list planned for 4 MiB stripes is not what a 1 GiB stripe should get)."""
    return (max(int(bytes_per_stripe), 1).bit_length() - 1) // 2


@dataclass
class PlannedList:
    """One ready OST list: ``osts`` in stripe order, planned at ``made_s`` (snapshot clock, s)."""
    made_s: float
    osts: tuple[int, ...]


@dataclass
class _ClassStats:
    rate_per_s: float = 0.0
    last_s: float = -math.inf
    bytes_per_stripe: float = 0.0
    stripe_size: int = 1 << 20


@dataclass(frozen=True)
class Demand:
    """Lists a planning round should make for one class."""
    key: ClassKey
    lists: int
    stripe_size: int
    bytes_per_stripe: float

    @property
    def pool(self) -> str | None:
        return self.key[0]

    @property
    def stripe_count(self) -> int:
        return self.key[1]


class PlanQueues:
    """The ready lists of every class, their checks and the demand that refills them.

    Args:
        pending: where planned stripes are reserved.
        ttl_s: how long a planned list may be handed out after it was planned, s.
        horizon_s: how far ahead the demand is planned, s (target depth = rate x horizon).
        max_depth: most lists kept per class.
    """

    def __init__(self, pending: PendingOverlay, ttl_s: float = 2.5, horizon_s: float = 1.0,
                 max_depth: int = 32):
        if ttl_s <= 0 or horizon_s <= 0 or max_depth < 1:
            raise ValueError("plan ttl_s and horizon_s must be > 0 and max_depth >= 1")
        self.pending = pending
        self.ttl_s = ttl_s
        self.horizon_s = horizon_s
        self.max_depth = max_depth
        self.queues: dict[ClassKey, deque[PlannedList]] = {}
        self.classes: dict[ClassKey, _ClassStats] = {}
        self.stats = {"hits": 0, "compatible": 0, "misses": 0, "expired": 0, "invalid": 0,
                      "planned": 0}

    # ------------------------------------------------------------------ arrivals
    def note(self, key: ClassKey, now: float, stripe_size: int, bytes_per_stripe: float) -> None:
        """Count one request of ``key`` at ``now`` (rate and size estimates)."""
        st = self.classes.get(key)
        if st is None:
            st = self.classes[key] = _ClassStats(bytes_per_stripe=bytes_per_stripe)
        if st.last_s == -math.inf:
            st.rate_per_s = 1.0 / self.ttl_s
        else:
            dt = max(0.0, now - st.last_s)
            st.rate_per_s = st.rate_per_s * math.exp(-dt / self.ttl_s) + 1.0 / self.ttl_s
        st.last_s = now
        st.bytes_per_stripe += 0.2 * (bytes_per_stripe - st.bytes_per_stripe)
        st.stripe_size = stripe_size

    def target(self, key: ClassKey, now: float) -> int:
        """Lists worth keeping for ``key`` now (0 for a class not seen within 4 TTLs)."""
        st = self.classes.get(key)
        if st is None or now - st.last_s > 4 * self.ttl_s:
            return 0
        rate = st.rate_per_s * math.exp(-max(0.0, now - st.last_s) / self.ttl_s)
        return max(1, min(self.max_depth, math.ceil(rate * self.horizon_s - 1e-9)))

    # ------------------------------------------------------------------ hand-out
    def _fresh_head(self, queue: deque[PlannedList], table: OstTable, stragglers: set[int],
                    now: float) -> PlannedList | None:
        while queue:
            head = queue[0]
            if now - head.made_s >= self.ttl_s or now < head.made_s:
                self.stats["expired"] += 1
            elif not table.usable_at(head.osts) or (stragglers and
                                                    any(i in stragglers for i in head.osts)):
                self.stats["invalid"] += 1
            else:
                return head
            self.pending.reserve(queue.popleft().osts, -1.0)
        return None

    def take(self, key: ClassKey, table: OstTable, stragglers: set[int],
             now: float) -> tuple[int, ...] | None:
        """A checked list for a request of class ``key`` (its reservation released), from
        its own queue or a compatible class's; None on a miss. O(stripe count) unless
        expired or invalid heads are dropped on the way."""
        queue = self.queues.get(key)
        if queue:
            head = self._fresh_head(queue, table, stragglers, now)
            if head is not None:
                queue.popleft()
                self.pending.reserve(head.osts, -1.0)
                self.stats["hits"] += 1
                return head.osts
        best = self._compatible(key)
        count = key[1]
        if best is not None:
            q = self.queues[best]
            head = self._fresh_head(q, table, stragglers, now)
            if head is not None:
                q.popleft()
                self.pending.reserve(head.osts, -1.0)
                self.stats["compatible"] += 1
                return head.osts[:count]
        self.stats["misses"] += 1
        return None

    def _compatible(self, key: ClassKey) -> ClassKey | None:
        """The class whose list best stands in for one of ``key``: same pool and stripe
        size band, at least as many stripes; the same size band first, then the nearest
        (a list planned for other file sizes is still a flow's choice on the current
        state, unlike the fallback's), then the fewest extra stripes."""
        pool, count, size_band, nbytes_band = key
        best, best_rank = None, None
        for other, q in self.queues.items():
            if not q or other == key or other[0] != pool or other[2] != size_band \
                    or other[1] < count:
                continue
            rank = (abs(other[3] - nbytes_band), other[1])
            if best_rank is None or rank < best_rank:
                best, best_rank = other, rank
        return best

    # ------------------------------------------------------------------ planning
    def demand(self, now: float, only: set[ClassKey] | None = None,
               top_up: bool = False) -> list[Demand]:
        """Lists to plan now per class. Nothing until some class is down to half its
        target depth (low water: a planning round has a fixed O(OSTs) cost, so lists are
        made in batches) or ``top_up`` (a round runs anyway); then every class below its
        target is topped up in the same round."""
        out = []
        low = top_up
        for key, st in self.classes.items():
            if only is not None and key not in only:
                continue
            queue = self.queues.get(key)
            have = len(queue) if queue else 0
            target = self.target(key, now)
            want = target - have
            if want > 0:
                low = low or have <= (3 * target) // 4
                out.append(Demand(key, want, st.stripe_size, st.bytes_per_stripe))
        return out if low else []

    def add(self, key: ClassKey, lists: list[tuple[int, ...]], now: float) -> None:
        """Queue freshly planned lists of ``key`` (their stripes are reserved)."""
        queue = self.queues.setdefault(key, deque())
        queue.extend(PlannedList(now, osts) for osts in lists)
        self.pending.reserve_many(lists, 1.0)
        self.stats["planned"] += len(lists)

    def expire(self, now: float) -> None:
        """Drop lists past their TTL and classes gone quiet."""
        for key in list(self.queues):
            queue = self.queues[key]
            while queue and (now - queue[0].made_s >= self.ttl_s or now < queue[0].made_s):
                self.pending.reserve(queue.popleft().osts, -1.0)
                self.stats["expired"] += 1
            if not queue:
                del self.queues[key]
        for key in [k for k, st in self.classes.items() if now - st.last_s > 4 * self.ttl_s]:
            del self.classes[key]

    def clear(self) -> None:
        """Drop every queued list (reservations released); rates are kept."""
        for queue in self.queues.values():
            for entry in queue:
                self.pending.reserve(entry.osts, -1.0)
        self.queues.clear()

    def ready(self) -> int:
        """Lists queued over all classes."""
        return sum(len(q) for q in self.queues.values())
