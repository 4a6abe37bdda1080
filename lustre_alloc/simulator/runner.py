"""Run a scenario under each of its policies, from identical initial conditions.

Every policy gets the same cluster at t=0, the same records (regenerated from the same
seeds) and a policy instance seeded with the scenario seed. Runs are tasks of a sweep
(:mod:`lustre_alloc.simulator.sweep`: in this process, on a local Dask cluster of ``jobs`` workers, or
on a site's Dask scheduler); results do not depend on where they ran.
"""
from __future__ import annotations

from typing import Callable

from lustre_alloc.mapper.policies import registry
from lustre_alloc.mapper.policies.placement import LearnsSizes, PlacementPolicy
from lustre_alloc.simulator.leasing import LeasedCreates, leased
from lustre_alloc.simulator.cluster import SimCluster, build_cluster
from lustre_alloc.simulator.engine import RunResult, Simulation
from lustre_alloc.simulator.file_sizes import final_sizes
from lustre_alloc.simulator.network.model import make_network
from lustre_alloc.simulator.scenario import Scenario
from lustre_alloc.simulator.oracle import ORACLE, Oracle
from lustre_alloc.simulator.sweep import run_tasks
from lustre_alloc.simulator.workload import check_workloads, scenario_records, size_hints, unmanaged_jobs

Progress = Callable[[str, float, float], None]


def prepare(scenario: Scenario) -> SimCluster:
    """Build the cluster and validate every workload against it (before any run).

    Raises:
        ScenarioError: inconsistent scenario or malformed workload.
    """
    from lustre_alloc.simulator.scenario import ScenarioError
    from lustre_alloc.simulator.targets import TargetValueError
    try:
        cluster = build_cluster(scenario.cluster, scenario.seed)
    except TargetValueError as e:
        raise ScenarioError(f"{scenario.path}: {e}") from None
    from lustre_alloc.simulator.events import EventError, added_osts, check_events
    try:
        check_events(scenario.path, scenario.events, cluster.ost_count, len(cluster.oss_names))
    except EventError as e:
        raise ScenarioError(str(e)) from None
    check_workloads(scenario, cluster.ost_count + added_osts(scenario.events))
    return cluster


def scenario_policy(scenario: Scenario, policy: str) -> PlacementPolicy:
    """The policy instance for one run, from the mapper's own factory
    (:func:`lustre_alloc.mapper.policies.registry.build_policy`): a policy that asks for it
    (``needs_gate``, the mapper's MCMF) runs behind the MDS CPU gate (Section III-D) with
    the scenario's fallback (``lustre_qos`` unless ``[policy_params.<name>] fallback`` says
    otherwise). ``<policy>+lease`` is that policy behind the shim's leases
    (:mod:`lustre_alloc.simulator.leasing`)."""
    if policy == ORACLE:
        return Oracle(seed=scenario.seed)       # simulation only: reads the true state
    own, behind_leases = leased(policy)
    built = registry.build_policy(own, scenario.policy_params, seed=scenario.seed)
    return LeasedCreates(built) if behind_leases else built


def run_policy(scenario: Scenario, cluster: SimCluster, policy: str,
               progress: Progress | None = None) -> RunResult:
    """One policy's run (in this process)."""
    cb = (lambda done, total: progress(policy, done, total)) if progress else None
    return build_simulation(scenario, cluster, scenario_policy(scenario, policy), cb).run()


def build_simulation(scenario: Scenario, cluster: SimCluster, policy: PlacementPolicy,
                     progress: Callable[[float, float], None] | None = None,
                     held_at_start: bool = False) -> Simulation:
    """The simulation of one run of ``policy`` (an instance) over ``scenario``: its records,
    network, unmanaged jobs and size hints, as every run gets them (the CLI's and the
    benchmarks'); ``held_at_start``: the events' state at t = 0 held throughout
    (:class:`~lustre_alloc.simulator.engine.Simulation`)."""
    net = make_network(scenario.network, **scenario.network_params)
    hints = size_hints(scenario)
    # each file's final size, for the shim's close reports and the "final" hint: one more
    # pass over the records, only when something reads it
    reads = {"final"} | ({"at_close"} if isinstance(policy, LearnsSizes) else set())
    sizes = (final_sizes(scenario_records(scenario))
             if reads & set(v for v in hints.values() if isinstance(v, str)) else None)
    return Simulation(scenario, cluster, policy, scenario_records(scenario), net, progress,
                      unmanaged_jobs=unmanaged_jobs(scenario), size_hints=hints,
                      held_at_start=held_at_start, file_sizes=sizes)


def _run_one(task: tuple[Scenario, SimCluster, str], report: Callable[[float, float], None] | None
             ) -> RunResult:
    """One task of a sweep (:mod:`lustre_alloc.simulator.sweep`): ``(scenario, cluster, policy)``."""
    scenario, cluster, policy = task
    return run_policy(scenario, cluster, policy,
                      (lambda p, done, total: report(done, total)) if report else None)


LONG_RUNS = ("oracle",)
"""Policies whose runs take longest (the oracle reads every OST's true bandwidth and each
file's size at every create: 123 s of straggler-ost's 200 s on 2 cores); their tasks start
first so that they do not finish last."""


def run_scenario(scenario: Scenario, jobs: int = 1, progress: Progress | None = None,
                 scheduler: str | None = None) -> list[RunResult]:
    """Run every policy of ``scenario``; results in the scenario's policy order. With
    ``jobs`` > 1 or a ``scheduler`` the runs are Dask tasks (:mod:`lustre_alloc.simulator.sweep`)."""
    return run_seeds(scenario, 1, jobs, progress, scheduler)[0]


def run_seeds(scenario: Scenario, seeds: int, jobs: int = 1, progress: Progress | None = None,
              scheduler: str | None = None) -> list[list[RunResult]]:
    """Every policy of ``scenario`` under ``seeds`` seeds (:meth:`Scenario.with_seed_offset`
    0, 1, ...): per seed, the runs in policy order. Progress labels are the policy names
    (``policy#k`` for seed offset ``k`` > 0)."""
    tasks, labels = [], []
    for k in range(seeds):
        sc = scenario.with_seed_offset(k)
        cluster = prepare(sc)
        for p in sc.policies:
            tasks.append((sc, cluster, p))
            labels.append(p if k == 0 else f"{p}#{k}")
    results = run_tasks(_run_one, tasks, labels, jobs=jobs, scheduler=scheduler,
                        progress=progress,
                        priorities=[int(t[2] in LONG_RUNS) for t in tasks])
    n = len(scenario.policies)
    return [results[k * n:(k + 1) * n] for k in range(seeds)]
