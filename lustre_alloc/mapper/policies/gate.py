"""When the global mapper may decide, and what decides otherwise.

The paper runs prediction and the flow solver only while the MDS has CPU to spare:
"the mapper is only invoked when the MDS CPU utilization is below 70%" (Paul et al. 2017,
Section III-D); otherwise Lustre's own allocator places the file. We add two more
reasons to step aside, which a service on a real MDS needs:

* ``stale``: the statistics are too old to trust (no sample from some usable OST's
  server for ``max_sample_age_s``, by default two collector intervals);
* ``budget``: the primary's rounds are slower than ``round_budget_s`` (an exponentially
  weighted mean of measured round times, so one moderately slow round does not flip it).
  Once over budget the primary rests for ``budget_rest_s`` (doubling, up to
  ``BUDGET_REST_MAX_S``, each time a trial round is still too slow), then one trial
  round measures it afresh (the estimate restarts from half the budget, so a single
  scheduling hiccup during the trial does not prolong the rest). Resting by time rather than by rounds bounds the cost of
  a primary that cannot fit the budget (e.g. the flow solver on thousands of OSTs) to
  one slow round per rest period, instead of one every other round.

A primary that raises anything other than a request error (a solver failure) also falls
back (``error``): a placement bug must never fail a create.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Sequence

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import stale_servers
from lustre_alloc.mapper.policies.lustre_qos import LustreQos
from lustre_alloc.mapper.policies.placement import (AllocationError, BatchPolicy, CreateRequest, LearnsSizes,
                                       LeavesToLustre, Placement,
                                       PlacementPolicy, allocate_each, decide_batch,
                                       prepare_decisions)

log = logging.getLogger("lustre_alloc.mapper.policies.gate")

MDS_CPU_LIMIT_PERCENT = 70.0
"""Section III-D: prediction + flow only while MDS CPU < 70%."""
BUDGET_EWMA_WEIGHT = 0.2
"""Weight of the newest round time in the budget estimate."""
BUDGET_REST_S = 1.0
"""First rest of a primary over budget, seconds (ours; doubles while trials stay slow)."""
BUDGET_REST_MAX_S = 10.0
"""Longest rest, seconds."""

_DEFAULT_LOD = LustreQos()
"""Lustre's allocator with its default tunables: whose round-robin test applies when the
fallback is not Lustre's QOS allocator."""

FALLBACK_REASONS = ("mds_cpu", "stale", "budget", "error", "check")
"""Why the fallback decided; ``check`` is set by the service when its last-line check
rejected the primary's answer for one request."""


class GatedPolicy(BatchPolicy):
    """The primary policy when the MDS can afford it, else the fallback.

    Args:
        primary: the policy to use when allowed (``mcmf``).
        fallback: Lustre's allocator (``lustre_qos`` by default in the service).
        mds_cpu_limit_percent: fall back when ``snapshot.mds_cpu_percent`` reaches it.
        max_sample_age_s: fall back when any usable OST's statistics are older
            (None: never; the simulator's view is always current).
        round_budget_s: fall back while the estimated primary round time exceeds it
            (None: no budget).
        stale_source: computes the stale servers (default :func:`stale_servers`; the
            service passes its state store's cached equivalent).
        budget_rest_s: first rest of a primary over budget, seconds.
        clock: monotonic seconds, for round times and rests (tests inject one).

    ``name`` is the primary's; each placement's ``policy`` names who decided and
    ``fallback`` why not the primary. ``fallbacks`` counts rounds per reason.
    """

    def __init__(self, primary: PlacementPolicy, fallback: PlacementPolicy,
                 mds_cpu_limit_percent: float = MDS_CPU_LIMIT_PERCENT,
                 max_sample_age_s: float | None = None,
                 round_budget_s: float | None = None,
                 stale_source: Callable[[ClusterSnapshot, float], list[str]] = stale_servers,
                 budget_rest_s: float = BUDGET_REST_S,
                 clock: Callable[[], float] = time.monotonic):
        self.primary = primary
        self.fallback = fallback
        self.name = primary.name
        self.mds_cpu_limit_percent = mds_cpu_limit_percent
        self.max_sample_age_s = max_sample_age_s
        self.round_budget_s = round_budget_s
        self.stale_source = stale_source
        self.budget_rest_s = budget_rest_s
        self.clock = clock
        self.round_estimate_s = 0.0
        self._rest_s = budget_rest_s
        self._rest_until = float("-inf")
        self.fallbacks: dict[str, int] = {r: 0 for r in FALLBACK_REASONS}
        self.last_stale: list[str] = []

    def fallback_reason(self, snapshot: ClusterSnapshot) -> str:
        """Why the primary may not decide now ("" when it may)."""
        if snapshot.mds_cpu_percent >= self.mds_cpu_limit_percent:
            return "mds_cpu"
        if self.max_sample_age_s is not None:
            self.last_stale = self.stale_source(snapshot, self.max_sample_age_s)
            if self.last_stale:
                return "stale"
        if self.over_budget() and self.clock() < self._rest_until:
            return "budget"
        return ""

    def over_budget(self) -> bool:
        """True while the estimated primary round time exceeds the budget."""
        return self.round_budget_s is not None and self.round_estimate_s > self.round_budget_s

    def _measured(self, took_s: float) -> None:
        budget = self.round_budget_s
        if budget is not None and self.round_estimate_s > budget:    # over_budget()
            # a trial after a rest: restart the estimate from half the budget, so one
            # noisy trial does not keep the primary resting, a truly slow one does
            self.round_estimate_s = 0.5 * budget
        self.round_estimate_s += BUDGET_EWMA_WEIGHT * (took_s - self.round_estimate_s)
        if self.over_budget():
            self._rest_until = self.clock() + self._rest_s
            log.info("primary over its round budget; the fallback decides while it rests",
                     extra={"event": "budget_rest", "estimate_s": self.round_estimate_s,
                            "budget_s": self.round_budget_s, "rest_s": self._rest_s})
            self._rest_s = min(2 * self._rest_s, BUDGET_REST_MAX_S)
        else:
            self._rest_s = self.budget_rest_s

    def leaves_to_lustre(self, snapshot: ClusterSnapshot, request: CreateRequest) -> str:
        """The primary's :meth:`~lustre_alloc.mapper.policies.placement.LeavesToLustre.leaves_to_lustre`
        when Lustre's allocator would place round-robin on ``snapshot`` (its free space
        within ``qos_threshold_rr``: the fallback's when it is Lustre's QOS allocator,
        else Lustre's default 17%), "" otherwise. Where free space is uneven LOD weighs
        by it (QOS) and piles new files on the emptiest OSTs, which the primary's
        round-robin regime does not: measured in the simulator, leaving such creates to
        Lustre cost qos-high-fill 153% and expansion-25pct 55% of the phase mean
        (docs/history.md, "Leaving creates to Lustre where free space is uneven")."""
        primary = self.primary
        if not isinstance(primary, LeavesToLustre):
            return ""
        why = primary.leaves_to_lustre(snapshot, request)
        lod = self.fallback if isinstance(self.fallback, LustreQos) else _DEFAULT_LOD
        return why if why and lod.places_round_robin(snapshot) else ""

    def learn_sizes(self, jobid: str, sizes: Sequence[int]) -> int:
        """The primary's :meth:`~lustre_alloc.mapper.policies.placement.LearnsSizes.learn_sizes` (0 when
        it learns none): a file's size at close teaches the policy that placed it."""
        return self.primary.learn_sizes(jobid, sizes) if isinstance(self.primary, LearnsSizes) \
            else 0

    def prepare(self, snapshot: ClusterSnapshot) -> None:
        """Prepare the primary and the fallback (:func:`prepare_decisions`), so neither the
        first answer nor the round budget's first measurement pays for building them."""
        prepare_decisions(self.primary, snapshot)
        prepare_decisions(self.fallback, snapshot)

    def allocate_batch(self, snapshot: ClusterSnapshot,
                       requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
        """One round: a placement or an :class:`AllocationError` per request, in order."""
        reason = self.fallback_reason(snapshot)
        if not reason:
            t0 = self.clock()
            try:
                try:
                    results = decide_batch(self.primary, snapshot, requests)
                except AllocationError:
                    # a batch method that refuses the whole batch for one request:
                    # decide one by one, so the others still get their layouts
                    results = allocate_each(self.primary, snapshot, requests)
            except Exception:  # noqa: BLE001 - a solver bug must not fail a create
                log.exception("primary policy failed; fallback decides this round",
                              extra={"event": "primary_error", "policy": self.primary.name})
                reason = "error"
            else:
                self._measured(self.clock() - t0)
                return results
        return self.fall_back(snapshot, requests, reason)

    def fall_back(self, snapshot: ClusterSnapshot, requests: Sequence[CreateRequest],
                  reason: str) -> list[Placement | AllocationError]:
        """The fallback's answers for ``requests``, each placement marked ``fallback =
        reason``, the round counted in :attr:`fallbacks` (also the service's answer for a
        layout its placement check refused, reason ``check``)."""
        self.fallbacks[reason] += 1
        out: list[Placement | AllocationError] = []
        for r in decide_batch(self.fallback, snapshot, requests):
            if isinstance(r, Placement):
                r = Placement(r.osts, r.policy, r.note, fallback=reason)
            out.append(r)
        return out
