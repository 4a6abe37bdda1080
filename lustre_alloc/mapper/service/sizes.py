"""File sizes at close (protocol v2 ``sizes``, docs/protocol.md): what the shim reports of
the files it created when they close, taught to the primary policy's chains
(:class:`lustre_alloc.mapper.policies.placement.LearnsSizes`).

A size is learned under the job id the client's creates are learned under (its own, or the
peer's shared overflow id past its new-application limits, :mod:`lustre_alloc.mapper.service.limits`):
a client can teach only what its creates could, and the request rate limit bounds both.
"""
from __future__ import annotations

import threading

from lustre_alloc.mapper.policies.placement import LearnsSizes
from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.intake import Alloc
from lustre_alloc.mapper.service.limits import PeerLimits
from lustre_alloc.mapper.service.metrics import MapperMetrics


class SizeDesk:
    """Answers ``sizes`` messages.

    Args:
        limits: the per-client bounds (the job id a size is learned under).
        lock: the service lock (the policy is touched under it).
        metrics: the service's metrics (``file_sizes_total``).
    """

    def __init__(self, limits: PeerLimits, lock: threading.Lock, metrics: MapperMetrics):
        self.limits = limits
        self.lock = lock
        self.metrics = metrics

    def learn(self, ctx: FsContext, group: list[Alloc]) -> list[tuple[bytes, bytes]]:
        """Teach ``ctx``'s primary policy each message's sizes; one reply per message."""
        primary = ctx.gate.primary
        tracked = ctx.tracked()
        out = []
        for identity, req, peer in group:
            learned = 0
            if isinstance(primary, LearnsSizes):
                job = req.job if tracked is None else self.limits.job_for(peer, req.job,
                                                                         tracked)
                with self.lock:
                    learned = primary.learn_sizes(job, req.sizes)
            if learned:
                self.metrics.file_sizes.labels("learned").inc(learned)
            if len(req.sizes) > learned:
                self.metrics.file_sizes.labels("ignored").inc(len(req.sizes) - learned)
            out.append((identity, wire.encode_sized(req.id, learned)))
        return out


__all__ = ["SizeDesk"]
