"""``qos_steer`` in the simulator: Lustre's QOS under the steering controller, fed
every sample through the honest statistics path. On a uniform world it takes no action and
is QOS exactly; with a straggler it flags it and the straggler's jobs finish."""
from __future__ import annotations

import pytest

from lustre_alloc.simulator.report import summarise
from lustre_alloc.simulator.runner import prepare, run_policy
from lustre_alloc.simulator.scenario import load_scenario

pytestmark = pytest.mark.timeout(300)
SAME = ("ost_max_mean_end", "mean_io_bandwidth_mib_s", "creates", "failed_creates",
        "phase_io_time_s_mean", "phase_io_time_s_p99", "jobs_unfinished")


def _runs(name: str, duration_s: float):
    sc = load_scenario(name).with_overrides(policies=("lustre_qos", "qos_steer"),
                                            duration_s=duration_s)
    cluster = prepare(sc)
    return {p: run_policy(sc, cluster, p) for p in sc.policies}


def test_on_a_uniform_world_no_action_and_exactly_qos():
    runs = _runs("nersc-edison-real", 4 * 3600)
    qos, steer = summarise(runs["lustre_qos"]), summarise(runs["qos_steer"])
    assert steer["steer_actions"] == 0 and runs["qos_steer"].counters["steer_refused"] == 0
    assert qos["creates"] > 100
    assert {k: steer[k] for k in SAME} == {k: qos[k] for k in SAME}


def test_with_a_straggler_it_is_flagged_and_the_jobs_finish():
    runs = _runs("straggler-ost", 2 * 3600 + 1800)
    qos, steer = summarise(runs["lustre_qos"]), summarise(runs["qos_steer"])
    assert steer["steer_actions"] >= 1
    assert sum(v for k, v in steer["creates_by_note"].items() if k.startswith("steered")) > 0
    assert steer["jobs_unfinished"] < qos["jobs_unfinished"] or \
        steer["phase_io_time_s_mean"] < 0.5 * qos["phase_io_time_s_mean"]


def test_the_controller_sees_one_sample_per_stats_interval():
    """As the collectors publish live: one sample per ``stats_interval_s``, never more."""
    from lustre_alloc.simulator.runner import scenario_policy
    from lustre_alloc.simulator.engine import Simulation
    from lustre_alloc.simulator.network.model import make_network
    from lustre_alloc.simulator.workload import scenario_records
    sc = load_scenario("straggler-ost").with_overrides(policies=("qos_steer",), duration_s=1800)
    pol = scenario_policy(sc, "qos_steer")
    seen: list[float] = []
    observe = pol.observe
    pol.observe = lambda snap: (seen.append(snap.time_s), observe(snap))
    Simulation(sc, prepare(sc), pol, scenario_records(sc),
               make_network(sc.network, **sc.network_params)).run()
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    assert len(seen) > 100 and min(gaps) >= sc.cluster.stats_interval_s
