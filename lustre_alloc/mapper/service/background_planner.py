"""The service's background planner: keeps the primary's plan queues full.

The request loop answers from lists planned ahead
(:mod:`lustre_alloc.mapper.policies.mcmf.plan_queues`); this thread refills them. Every ``interval_s`` (or
at once when the loop signals a miss) it

1. teaches the primary's Markov chains the requests answered since its last turn
   (:meth:`~lustre_alloc.mapper.policies.mcmf.planner.McmfPlanner.learn`: the chain's update is 10-20 us of
   Python per request, kept off the request path);
2. calls the primary's :meth:`~lustre_alloc.mapper.policies.mcmf.planner.McmfPlanner.plan` on the state
   store's snapshot. ``plan`` reads the state and queues its lists under the service's
   lock, but the flow is built and solved outside it, by default in a child process
   (:mod:`lustre_alloc.mapper.service.plan_worker`) so that it does not hold the interpreter lock
   either: the loop keeps answering (from older lists, checked in O(stripe count))
   while a plan is computed.

The planner rests while the gate would not let the primary decide because of the MDS CPU
(Section III-D) or stale statistics: planning then would only spend MDS CPU on lists
nobody takes. It keeps planning while the primary rests over its round budget: the
budget protects the request path, which planned lists are what bring back under it. A failing plan is logged and counted,
never fatal: requests then miss and the primary solves them in its round.

Metrics (Prometheus, on the service's registry, prefix ``lustre_alloc_mapper_``):
``plan_lists_total`` by outcome (planned, hits, compatible, misses, expired, invalid),
``plan_ready`` (lists queued now), ``plan_errors_total``, ``plan_rounds_total``,
``plan_seconds_total`` (wall time of the rounds) and ``plan_learned_total`` (requests
the chains learned from).
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from lustre_alloc.common.metrics import MAPPER_PREFIX
from lustre_alloc.mapper.flow.ost_lists import solve_plan
from lustre_alloc.mapper.policies.placement import PlansAhead
from lustre_alloc.mapper.service.plan_worker import PlanWorker

log = logging.getLogger("lustre_alloc.mapper.service.background_planner")

PLAN_INTERVAL_S = 0.02
"""Longest wait between two refills, s: a class drained by a burst is refilled within
this (plus one planning round)."""


LEARN_SLICE = 16
"""Requests the chains learn per hold of the service lock (about 0.2 ms of Python)."""

SWITCH_INTERVAL_S = 0.0005
"""Python's thread switch interval while the planner runs, s (a request waits at most
about this long for the interpreter; the default 5 ms would be most of a create)."""


class _PlanMetrics:
    """Prometheus view of the plan queues' counters (read at scrape time)."""

    def __init__(self, planner: "BackgroundPlanner"):
        self.background = planner

    def collect(self) -> Iterable:
        plans = self.background.plans
        c = CounterMetricFamily(MAPPER_PREFIX + "plan_lists", "Planned OST lists by outcome",
                                labels=["outcome"])
        for k, v in sorted(plans.stats.items()):
            c.add_metric([k], v)
        yield c
        yield GaugeMetricFamily(MAPPER_PREFIX + "plan_ready", "Planned lists queued now",
                                value=plans.ready())
        e = CounterMetricFamily(MAPPER_PREFIX + "plan_errors", "Planning rounds that failed")
        e.add_metric([], self.background.errors)
        yield e
        r = CounterMetricFamily(MAPPER_PREFIX + "plan_rounds", "Planning rounds run")
        r.add_metric([], self.background.rounds)
        yield r
        t = CounterMetricFamily(MAPPER_PREFIX + "plan_seconds",
                                "Wall time of planning rounds (learning, state, solve), seconds")
        t.add_metric([], self.background.seconds)
        yield t
        lr = CounterMetricFamily(MAPPER_PREFIX + "plan_learned", "Requests the planner taught the "
                                 "Markov chains")
        lr.add_metric([], self.background.learned)
        yield lr


class BackgroundPlanner:
    """A daemon thread calling ``primary.plan(snapshot, lock=lock)``.

    Args:
        gate: the service's :class:`~lustre_alloc.mapper.policies.gate.GatedPolicy` (its primary
            must have ``plan`` and ``plans``).
        store: the state store (its ``current()`` snapshot is planned on).
        lock: the lock the request loop holds while it touches the policy or the state.
        interval_s: longest wait between refills, s.
        registry: Prometheus registry for the plan metrics (None: none).
        process: solve the flows in a child process (:class:`PlanWorker`, started by
            the planner thread) rather than in the thread itself.
    """

    def __init__(self, gate: Any, store: Any, lock: threading.Lock,
                 interval_s: float = PLAN_INTERVAL_S, registry: Any = None,
                 process: bool = False):
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
        self.seconds = 0.0
        self.learned = 0
        self.worker: PlanWorker | None = PlanWorker() if process else None
        self._thread: threading.Thread | None = None
        if registry is not None:
            registry.register(_PlanMetrics(self))

    @staticmethod
    def supported(gate: Any) -> bool:
        """True when the gate's primary plans ahead (and learns off the request path)."""
        primary = gate.primary
        return (isinstance(primary, PlansAhead)
                and primary.plans is not None)

    def start(self) -> "BackgroundPlanner":
        self.primary.plan_in_background()       # this thread refills; rounds do not
        # The request loop must get the interpreter back quickly when a request arrives
        # while this thread runs Python code (default switch interval: 5 ms).
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        if self.worker is not None:
            self.worker.start()
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
        if self.worker is not None:
            self.worker.close()

    def refill_once(self) -> int:
        """One refill (lists queued); 0 while the gate keeps the primary out (the
        chains still learn)."""
        t0 = time.perf_counter()
        while True:         # in slices: the request loop waits for one at most
            with self.lock:
                n = self.primary.learn(LEARN_SLICE)
            self.learned += n
            if n < LEARN_SLICE:
                break
        with self.lock:
            snap = self.store.current()
            if self.gate.fallback_reason(snap) in ("mds_cpu", "stale"):
                return 0
        solve = solve_plan          # in this thread until the child has started
        if self.worker is not None:
            try:
                if self.worker.ready:
                    solve = self.worker.solve
            except Exception:  # noqa: BLE001 - keep planning, in this thread
                log.exception("planner process did not start; planning in the thread",
                              extra={"event": "plan_worker_failed"})
                self.worker = None
        # (a prediction round's time spaces the next ones: lustre_alloc.mapper.policies.mcmf.planner)
        made = self.primary.plan(snap, lock=self.lock, solve=solve)
        self.seconds += time.perf_counter() - t0
        self.rounds += 1
        self.lists += made
        return made

    def wait_started(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the planner's process to be ready to solve; True
        when it is, or when this planner solves in its own thread (no process)."""
        return self.worker is None or self.worker.wait_started(timeout_s)

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
