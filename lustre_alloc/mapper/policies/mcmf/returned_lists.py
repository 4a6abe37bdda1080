"""Lists handed out and given back unused, handed out again first in the round-robin
regime.

Lustre's round-robin keeps OSTs even because every list it hands out gets a file. Behind
leases (protocol v2) many do not: a process leases layouts ahead and returns what it did
not use, and the shim's refresh (``liblustre_alloc/la_lease.c``, "Refresh") leases one
layout per use window for a writer slower than that. The regime's cursor moved past every
one of them, so the files actually created were a thinned-out sample of the rotation:
on Lustre 2.17.0 in the lustre-vm guest, 4 writers x 6 files on four alike OSTs were
split 10/3/4/7 and 8/4/4/8 (docs/lustre-vm.md, "control"), where Lustre's allocator gives
6/6/6/6. Handed out again, in the order they came back, before the cursor moves on,
returned lists keep the files created in rotation order, as every list used would.

Rules (ours):

* Every list un-booked (a lease's unused layout, returned or expired) is kept, timed at
  the next round, at most :data:`MAX_KEPT` (the oldest dropped beyond it).
* The round-robin regime takes the oldest kept list that fits the request: as many
  stripes as the request resolves to, every OST a member of its pool, usable and no
  straggler; lists older than ``ttl_s`` or that do not fit are dropped on the way. The
  flow regime never takes them (it decides on the current load).
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Sequence

MAX_KEPT = 4096
"""Most returned lists kept (a lease holds at most 256; 16 such leases back at once)."""


class ReturnedLists:
    """Returned OST lists, oldest first.

    Args:
        ttl_s: how long a returned list may be handed out again after it came back, s
            (> 0; the policy uses its plans' TTL: a list is as fresh as a planned one).
    Raises:
        ValueError: ``ttl_s`` <= 0.
    """

    def __init__(self, ttl_s: float):
        if ttl_s <= 0:
            raise ValueError(f"returned lists' ttl_s must be > 0, got {ttl_s}")
        self.ttl_s = ttl_s
        self._by_count: dict[int, deque[tuple[float, tuple[int, ...]]]] = {}
        self._kept = 0
        self._unstamped: list[tuple[int, ...]] = []
        self.stats = {"returned": 0, "reused": 0, "dropped": 0}

    def __len__(self) -> int:
        return self._kept + len(self._unstamped)

    def give_back(self, osts: Sequence[int]) -> None:
        """Keep ``osts`` (a list handed out and never used). It is timed at the next
        :meth:`stamp`: an un-booking carries no clock (the service's release and the
        simulator's expiry happen between rounds)."""
        self._unstamped.append(tuple(int(i) for i in osts))
        self.stats["returned"] += 1

    def stamp(self, now: float) -> None:
        """Time the lists given back since the last call as returned at ``now`` (s)."""
        for osts in self._unstamped:
            if self._kept >= MAX_KEPT:
                oldest = min((q for q in self._by_count.values() if q), key=lambda q: q[0][0])
                oldest.popleft()
                self._kept -= 1
                self.stats["dropped"] += 1
            self._by_count.setdefault(len(osts), deque()).append((now, osts))
            self._kept += 1
        self._unstamped.clear()

    def take(self, count: int, fits: Callable[[tuple[int, ...]], bool],
             now: float) -> tuple[int, ...] | None:
        """The oldest kept list of ``count`` stripes that ``fits`` (pool, usable, no
        straggler), removed; None when none does. Lists past ``ttl_s`` met on the way, or
        that no longer fit, are dropped (a list another pool's request could still use is
        lost: returned lists are a correction to the rotation, not capacity)."""
        queue = self._by_count.get(count)
        while queue:
            t, osts = queue.popleft()
            self._kept -= 1
            if now - t <= self.ttl_s and now >= t and fits(osts):
                self.stats["reused"] += 1
                return osts
            self.stats["dropped"] += 1
        return None

    def clear(self) -> None:
        """Forget every kept list."""
        self._by_count.clear()
        self._unstamped.clear()
        self._kept = 0
