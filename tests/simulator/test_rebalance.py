"""Rebalancing in the simulator: migrations are traffic within a budget; scenario errors."""
from __future__ import annotations

import numpy as np
import pytest

from lustre_alloc.simulator.engine import Simulation
from lustre_alloc.simulator.inflight import SimFile
from lustre_alloc.simulator.network.model import make_network
from lustre_alloc.simulator.runner import prepare, scenario_policy
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario
from lustre_alloc.simulator.workload import scenario_records
from tests.simulator.conftest import rec, small

GIB = 1 << 30
MIB = 1 << 20

EVENT = """
[[event]]
kind = "rebalance"
{trigger}
budget_fraction = {budget}
"""


def _sim(make_scenario, records, trigger="at_s = 10", budget=0.5, bw=100):
    body = small(duration=3600, bw=bw) + EVENT.format(trigger=trigger, budget=budget)
    sc = load_scenario(make_scenario(body, records))
    cl = prepare(sc)
    return Simulation(sc, cl, scenario_policy(sc, "round_robin"), scenario_records(sc),
                      make_network(sc.network))


def _inject(sim, key, ost, nbytes):
    """A file already on disk at t=0 (what an older campaign left)."""
    sim.files[key] = SimFile(job="old", osts=np.array([ost]), stripe_size=MIB, size=nbytes,
                           landed=np.array([float(nbytes)]))
    sim.used[ost] += nbytes


def test_migration_moves_bytes_within_the_budget(make_scenario):
    sim = _sim(make_scenario, [rec(3000, "write", "tiny", "t0", 1 << 20)])
    for i in range(4):                       # OST 0 holds 4 x 4 GiB, the rest nothing
        _inject(sim, f"old{i}", 0, 4 * GIB)
    total = sim.used.sum()
    res = sim.run()
    c = res.counters
    assert c["rebalance_moves_done"] == 3
    assert c["rebalance_bytes_moved"] == 12 * GIB
    # Nothing lost, nothing doubled (the tiny file adds 1 MiB at 3000 s).
    assert sim.used.sum() == pytest.approx(total + MIB)
    assert np.allclose(sim.used / GIB, [4, 4, 4, 4], atol=0.01)
    # One migration per OST at a time, each at most 50% of 100 MiB/s: the three moves
    # share the source OST 0, so they run one after the other: 3 x 4 GiB / 50 MiB/s.
    assert c["rebalance_moves_started"] == 3
    assert res.ost_used_hourly[1] / GIB == pytest.approx([4, 4, 4, 4], abs=0.01)
    t_one = 4 * GIB / (0.5 * 100 * MIB)
    assert res.rebalance_log[0]["moves"] == 3
    assert t_one * 3 < 3600


def test_budget_sets_the_duration(make_scenario):
    def done_by(budget, t):
        sim = _sim(make_scenario, [rec(3000, "write", "tiny", "t0", 1 << 20)], budget=budget)
        for i in range(2):
            _inject(sim, f"old{i}", 0, 4 * GIB)
        sim.sc = sim.sc.with_overrides(duration_s=t)
        return sim.run().counters["rebalance_moves_done"]
    t_fast = 4 * GIB / (0.5 * 100 * MIB)      # one 4 GiB move at 50 MiB/s: 82 s
    assert done_by(0.5, 10 + t_fast + 5) == 1
    assert done_by(0.1, 10 + t_fast + 5) == 0   # five times slower: not yet


def test_a_write_during_migration_waits_for_it(make_scenario):
    records = [rec(20, "write", "app", "old1", MIB), rec(3000, "write", "tiny", "t0", 1 << 20)]
    sim = _sim(make_scenario, records)
    _inject(sim, "old0", 0, 4 * GIB)         # stays (the larger file)
    _inject(sim, "old1", 0, 3 * GIB)         # moves from 10 s, 3 GiB at 50 MiB/s: ~61 s
    res = sim.run()
    assert res.counters["rebalance_writes_held"] == 1
    assert sim.files["old1"].osts[0] != 0 and sim.files["old0"].osts[0] == 0
    app = res.apps["app"]
    assert app.transfers == 1 and app.bytes_written == MIB
    assert app.io_time_s > 45                # waited for the migration's end (~71 s)
    assert sim.files["old1"].landed.sum() == 3 * GIB + MIB
    assert set(res.apps) == {"tiny", "app"}                # migrations are not an app


def test_threshold_skips_a_balanced_cluster(make_scenario):
    sim = _sim(make_scenario, [rec(3000, "write", "tiny", "t0", 1 << 20)],
               trigger="every_s = 600\nwhen_max_mean_above = 1.5")
    for i in range(4):
        _inject(sim, f"old{i}", i, 4 * GIB)
    res = sim.run()
    assert res.counters["rebalance_plans"] == 0
    assert len(res.rebalance_log) == 6


@pytest.mark.parametrize("event, message", [
    ('kind = "rebalance"\nat_s = 5\nbudget_fraction = 0', "budget_fraction: must be > 0"),
    ('kind = "rebalance"\nbudget_fraction = 0.2', "at_s|every_s: exactly one"),
    ('kind = "rebalance"\nat_s = 5\nevery_s = 60\nbudget_fraction = 0.2', "exactly one"),
    ('kind = "rebalance"\nat_s = 5\nbudget_fraction = 0.2\nplanner = "x"', "unknown planner"),
    ('kind = "rebalance"\nat_s = 5\nbudget_fraction = 0.2\nbogus = 1', "bogus: unknown key"),
    ('kind = "quake"', "unknown event kind"),
])
def test_bad_event_is_one_clear_line(make_scenario, event, message):
    body = small() + "\n[[event]]\n" + event + "\n"
    with pytest.raises(ScenarioError, match=message.replace("|", r"\|")):
        load_scenario(make_scenario(body, [rec(0, "write", "a", "f", 1)]))


def test_bundled_rebalance_scenario_loads():
    sc = load_scenario("paper-32ost-rebalance")
    base = load_scenario("paper-32ost")
    assert len(sc.rebalance) == 1 and sc.rebalance[0].every_s == 1800
    assert base.rebalance == ()
    assert sc.cluster == base.cluster and sc.workloads == base.workloads
