"""The migration service in the simulator (``[[event]] kind = "migrate"``): evacuation of the
OST the steering flagged, fill balance of the used space at t=0 (``files_gib``), the
budget's moves per OSS, and a writer stopping a ``--non-block`` move."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lustre_alloc.simulator.rebalance.service_event import MigrateEvent
from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario

from .conftest import rec, small

pytestmark = pytest.mark.timeout(300)
SLOW = 14


def _run(sc, policy: str):
    sim = build_simulation(sc, prepare(sc), scenario_policy(sc, policy))
    return sim, sim.run()


def test_the_steered_ost_is_evacuated_after_an_hour_of_steering():
    sc = load_scenario("readback-slow-ost-evacuate").with_overrides(duration_s=5 * 3600)
    ev = next(e for e in sc.rebalance if isinstance(e, MigrateEvent))
    assert ev.evacuate_after_s == 3600 and ev.budget.ost_share == 0.1     # the defaults
    sim, res = _run(sc, "qos_steer")
    done = res.counters["evacuation_moves_done"]
    assert done > 0 and res.counters["evacuation_bytes_moved"] > 0
    moved = [e for e in res.rebalance_log if e.get("evacuating")]
    assert moved and moved[0]["evacuating"] == [SLOW]
    # evacuation starts an hour after the steering: not before 2 h (onset) + 1 h
    assert moved[0]["time_s"] >= 3 * 3600
    pos = sim.pos_of_index[SLOW]
    on_slow = [k for k, f in sim.files.items() if pos in f.osts.tolist()]
    # what is left there is what the budget had not reached yet, never a moved file
    assert len(on_slow) < moved[0]["moves"]
    # the same world without the service moves nothing
    base = replace(sc, rebalance=())
    _, res0 = _run(base, "qos_steer")
    assert res0.counters.get("evacuation_moves_done", 0) == 0


def test_a_policy_that_steers_nothing_evacuates_nothing():
    sc = load_scenario("readback-slow-ost-evacuate").with_overrides(duration_s=4 * 3600)
    _, res = _run(sc, "lustre_qos")
    assert res.counters.get("evacuation_moves_done", 0) == 0


FILL = """
[[event]]
kind = "migrate"
every_s = 60
start_s = 0
balance_fill = true
quiet_s = 0
ost_share = 1.0
max_per_oss = {per_oss}
max_in_flight_ratio = 1.0
"""


def _fill_world(make_scenario, per_oss: int = 2, event: bool = True):
    body = small(duration=3600, policies='["round_robin"]', bw=1000,
                 fill="[0.8, 0.8, 0.0, 0.0]")
    body = body.replace('used_fraction = [0.8, 0.8, 0.0, 0.0]',
                        'used_fraction = [0.8, 0.8, 0.0, 0.0]\nfiles_gib = 10')
    if event:
        body += FILL.format(per_oss=per_oss)
    return load_scenario(make_scenario(body, [rec(10, "write", "a", "x", 1 << 20)]))


def test_fill_balance_moves_the_initial_files_and_keeps_every_byte(make_scenario):
    sc = _fill_world(make_scenario)
    sim, res = _run(sc, "round_robin")
    assert res.counters["initial_files"] == 2 * 8            # 80 GiB per OST in 10 GiB files
    used0, used1 = res.ost_used_hourly[0], res.ost_used_hourly[-1]
    assert np.isclose(used1.sum(), used0.sum() + (1 << 20))   # moved, not lost or doubled
    assert used1.max() / used1.mean() < used0.max() / used0.mean()
    assert used1[2] > 0 and used1[3] > 0
    assert res.counters["evacuation_moves_done"] >= 4
    _, none = _run(_fill_world(make_scenario, event=False), "round_robin")
    assert "evacuation_moves_done" not in none.counters
    end = none.ost_used_hourly[-1]
    assert (end[:2] >= used0[:2]).all() and end[2:].sum() <= (1 << 20)   # nothing moved


def test_moves_per_oss_cap_the_moves_running(make_scenario):
    sc = _fill_world(make_scenario, per_oss=1)
    sim = build_simulation(sc, prepare(sc), scenario_policy(sc, "round_robin"))
    seen = []
    tick = sim.rebal.tick

    def watch(now):
        tick(now)
        seen.append(max(sim.rebal.evacuations[0].budget.per_oss.values(), default=0))
    sim.rebal.tick = watch
    sim.run()
    assert max(seen) == 1


def test_a_writer_stops_a_non_block_move_and_the_file_keeps_its_layout(make_scenario):
    sc = _fill_world(make_scenario)
    sim = build_simulation(sc, prepare(sc), scenario_policy(sc, "round_robin"))
    broken = []
    tick = sim.rebal.tick

    def watch(now):
        tick(now)
        if not broken and sim.rebal.active:
            key, mig = next(iter(sim.rebal.active.items()))
            before = (mig.move.file.osts.tolist(), float(sim.used.sum()))
            sim.rebal.break_lease(key)            # what a job's write to it does
            broken.append((key, before, mig.move.file.osts.tolist(), float(sim.used.sum())))
    sim.rebal.tick = watch
    res = sim.run()
    key, (osts0, used0), osts1, used1 = broken[0]
    assert osts1 == osts0 and used1 <= used0               # old layout; new objects freed
    assert res.counters["evacuation_lease_broken"] == 1
    assert key not in sim.rebal.evacuations[0].budget.running


def test_a_bad_migrate_table_names_the_key(make_scenario):
    body = small() + FILL.format(per_oss=0)
    with pytest.raises(ScenarioError, match="max_per_oss"):
        load_scenario(make_scenario(body, [rec(1, "write", "a", "x", 1)]))
