"""The last decision the mapper made per jobid and per path, for ``lustre-alloc-ctl explain``.

Every answered allocation (placed, shadow or refused) is kept as a :class:`DecisionRecord`
in two bounded least-recently-used maps: by (file system, jobid) and by path. Explaining one
prices the chosen list and the few cheapest alternatives with the mapper's cost model
(:mod:`lustre_alloc.mapper.explain.pricing`) on the current state, which names its version beside the
version the decision was made on.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

from lustre_alloc.mapper.explain.pricing import ChoicePricer
from lustre_alloc.mapper.policies.placement import AllocationError, CreateRequest, Placement
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot

MAX_RECORDS = 10_000
"""Decisions remembered per map (jobids and paths): a few hundred KiB."""
ALTERNATIVES = 3
"""Cheapest alternative OSTs shown beside a decision."""


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One answered allocation.

    Attributes:
        time_s: wall clock, s since the epoch.
        fsname: file system.
        mode: ``"place"`` (the answer was applied), ``"shadow"`` (decided, not applied) or
            ``"refused"`` (an error reply).
        jobid, path, pool, stripe_count, stripe_size (bytes), expected_bytes: the request.
        osts: the answer, stripe order (empty when refused).
        policy, fallback, note: who decided, why not the primary ("" when it did), its note.
        errno, reason: the error reply (0, "" otherwise).
        state_version: the cluster state version decided on.
        shadow_token: the shadow ledger's token (0 outside shadow mode).
    """
    time_s: float
    fsname: str
    mode: str
    jobid: str
    path: str
    pool: str
    stripe_count: int
    stripe_size: int
    expected_bytes: int
    osts: tuple[int, ...]
    policy: str
    fallback: str
    note: str
    errno: int
    reason: str
    state_version: int | None
    shadow_token: int = 0

    @classmethod
    def of(cls, fsname: str, mode: str, create: CreateRequest,
           result: Placement | AllocationError, state_version: int | None,
           shadow_token: int = 0, now_s: float | None = None) -> "DecisionRecord":
        """The record of ``create`` answered with ``result``."""
        t = time.time() if now_s is None else now_s
        common = (t, fsname)
        req = (create.jobid, create.path or "", create.pool or "", create.stripe_count,
               create.stripe_size, create.expected_bytes)
        if isinstance(result, Placement):
            return cls(*common, mode, *req, tuple(result.osts), result.policy, result.fallback,
                       result.note or "", 0, "", state_version, shadow_token)
        return cls(*common, "refused", *req, (), "", "", "", result.errno, result.reason,
                   state_version, 0)

    @property
    def bytes_per_stripe(self) -> float:
        """Expected bytes per stripe (0: unknown)."""
        n = len(self.osts) or max(self.stripe_count, 1)
        return self.expected_bytes / n if self.expected_bytes else 0.0


class DecisionIndex:
    """Last decisions by (fsname, jobid) and by path (module docstring).

    Args:
        max_records: decisions kept per map.
    """

    def __init__(self, max_records: int = MAX_RECORDS):
        self.max_records = max_records
        self.by_jobid: OrderedDict[tuple[str, str], DecisionRecord] = OrderedDict()
        self.by_path: OrderedDict[str, DecisionRecord] = OrderedDict()

    def add(self, record: DecisionRecord) -> None:
        """Remember ``record`` (the oldest entries go beyond ``max_records``)."""
        for table, key in ((self.by_jobid, (record.fsname, record.jobid)),
                           (self.by_path, record.path)):
            if not key or key == (record.fsname, ""):
                continue
            table[key] = record
            table.move_to_end(key)
            if len(table) > self.max_records:
                table.popitem(last=False)

    def find(self, *, jobid: str | None = None, path: str | None = None,
             fsname: str | None = None) -> DecisionRecord | None:
        """The last decision for ``path``, else for ``jobid`` (on ``fsname``, or on any
        file system when None); None when not remembered."""
        if path:
            rec = self.by_path.get(path)
            if rec is not None and (fsname is None or rec.fsname == fsname):
                return rec
            return None
        if jobid:
            if fsname is not None:
                return self.by_jobid.get((fsname, jobid))
            found = [r for (fs, j), r in self.by_jobid.items() if j == jobid]
            return max(found, key=lambda r: r.time_s) if found else None
        return None


def priced(record: DecisionRecord, pricer: ChoicePricer, snapshot: ClusterSnapshot,
           k: int = ALTERNATIVES) -> dict[str, Any]:
    """The chosen list's expected seconds and the ``k`` cheapest usable OSTs of its pool,
    priced on ``snapshot`` (its version in ``state_version``), JSON-ready."""
    bps = record.bytes_per_stripe
    chosen = pricer.price(snapshot, record.osts, bps) if record.osts else None
    return {
        "state_version": snapshot.version,
        "bytes_per_stripe": bps,
        "chosen_expected_s": None if chosen is None else _finite(chosen.expected_s),
        "chosen_stripe_s": None if chosen is None else [_finite(s) for s in chosen.stripe_s],
        "cheapest": [{"ost": i, "expected_s": s}
                     for i, s in pricer.cheapest(snapshot, record.pool or None, bps, k)],
    }


def explain(record: DecisionRecord, pricer: ChoicePricer, snapshot: ClusterSnapshot,
            k: int = ALTERNATIVES) -> dict[str, Any]:
    """``record`` as a JSON-ready map, with ``priced`` (:func:`priced`)."""
    out = asdict(record)
    out["osts"] = list(record.osts)
    out["priced"] = priced(record, pricer, snapshot, k)
    return out


def _finite(x: float) -> float | None:
    return None if x != x else x
