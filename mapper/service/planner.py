"""The service's background planner: keeps the primary's plan queues full (issue #19).

The request loop answers from lists planned ahead
(:mod:`mapper.policies.plan_queues`); this thread refills them. Every ``interval_s`` (or
at once when the loop signals a miss) it calls the primary's
:meth:`~mapper.policies.mcmf.McmfPolicy.plan` on the state store's snapshot. ``plan``
reads the state and queues its lists under the service's lock, but builds and solves
the flow outside it, so the loop keeps answering (from older lists, checked in
O(stripe count)) while a plan is computed.

The planner rests while the gate would not let the primary decide because of the MDS CPU
(Section III-D) or stale statistics: planning then would only spend MDS CPU on lists
nobody takes. It keeps planning while the primary rests over its round budget: the
budget protects the request path, which planned lists are what bring back under it. A failing plan is logged and counted,
never fatal: requests then miss and the primary solves them in its round.

Metrics (Prometheus, on the service's registry, prefix ``lustre_alloc_mapper_``):
``plan_lists_total`` by outcome (planned, hits, compatible, misses, expired, invalid),
``plan_ready`` (lists queued now), ``plan_errors_total``.
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from mapper.service.metrics import PREFIX

log = logging.getLogger("mapper.service.planner")

PLAN_INTERVAL_S = 0.005
"""Longest wait between two refills, s: a class drained by a burst is refilled within
this (plus one planning round)."""


SWITCH_INTERVAL_S = 0.0005
"""Python's thread switch interval while the planner runs, s (a request waits at most
about this long for the interpreter; the default 5 ms would be most of a create)."""


class _PlanMetrics:
    """Prometheus view of the plan queues' counters (read at scrape time)."""

    def __init__(self, planner: "BackgroundPlanner"):
        self.planner = planner

    def collect(self) -> Iterable:
        plans = self.planner.plans
        c = CounterMetricFamily(PREFIX + "plan_lists", "Planned OST lists by outcome",
                                labels=["outcome"])
        for k, v in sorted(plans.stats.items()):
            c.add_metric([k], v)
        yield c
        yield GaugeMetricFamily(PREFIX + "plan_ready", "Planned lists queued now",
                                value=plans.ready())
        e = CounterMetricFamily(PREFIX + "plan_errors", "Planning rounds that failed")
        e.add_metric([], self.planner.errors)
        yield e


class BackgroundPlanner:
    """A daemon thread calling ``primary.plan(snapshot, lock=lock)``.

    Args:
        gate: the service's :class:`~mapper.policies.gate.GatedPolicy` (its primary
            must have ``plan`` and ``plans``).
        store: the state store (its ``current()`` snapshot is planned on).
        lock: the lock the request loop holds while it touches the policy or the state.
        interval_s: longest wait between refills, s.
        registry: Prometheus registry for the plan metrics (None: none).
    """

    def __init__(self, gate: Any, store: Any, lock: threading.Lock,
                 interval_s: float = PLAN_INTERVAL_S, registry: Any = None):
        self.gate = gate
        self.primary = gate.primary
        self.plans = self.primary.plans
        self.store = store
        self.lock = lock
        self.interval_s = interval_s
        self.wake = threading.Event()
        self.stop_event = threading.Event()
        self.rounds = 0
        self.lists = 0
        self.errors = 0
        self._thread: threading.Thread | None = None
        if registry is not None:
            registry.register(_PlanMetrics(self))

    @staticmethod
    def supported(gate: Any) -> bool:
        """True when the gate's primary plans ahead."""
        return getattr(gate.primary, "plans", None) is not None and hasattr(gate.primary, "plan")

    def start(self) -> "BackgroundPlanner":
        self.primary.plan_inline = False        # this thread refills; rounds do not
        # The request loop must get the interpreter back quickly when a request arrives
        # while this thread runs Python code (default switch interval: 5 ms).
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._thread = threading.Thread(target=self._run, name="lustre-alloc-planner",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self.stop_event.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def refill_once(self) -> int:
        """One refill (lists queued); 0 while the gate keeps the primary out."""
        with self.lock:
            snap = self.store.current()
            if self.gate.fallback_reason(snap) in ("mds_cpu", "stale"):
                return 0
        made = self.primary.plan(snap, lock=self.lock)
        self.rounds += 1
        self.lists += made
        return made

    def _run(self) -> None:
        while not self.stop_event.is_set():
            self.wake.wait(self.interval_s)
            self.wake.clear()
            if self.stop_event.is_set():
                break
            try:
                self.refill_once()
            except Exception:  # noqa: BLE001 - requests then miss; the round solves them
                self.errors += 1
                log.exception("planning round failed", extra={"event": "plan_error"})
                time.sleep(min(1.0, 10 * self.interval_s))
