"""Run a scenario under each of its policies, from identical initial conditions.

Every policy gets the same cluster at t=0, the same records (regenerated from the same
seeds) and a policy instance seeded with the scenario seed. Policies can run in
parallel worker processes (``jobs``); results do not depend on ``jobs``.
"""
from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

from mapper.policies import registry
from mapper.policies.placement import PlacementPolicy
from simulator.cluster import SimCluster, build_cluster
from simulator.engine import RunResult, Simulation
from simulator.network.model import make_network
from simulator.scenario import Scenario
from simulator.oracle import ORACLE, Oracle
from simulator.workload import check_workloads, scenario_records, size_hints, unmanaged_jobs

Progress = Callable[[str, float, float], None]


def prepare(scenario: Scenario) -> SimCluster:
    """Build the cluster and validate every workload against it (before any run).

    Raises:
        ScenarioError: inconsistent scenario or malformed workload.
    """
    from simulator.scenario import ScenarioError
    from simulator.targets import TargetValueError
    try:
        cluster = build_cluster(scenario.cluster, scenario.seed)
    except TargetValueError as e:
        raise ScenarioError(f"{scenario.path}: {e}") from None
    from simulator.events import EventError, added_osts, check_events
    try:
        check_events(scenario.path, scenario.events, cluster.ost_count, len(cluster.oss_names))
    except EventError as e:
        raise ScenarioError(str(e)) from None
    check_workloads(scenario, cluster.ost_count + added_osts(scenario.events))
    return cluster


def scenario_policy(scenario: Scenario, policy: str) -> PlacementPolicy:
    """The policy instance for one run, from the mapper's own factory
    (:func:`mapper.policies.registry.build_policy`): a policy that asks for it
    (``needs_gate``, the mapper's MCMF) runs behind the MDS CPU gate (Section III-D) with
    the scenario's fallback (``lustre_qos`` unless ``[policy_params.<name>] fallback`` says
    otherwise)."""
    if policy == ORACLE:
        return Oracle(seed=scenario.seed)       # simulation only: reads the true state
    return registry.build_policy(policy, scenario.policy_params, seed=scenario.seed)


def run_policy(scenario: Scenario, cluster: SimCluster, policy: str,
               progress: Progress | None = None) -> RunResult:
    """One policy's run (in this process)."""
    pol = scenario_policy(scenario, policy)
    net = make_network(scenario.network, **scenario.network_params)
    cb = (lambda done, total: progress(policy, done, total)) if progress else None
    return Simulation(scenario, cluster, pol, scenario_records(scenario), net, cb,
                      unmanaged_jobs=unmanaged_jobs(scenario),
                      size_hints=size_hints(scenario)).run()


def _worker(scenario: Scenario, cluster: SimCluster, policy: str, q) -> RunResult:
    return run_policy(scenario, cluster, policy, lambda p, d, t: q.put((p, d, t)))


def run_scenario(scenario: Scenario, jobs: int = 1, progress: Progress | None = None) -> list[RunResult]:
    """Run every policy of ``scenario``; results in the scenario's policy order."""
    cluster = prepare(scenario)
    if jobs <= 1 or len(scenario.policies) == 1:
        return [run_policy(scenario, cluster, p, progress) for p in scenario.policies]
    ctx = mp.get_context("fork")
    with ctx.Manager() as manager:
        q = manager.Queue()
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = [pool.submit(_worker, scenario, cluster, p, q) for p in scenario.policies]
            while not all(f.done() for f in futures):
                try:
                    msg = q.get(timeout=0.2)
                except queue_mod.Empty:
                    continue
                if progress:
                    progress(*msg)
            while progress and not q.empty():
                progress(*q.get())
            return [f.result() for f in futures]
