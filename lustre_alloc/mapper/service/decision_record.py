"""Every answered allocation, in one place: the sampled decision log (:class:`DecisionLog`),
the last decision per jobid and path for ``explain`` (:mod:`lustre_alloc.mapper.explain.last_decisions`) and,
in shadow mode, the ledger pairing the mapper's choice with Lustre's (:mod:`lustre_alloc.mapper.shadow`).
Called by the request loop under the service lock; read by the control socket
(:mod:`lustre_alloc.mapper.service.admin_socket`) under the same lock.

The decision log says why a file went where it did, as structured log lines
(``event=decision``, JSON on stderr, so journald keeps and rotates them), sampled and
rate-limited so that it costs nothing measurable at create rates. Each line names the file
system, the mode (``place``, ``shadow`` or ``refused``), the request (jobid, path, pool,
stripe count and size, expected bytes), the answer (OSTs in stripe order, the policy that
decided, the fallback reason if any, the policy's note; or the errno and reason of an error)
and the version of the cluster state it was decided on; for an answer, priced by the
mapper's cost model on that state, the chosen list's expected completion time and the few
cheapest alternative OSTs (``expected_s``, ``alternatives``: :mod:`lustre_alloc.mapper.explain`). At most
``per_s`` lines a second (a token bucket with a burst of ``per_s``); the lines not written
are counted in :attr:`DecisionLog.suppressed`. ``decision_log_per_s = 0`` turns it off.
"""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from lustre_alloc.mapper.explain.last_decisions import DecisionIndex, DecisionRecord, explain, priced
from lustre_alloc.mapper.explain.pricing import ChoicePricer, ListPrice
from lustre_alloc.mapper.policies.placement import (AllocationError, BooksPlacements, CreateRequest,
                                       Placement)
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.scope import PLACE, SHADOW
from lustre_alloc.mapper.shadow.ledger import REPORTED, ShadowLedger
from lustre_alloc.mapper.shadow.report import summarize
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot


log = logging.getLogger("lustre_alloc.mapper.decisions")


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
        (:func:`lustre_alloc.mapper.explain.last_decisions.explain`), computed only for lines written."""
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

    def record_leased(self, ctx: FsContext, create: CreateRequest, name: str,
                      placement: Placement, state_version: int) -> None:
        """Keep the decision of a file the client created with a leased layout:
        ``create`` is the lease's class (its path the directory), ``name`` the file's name
        in it, ``placement`` the layout it used, decided on ``state_version``. Priced, if
        the line is written, on the state of now."""
        directory = (create.path or "").rstrip("/")
        rec = DecisionRecord.of(ctx.fsname, PLACE, replace(create, path=f"{directory}/{name}"),
                                placement, state_version)
        self.index.add(rec)
        self.log.record(rec, lambda r: priced(r, self.pricer(ctx), ctx.store.current()))

    def _price(self, fsname: str, osts: Sequence[int], bytes_per_stripe: float) -> ListPrice:
        ctx = self.context(fsname)
        if ctx is None:
            return ListPrice(tuple(osts), tuple(float("nan") for _ in osts), float("nan"), None)
        return self.pricer(ctx).price(ctx.store.current(), osts, bytes_per_stripe)

    def report(self, token: int, osts: Sequence[int], stripe_size: int) -> str:
        """A shim's report of Lustre's layout (:meth:`lustre_alloc.mapper.shadow.ledger.ShadowLedger.report`).
        On a first report the mapper's own choice, booked when it was decided, comes off the
        books and Lustre's layout goes on them: the bytes go there, and the next shadow
        decisions must see them as a live mapper sees its own. A decision never reported stays
        booked on the mapper's choice (fading as every pending booking does)."""
        result = self.ledger.report(token, osts, stripe_size, self._price)
        entry = self.ledger.entries.get(token)
        if result == REPORTED and entry is not None:
            ctx = self.context(entry.decision.fsname)
            primary = ctx.gate.primary if ctx is not None else None
            if ctx is not None and isinstance(primary, BooksPlacements):
                d = entry.decision
                create = CreateRequest(d.jobid, d.stripe_count, d.stripe_size, d.expected_bytes)
                ctx.unbook(create, d.osts)
                primary.book_observed(ctx.store.current(), osts,
                                      create.bytes_per_stripe(len(osts)), d.jobid)
        return result

    def explain(self, *, jobid: str | None = None, path: str | None = None,
                fsname: str | None = None) -> dict[str, Any] | None:
        """The last decision for ``path`` or ``jobid``, priced now
        (:func:`lustre_alloc.mapper.explain.last_decisions.explain`); None when not remembered."""
        rec = self.index.find(jobid=jobid, path=path, fsname=fsname)
        if rec is None:
            return None
        ctx = self.context(rec.fsname)
        if ctx is None:
            return None
        return explain(rec, self.pricer(ctx), ctx.store.current())

    def shadow_report(self, window_s: float, fsname: str | None = None) -> dict[str, Any]:
        """The shadow report of the last ``window_s`` seconds (:func:`lustre_alloc.mapper.shadow.report.summarize`)."""
        entries = self.ledger.window(time.time() - window_s, fsname)
        out = summarize(entries, window_s)
        out["fsname"] = fsname or ""
        out["ledger"] = dict(self.ledger.counts)
        return out
