"""The mapper's decision log (issue #30): why a file went where it did, as structured log lines
(``event=decision``, JSON on stderr, so journald keeps and rotates them), sampled and
rate-limited so that it costs nothing measurable at create rates.

Each line names the file system, the mode (``place``, ``shadow`` or ``refused``), the
request (jobid, path, pool, stripe count and size, expected bytes), the answer (OSTs in
stripe order, the policy that decided, the fallback reason if any, the policy's note; or
the errno and reason of an error) and the version of the cluster state it was decided on;
for an answer, priced by the mapper's cost model on that state, the chosen list's expected
completion time and the few cheapest alternative OSTs (``expected_s``, ``alternatives``:
:mod:`mapper.explain`). At most ``per_s`` lines a second (a token bucket with a burst of
``per_s``); the lines not written are counted in :attr:`DecisionLog.suppressed`.
``decision_log_per_s = 0`` turns it off.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

from mapper.explain.decisions import DecisionRecord

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

    def allow(self) -> bool:
        """Take one line from the budget; False when over it (counted as suppressed)."""
        if self.per_s <= 0:
            return False
        now = self.clock()
        self.tokens = min(self.per_s, self.tokens + (now - self.last_s) * self.per_s)
        self.last_s = now
        if self.tokens < 1.0:
            self.suppressed += 1
            return False
        self.tokens -= 1.0
        return True

    def record(self, rec: DecisionRecord,
               priced: Callable[[DecisionRecord], Mapping[str, Any]] | None = None) -> bool:
        """Log one decision if the budget allows; True when written. ``priced(rec)`` gives
        the chosen list's price and the cheapest alternatives
        (:func:`mapper.explain.decisions.explain`), computed only for lines written."""
        if not self.allow():
            return False
        self.written += 1
        fields: dict[str, Any] = {"event": "decision", "fsname": rec.fsname, "mode": rec.mode,
                                  "jobid": rec.jobid, "path": rec.path, "pool": rec.pool,
                                  "stripe_count": rec.stripe_count,
                                  "stripe_size": rec.stripe_size,
                                  "expected_bytes": rec.expected_bytes,
                                  "state_version": rec.state_version,
                                  "suppressed_before": self.suppressed}
        if rec.mode == "refused":
            fields.update(errno=rec.errno, reason=rec.reason)
            log.info("refused %s: %s", rec.path or rec.jobid, rec.reason, extra=fields)
            return True
        fields.update(osts=list(rec.osts), policy=rec.policy, fallback=rec.fallback,
                      note=rec.note, shadow_token=rec.shadow_token)
        if priced is not None:
            p = priced(rec)
            fields.update(expected_s=p.get("chosen_expected_s"), alternatives=p.get("cheapest"))
        log.info("%s %s on %s by %s", "shadow-decided" if rec.mode == "shadow" else "placed",
                 rec.path or rec.jobid, list(rec.osts), rec.policy, extra=fields)
        return True
