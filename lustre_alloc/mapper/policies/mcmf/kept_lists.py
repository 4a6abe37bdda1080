"""OST lists chosen ahead of their request, kept per application until it comes.

MCMF's rounds also place each application's next *predicted* requests (Paul et al. 2017,
Section III-C2); a predicted request that got all its stripes is kept here, and the real
request that matches the head of its application's queue (same stripe count, stripe size
and pool; every OST still usable and not straggling; younger than the TTL) is answered
from it at once. Kept stripes are reserved in the :class:`~lustre_alloc.mapper.state.pending.PendingOverlay`
(they count as queued writes) until handed out or dropped.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from lustre_alloc.mapper.state.arrays import OstTable
from lustre_alloc.mapper.state.pending import PendingOverlay


@dataclass
class KeptList:
    """An OST list chosen for a predicted request, waiting for the real one.

    Attributes:
        made_s: snapshot time it was chosen at, s.
        stripe_count, stripe_size (bytes), pool: what the request must ask for.
        osts: OST indices in stripe order.
        probability: the prediction's probability.
        bytes_per_stripe: expected bytes per stripe (for the predicted-load metric).
    """
    made_s: float
    stripe_count: int
    stripe_size: int
    pool: str | None
    osts: tuple[int, ...]
    probability: float
    bytes_per_stripe: float = 0.0


class KeptLists:
    """Per application, a queue of :class:`KeptList` in predicted order.

    Args:
        pending: where kept stripes are reserved.
        ttl_s: how long a list stays valid, s.
    """

    def __init__(self, pending: PendingOverlay, ttl_s: float):
        self.pending = pending
        self.ttl_s = ttl_s
        self.by_job: dict[str, deque[KeptList]] = {}
        self._last_sweep_s = -np.inf

    def release(self, entries: Iterable[KeptList]) -> None:
        """Lists that will not be handed out free their reservation."""
        for e in entries:
            self.pending.reserve(e.osts, -1.0)

    def take(self, jobid: str, count: int, stripe_size: int, pool: str | None,
             table: OstTable, stragglers: set[int], now: float) -> tuple[KeptList | None, bool]:
        """The head of ``job_id``'s queue if it fits the request and is still usable
        (its reservation released), else None. The flag is True when a head existed
        but did not match the request's shape (a prediction miss); the queue is then
        dropped, as it is when an OST of the head is no longer usable."""
        queue = self.by_job.get(jobid)
        if not queue:
            return None, False
        while queue and now - queue[0].made_s >= self.ttl_s:
            self.release([queue.popleft()])
        if not queue:
            return None, False
        head = queue[0]
        if head.stripe_count != count or head.stripe_size != stripe_size or head.pool != pool:
            self.release(queue)
            queue.clear()
            return None, True
        if not table.usable_at(head.osts) or any(i in stragglers for i in head.osts):
            self.release(queue)
            queue.clear()
            return None, False
        self.release([queue.popleft()])
        return head, False

    def replace(self, jobid: str, lists: list[KeptList]) -> None:
        """``job_id``'s new queue (the old one is released); reserves the new lists."""
        self.release(self.by_job.get(jobid, ()))
        self.by_job[jobid] = deque(lists)
        for entry in lists:
            self.pending.reserve(entry.osts, 1.0)

    def drop(self, jobid: str) -> None:
        """Forget ``job_id``'s queue (released)."""
        self.release(self.by_job.pop(jobid, ()))

    def expire(self, now: float) -> None:
        """Drop lists past their TTL (at most once per second of clock)."""
        if now - self._last_sweep_s < 1.0 and now >= self._last_sweep_s:
            return
        self._last_sweep_s = now
        for job in list(self.by_job):
            queue = self.by_job[job]
            while queue and now - queue[0].made_s >= self.ttl_s:
                self.release([queue.popleft()])
            if not queue:
                del self.by_job[job]

    def __getitem__(self, jobid: str) -> deque[KeptList]:
        return self.by_job[jobid]

    def values(self):
        return self.by_job.values()
