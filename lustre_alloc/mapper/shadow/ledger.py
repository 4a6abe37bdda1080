"""The shadow ledger: each shadow decision with the layout Lustre chose for the same file.

A decision gets a token (sent in the reply's ``shadow`` field); the shim's report names the
token and the OSTs it read back with ``LL_IOC_LOV_GETSTRIPE``. Both lists are priced on the
state current when the report arrives (:class:`lustre_alloc.mapper.explain.pricing.ChoicePricer`), so the
two compare on one state version; the version decided on is kept beside it.

Bounded: at most ``max_entries`` decisions are kept (the oldest go first; their reports are
then counted as ``unknown``). Tokens start from the wall clock in microseconds, so a report
meant for a previous mapper process is ``unknown`` rather than matched to another file.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence

from lustre_alloc.mapper.explain.last_decisions import DecisionRecord
from lustre_alloc.mapper.explain.pricing import ListPrice

MAX_ENTRIES = 100_000
"""Shadow decisions kept (about 30 MiB at most)."""

REPORTED, UNKNOWN, DUPLICATE = "ok", "unknown", "duplicate"
"""Results of :meth:`ShadowLedger.report`."""


@dataclass(slots=True)
class ShadowEntry:
    """One shadow decision and, once reported, Lustre's layout.

    Attributes:
        decision: the mapper's decision (``mode == "shadow"``).
        lustre_osts: Lustre's OSTs in stripe order (None until reported).
        lustre_stripe_size: bytes (0 until reported).
        reported_s: wall clock of the report (NaN until reported).
        mapper_price, lustre_price: both lists priced on the state at report time.
    """
    decision: DecisionRecord
    lustre_osts: tuple[int, ...] | None = None
    lustre_stripe_size: int = 0
    reported_s: float = math.nan
    mapper_price: ListPrice | None = None
    lustre_price: ListPrice | None = None


class ShadowLedger:
    """Shadow decisions by token (module docstring).

    Args:
        max_entries: decisions kept.
        clock: wall clock, s.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, clock: Callable[[], float] = time.time):
        self.max_entries = max_entries
        self.clock = clock
        self.entries: OrderedDict[int, ShadowEntry] = OrderedDict()
        self._next = int(clock() * 1e6)
        self.counts = {REPORTED: 0, UNKNOWN: 0, DUPLICATE: 0, "evicted_unreported": 0}

    def next_token(self) -> int:
        """A fresh token (never 0)."""
        self._next += 1
        return self._next

    def decided(self, record: DecisionRecord) -> None:
        """Keep a shadow decision under ``record.shadow_token``."""
        self.entries[record.shadow_token] = ShadowEntry(record)
        while len(self.entries) > self.max_entries:
            _, old = self.entries.popitem(last=False)
            if old.lustre_osts is None:
                self.counts["evicted_unreported"] += 1

    def report(self, token: int, osts: Sequence[int], stripe_size: int,
               price: Callable[[str, Sequence[int], float], ListPrice]) -> str:
        """Lustre's layout for the decision ``token``; ``price(fsname, osts,
        bytes_per_stripe)`` prices a list on the file system's current state. Returns ``"ok"``, ``"unknown"`` (no such
        decision kept) or ``"duplicate"`` (already reported; the first report stands)."""
        entry = self.entries.get(token)
        if entry is None:
            result = UNKNOWN
        elif entry.lustre_osts is not None:
            result = DUPLICATE
        else:
            entry.lustre_osts = tuple(int(i) for i in osts)
            entry.lustre_stripe_size = stripe_size
            entry.reported_s = self.clock()
            bps = entry.decision.bytes_per_stripe
            fsname = entry.decision.fsname
            entry.mapper_price = price(fsname, entry.decision.osts, bps)
            entry.lustre_price = price(fsname, entry.lustre_osts, bps)
            result = REPORTED
        self.counts[result] += 1
        return result

    def window(self, since_s: float, fsname: str | None = None) -> list[ShadowEntry]:
        """Decisions made at or after ``since_s`` (wall clock), oldest first, of
        ``fsname`` (all when None)."""
        return [e for e in self.entries.values()
                if e.decision.time_s >= since_s and (fsname is None or e.decision.fsname == fsname)]
