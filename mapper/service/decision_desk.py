"""Every answered allocation, in one place: the sampled decision log
(:mod:`mapper.service.decision_log`), the last decision per jobid and path for ``explain``
(:mod:`mapper.explain.decisions`) and, in shadow mode, the ledger pairing the mapper's choice
with Lustre's (:mod:`mapper.shadow`). Called by the request loop under the service lock; read
by the control socket (:mod:`mapper.service.control`) under the same lock.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from mapper.explain.decisions import DecisionIndex, DecisionRecord, explain, priced
from mapper.explain.pricing import ChoicePricer, ListPrice
from mapper.policies.placement import (AllocationError, BooksPlacements, CreateRequest,
                                       Placement)
from mapper.service.decision_log import DecisionLog
from mapper.service.fs_context import FsContext
from mapper.service.scope import SHADOW
from mapper.shadow.ledger import REPORTED, ShadowLedger
from mapper.shadow.report import summarize
from mapper.state.cluster_state import ClusterSnapshot


class DecisionDesk:
    """The decision log, the explain index and the shadow ledger of one service.

    Args:
        per_s: decision log lines a second (reloadable: :attr:`log` ``.per_s``).
        contexts: the service's file systems.
    """

    def __init__(self, per_s: float, contexts: dict[str, FsContext]):
        self.log = DecisionLog(per_s)
        self.index = DecisionIndex()
        self.ledger = ShadowLedger()
        self.contexts = contexts
        self._pricers: dict[str, ChoicePricer] = {}

    def pricer(self, ctx: FsContext) -> ChoicePricer:
        """The file system's pricer (its own rate estimates)."""
        p = self._pricers.get(ctx.key)
        if p is None:
            p = self._pricers[ctx.key] = ChoicePricer()
        return p

    def prepare(self, ctx: FsContext, snap: ClusterSnapshot) -> None:
        """Build ``ctx``'s pricer arrays for ``snap`` before the first decision is logged."""
        self.pricer(ctx).prepare(snap)

    def context(self, fsname: str) -> FsContext | None:
        """The context serving ``fsname`` (its configured key or sampled name)."""
        for ctx in self.contexts.values():
            if fsname in (ctx.fsname, ctx.key):
                return ctx
        return None

    def record(self, ctx: FsContext, snap: ClusterSnapshot, mode: str, create: CreateRequest,
               result: Placement | AllocationError, state_version: int | None) -> int:
        """Keep one answer; returns its shadow token (0 unless ``mode`` is shadow and the
        answer a placement)."""
        token = (self.ledger.next_token()
                 if mode == SHADOW and isinstance(result, Placement) else 0)
        rec = DecisionRecord.of(ctx.fsname, mode, create, result, state_version, token)
        self.index.add(rec)
        if token:
            self.ledger.decided(rec)
        self.log.record(rec, lambda r: priced(r, self.pricer(ctx), snap))
        return token

    def _price(self, fsname: str, osts: Sequence[int], bytes_per_stripe: float) -> ListPrice:
        ctx = self.context(fsname)
        if ctx is None:
            return ListPrice(tuple(osts), tuple(float("nan") for _ in osts), float("nan"), None)
        return self.pricer(ctx).price(ctx.store.current(), osts, bytes_per_stripe)

    def report(self, token: int, osts: Sequence[int], stripe_size: int) -> str:
        """A shim's report of Lustre's layout (:meth:`mapper.shadow.ledger.ShadowLedger.report`).
        A first report is booked as pending load on Lustre's OSTs: the bytes go there, and the
        next shadow decisions must see them as a live mapper sees its own."""
        result = self.ledger.report(token, osts, stripe_size, self._price)
        entry = self.ledger.entries.get(token)
        if result == REPORTED and entry is not None:
            ctx = self.context(entry.decision.fsname)
            primary = ctx.gate.primary if ctx is not None else None
            if ctx is not None and isinstance(primary, BooksPlacements):
                primary.book_observed(ctx.store.current(), osts, entry.decision.bytes_per_stripe,
                                      entry.decision.jobid)
        return result

    def explain(self, *, jobid: str | None = None, path: str | None = None,
                fsname: str | None = None) -> dict[str, Any] | None:
        """The last decision for ``path`` or ``jobid``, priced now
        (:func:`mapper.explain.decisions.explain`); None when not remembered."""
        rec = self.index.find(jobid=jobid, path=path, fsname=fsname)
        if rec is None:
            return None
        ctx = self.context(rec.fsname)
        if ctx is None:
            return None
        return explain(rec, self.pricer(ctx), ctx.store.current())

    def shadow_report(self, window_s: float, fsname: str | None = None) -> dict[str, Any]:
        """The shadow report of the last ``window_s`` seconds (:func:`mapper.shadow.report.summarize`)."""
        entries = self.ledger.window(time.time() - window_s, fsname)
        out = summarize(entries, window_s)
        out["fsname"] = fsname or ""
        out["ledger"] = dict(self.ledger.counts)
        return out
