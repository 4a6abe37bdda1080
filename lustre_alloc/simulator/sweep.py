"""Sweeps of independent simulation runs on Dask distributed.

A sweep is a list of tasks (one policy's run of one scenario under one seed, or one size
of the scalability study) and one top-level function that runs a task. Tasks run in this
process when there is one worker and no scheduler (nothing to start), else on Dask
distributed: a :class:`distributed.LocalCluster` of ``jobs`` single-threaded worker
processes on this machine by default, or the scheduler a site already runs
(``--scheduler tcp://host:8786``; dask-jobqueue starts one on SLURM or PBS). Progress comes
back through a :class:`distributed.Queue`. A run depends only on its task, so serial,
local and remote sweeps give identical results (``tests/simulator/test_sweep.py``).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

Progress = Callable[[str, float, float], None]
"""``(task label, done, total)``: simulated seconds, or any unit the task reports in."""
Report = Callable[[float, float], None]
"""What a task calls as it advances: ``(done, total)``."""
PROGRESS_QUEUE = "lustre-alloc-progress"
REPORT_EVERY_S = 0.5
"""A worker reports a task's progress at most this often (and at its end)."""


def _on_worker(fn: Callable[[Any, Report | None], Any], task: Any, label: str,
               queue_name: str) -> Any:
    """Run ``fn(task, report)`` on a Dask worker, reporting into the progress queue."""
    from distributed import Queue
    queue = Queue(queue_name)
    last = [0.0]

    def report(done: float, total: float) -> None:
        now = time.monotonic()
        if now - last[0] >= REPORT_EVERY_S or done >= total:
            last[0] = now
            queue.put((label, done, total))
    return fn(task, report)


def run_tasks(fn: Callable[[Any, Report | None], Any], tasks: Sequence[Any],
              labels: Sequence[str], jobs: int = 1, scheduler: str | None = None,
              progress: Progress | None = None,
              priorities: Sequence[int] | None = None) -> list[Any]:
    """``fn(task, report)`` for every task; results in task order.

    Args:
        fn: a module-level function (it is sent to the workers by reference).
        tasks: picklable task descriptions.
        labels: one per task, for progress reports.
        jobs: local worker processes (1 and no ``scheduler``: run here, in order).
        scheduler: address of a running Dask scheduler (overrides ``jobs``).
        progress: called with ``(label, done, total)`` as tasks advance.
        priorities: one per task, higher first (Dask's ``priority``; None: all 0): a
            task known to be long started first is not the tail of the run.

    Raises:
        whatever a task raised (the first failing task's exception).
    """
    if scheduler is None and jobs <= 1:
        return [fn(t, (lambda d, tot, lab=lab: progress(lab, d, tot)) if progress else None)
                for t, lab in zip(tasks, labels)]
    from distributed import Client, LocalCluster, Queue
    local = None
    if scheduler is None:
        local = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                             dashboard_address=None, silence_logs=40)
    client = Client(scheduler if scheduler is not None else local)
    try:
        queue = Queue(PROGRESS_QUEUE, client=client)
        prio = list(priorities) if priorities is not None else [0] * len(tasks)
        futures = [client.submit(_on_worker, fn, t, lab, PROGRESS_QUEUE, pure=False,
                                 priority=pr)
                   for t, lab, pr in zip(tasks, labels, prio)]
        while not all(f.done() for f in futures):
            time.sleep(0.2)
            _relay(queue, progress)
        _relay(queue, progress)
        return client.gather(futures)
    finally:
        client.close()
        if local is not None:
            local.close()


def _relay(queue: Any, progress: Progress | None) -> None:
    """Hand the progress reports queued so far to ``progress`` (best effort)."""
    try:
        size = queue.qsize()
        items = queue.get(batch=size) if size else []
    except Exception:  # noqa: BLE001 - progress is best effort; the results are not
        return
    if progress:
        for label, done, total in items:
            progress(label, done, total)
