"""The mapper's decision log (issue #30): why a file went where it did, as structured log lines
(``event=decision``, JSON on stderr, so journald keeps and rotates them), sampled and
rate-limited so that it costs nothing measurable at create rates.

Each line names the file system, the request (jobid, path, pool, stripe count and size,
expected bytes), the answer (OSTs in stripe order, the policy that decided, the fallback
reason if any, the policy's note; or the errno and reason of an error) and the version of the
cluster state it was decided on. At most ``per_s`` lines a second (a token bucket with a
burst of ``per_s``); the lines not written are counted in :attr:`DecisionLog.suppressed`.
``decision_log_per_s = 0`` turns it off.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from mapper.policies.placement import AllocationError, CreateRequest, Placement

log = logging.getLogger("mapper.decisions")


class DecisionLog:
    """Rate-limited ``event=decision`` lines.

    Args:
        per_s: most lines a second (0: off).
        clock: monotonic seconds.
    """

    def __init__(self, per_s: float, clock: Callable[[], float] = time.monotonic):
        self.per_s = per_s
        self.clock = clock
        self.tokens = per_s
        self.last_s = clock()
        self.written = 0
        self.suppressed = 0

    def record(self, fsname: str, create: CreateRequest, result: Placement | AllocationError,
               state_version: int | None) -> bool:
        """Log one decision if the budget allows; True when written."""
        if self.per_s <= 0:
            return False
        now = self.clock()
        self.tokens = min(self.per_s, self.tokens + (now - self.last_s) * self.per_s)
        self.last_s = now
        if self.tokens < 1.0:
            self.suppressed += 1
            return False
        self.tokens -= 1.0
        self.written += 1
        fields = {"event": "decision", "fsname": fsname, "jobid": create.jobid,
                  "path": create.path, "pool": create.pool or "",
                  "stripe_count": create.stripe_count, "stripe_size": create.stripe_size,
                  "expected_bytes": create.expected_bytes, "state_version": state_version,
                  "suppressed_before": self.suppressed}
        if isinstance(result, Placement):
            fields.update(osts=list(result.osts), policy=result.policy,
                          fallback=result.fallback, note=result.note)
            log.info("placed %s on %s by %s", create.path or create.jobid, list(result.osts),
                     result.policy, extra=fields)
        else:
            fields.update(errno=result.errno, reason=result.reason)
            log.info("refused %s: %s", create.path or create.jobid, result.reason, extra=fields)
        return True
