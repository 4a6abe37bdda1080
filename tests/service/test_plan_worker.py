"""The planner's child process (lustre_alloc.mapper.service.plan_worker): a real spawned process solves
the job as the inline planner would, and a lost child is replaced."""
from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from lustre_alloc.mapper.flow.costs import RateCost
from lustre_alloc.mapper.flow.network import RoundRequest
from lustre_alloc.mapper.flow.ost_lists import PlanJob, solve_plan
from lustre_alloc.mapper.service.plan_worker import PlanWorker, PlanWorkerError
from lustre_alloc.mapper.state.arrays import OstTable, ost_arrays
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster
from tests.support import wait_for

MIB = 1 << 20


def job() -> PlanJob:
    snap = make_uniform_cluster(8, 4, 100 << 20, {i: (i * 7 % 50) << 20 for i in range(32)})
    table = OstTable.from_snapshot(snap)
    osts = ost_arrays(table, table.usable_indices())
    return PlanJob(osts, (RoundRequest(48, 0, 0, per_ost=12), RoundRequest(2, 0, 1)), (12, 1),
                   (np.ones(32, bool),), MIB, 16.0 * MIB, RateCost(), max_ost_slots=4)


def wait_ready(worker: PlanWorker, timeout_s: float = 60.0) -> None:
    wait_for(lambda: worker.ready, timeout_s, "the planner process starting")


def test_the_child_process_solves_like_the_inline_planner():
    worker = PlanWorker().start()
    try:
        wait_ready(worker)
        assert worker.pid is not None and worker.pid != os.getpid()
        there = worker.solve(job())
        here = solve_plan(job())
        assert there.lists == here.lists and there.placement_cost == here.placement_cost
        assert worker.jobs == 1
    finally:
        worker.close()


def test_a_killed_child_fails_one_job_and_is_replaced():
    worker = PlanWorker().start()
    try:
        wait_ready(worker)
        os.kill(worker.pid, signal.SIGKILL)
        with pytest.raises(PlanWorkerError):
            for _ in range(50):                 # the pool notices the death on use
                worker.solve(job())
                time.sleep(0.05)
        assert worker.restarts == 1
        wait_ready(worker)                      # `ready` starts a new child
        assert worker.solve(job()).lists == solve_plan(job()).lists
    finally:
        worker.close()


def test_the_child_exits_when_the_mapper_is_killed(tmp_path):
    """A mapper killed with SIGKILL (no close()) must not leave its planner behind."""
    import subprocess
    import sys
    import psutil
    script = tmp_path / "service_main.py"
    script.write_text(
        "import sys, time\n"
        "from lustre_alloc.mapper.service.plan_worker import PlanWorker\n"
        "if __name__ == '__main__':\n"
        "    w = PlanWorker().start()\n"
        "    while not w.ready:\n"
        "        time.sleep(0.05)\n"
        "    print(w.pid, flush=True)\n"
        "    time.sleep(600)\n")
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        child = psutil.Process(int(proc.stdout.readline()))
        assert child.is_running()
        proc.kill()
        proc.wait(10)
        child.wait(10)                          # psutil.TimeoutExpired if it stays
    finally:
        proc.kill()
