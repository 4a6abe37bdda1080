"""The planner's solver process: flow rounds solved beside the request loop, not under its GIL.

A planning round at thousands of OSTs is tens of milliseconds of numpy and OR-Tools work
(``bench/flow_round.py``). In the service's own process that work holds the interpreter
lock: every request that arrives meanwhile waits for it, the primary's rounds look slow,
and the gate's round budget sends requests to the fallback (79 % of requests on
``lustre_qos/budget`` at 3600 OSTs with one client, measured in the thread). So the service's
planner thread (:mod:`lustre_alloc.mapper.service.background_planner`) hands each
:class:`~lustre_alloc.mapper.flow.ost_lists.PlanJob` to one child process, which runs
:func:`~lustre_alloc.mapper.flow.ost_lists.solve_plan` (the same function the simulator calls
inline) and returns the :class:`~lustre_alloc.mapper.flow.ost_lists.PlanSolution`. The thread waits
with the lock released; the request loop keeps the interpreter.

The child is started with ``spawn`` (the service has ZeroMQ and metrics threads; a
``fork`` would copy their locks mid-use) and runs at a lower priority
(:data:`PLAN_WORKER_NICE`); it exits by itself within :data:`ORPHAN_CHECK_S` when the
mapper dies, even of SIGKILL. A job is a few hundred KiB of arrays
(pickled, 3600 OSTs). A child that dies is replaced on the next job; the job that
was lost raises :class:`PlanWorkerError` and its round is simply not planned.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from lustre_alloc.mapper.flow.ost_lists import PlanJob, PlanSolution, solve_plan

log = logging.getLogger("lustre_alloc.mapper.service.plan_worker")

JOB_TIMEOUT_S = 30.0
"""Longest a planning round may take in the child before it is given up, s."""


class PlanWorkerError(RuntimeError):
    """The planner process failed or timed out; the round was not planned."""


PLAN_WORKER_NICE = 10
"""Niceness added to the child, so that on a busy MDS the request loop (and the MDS's own
threads) win the CPU over planning ahead; planning then runs in the CPU left over, and
requests that find no list take the small flow instead (ours)."""


ORPHAN_CHECK_S = 1.0
"""How often the child checks that the mapper that started it is still alive, s."""


def _exit_when_orphaned(parent: int) -> None:
    while True:
        time.sleep(ORPHAN_CHECK_S)
        if os.getppid() != parent:
            os._exit(0)         # the mapper died (even SIGKILL): never outlive it


def _init_child(parent: int) -> None:
    """The child's initializer: lower its scheduling priority; exit with the mapper."""
    try:
        os.nice(PLAN_WORKER_NICE)
    except OSError:             # not permitted: plan at normal priority
        pass
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True,
                     name="lustre-alloc-plan-orphan-check").start()


def _warm() -> int:
    """Run in the child at start: imports done, so the first real job is not slow."""
    return os.getpriority(os.PRIO_PROCESS, 0)


class PlanWorker:
    """One child process solving planning rounds.

    Args:
        timeout_s: longest wait for one job, s.
    """

    def __init__(self, timeout_s: float = JOB_TIMEOUT_S):
        self.timeout_s = timeout_s
        self.jobs = 0
        self.restarts = 0
        self._pool: ProcessPoolExecutor | None = None
        self._warming: Future | None = None

    def start(self) -> "PlanWorker":
        """Start the child; it imports the solver in the background (:attr:`ready`)."""
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"),
                                         initializer=_init_child, initargs=(os.getpid(),))
        self._warming = self._pool.submit(_warm)
        return self

    def wait_started(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the child started by :meth:`start` to have imported
        the solver; True when it has (a failure is raised later by :attr:`ready`)."""
        warming = self._warming
        if warming is None:
            return False
        try:
            warming.result(timeout=timeout_s)
        except Exception:  # noqa: BLE001 - TimeoutError, or a start failure :attr:`ready` reports
            return False
        return True

    @property
    def ready(self) -> bool:
        """True once the child has started and imported the solver (a second or two
        after :meth:`start`: until then the caller solves in its own thread). Starts a
        new child when the last one was lost.

        Raises:
            PlanWorkerError: the child failed to start.
        """
        if self._pool is None:          # lost: a new child for the next rounds
            self.start()
        warming = self._warming
        if warming is None or not warming.done():
            return False
        try:
            warming.result()
        except Exception as exc:  # noqa: BLE001 - reported as a worker failure
            self.close()
            raise PlanWorkerError(f"planner process did not start: {exc!r}") from exc
        return True

    def solve(self, job: PlanJob) -> PlanSolution:
        """Solve ``job`` in the child.

        Raises:
            PlanWorkerError: the child died or took longer than ``timeout_s`` (it is
                replaced for the next job).
            ValueError, SolverError: raised by the solve itself.
        """
        if self._pool is None:
            self.start()
        pool = self._pool
        if pool is None:
            raise PlanWorkerError("planner process is not running")
        try:
            solution = pool.submit(solve_plan, job).result(timeout=self.timeout_s)
        except (BrokenProcessPool, TimeoutError) as exc:
            self.restarts += 1
            log.error("planner process lost; restarting it", extra={
                "event": "plan_worker_lost", "error": repr(exc)})
            self.close()
            raise PlanWorkerError(f"planner process lost: {exc!r}") from exc
        self.jobs += 1
        return solution

    def close(self) -> None:
        """Stop the child (no wait for a running job)."""
        pool, self._pool, self._warming = self._pool, None, None
        if pool is not None:
            # ProcessPoolExecutor keeps its children in a private dict it drops on
            # shutdown; read it first, so a child stuck in a long solve is ended too.
            procs = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()

    @property
    def pid(self) -> int | None:
        """The child's process id (None when not running)."""
        procs = getattr(self._pool, "_processes", None) or {}
        return next(iter(procs), None)


__all__ = ["JOB_TIMEOUT_S", "PlanWorker", "PlanWorkerError"]
