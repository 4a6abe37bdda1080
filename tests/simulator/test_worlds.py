"""The worlds where placement matters hold their headline condition, from their
named evidence, never tuned to a policy."""
from __future__ import annotations

import re

import numpy as np
import pytest

from lustre_alloc.simulator.events import effective_state
from lustre_alloc.simulator.runner import prepare, run_policy, run_scenario
from lustre_alloc.simulator.scenario import SCENARIO_DIR, load_scenario
from lustre_alloc.traces.darshan_import import ost_write_time_ratios, resolve_log

pytestmark = pytest.mark.timeout(300)


def test_the_straggler_is_as_slow_as_the_darshan_log_measures():
    ratio = ost_write_time_ratios(resolve_log("sample-badost.darshan"))
    worst = max(ratio, key=ratio.get)
    sc = load_scenario("straggler-ost")
    (event,) = sc.events
    assert event.osts == (worst,) and not event.flagged
    assert event.fraction == pytest.approx(1.0 / ratio[worst], abs=1e-6)
    text = (SCENARIO_DIR / "straggler-ost.toml").read_text()
    assert re.search(rf"\[{worst}\]\)", text)                # the header names the source


def test_under_round_robin_the_straggler_job_takes_the_logs_ratio():
    """The first replay of the job (before the second, at 1 h) under RR: its files on the
    slow OST take the log's ratio of the others' write time."""
    from dataclasses import replace
    sc = load_scenario("straggler-ost").with_overrides(policies=("round_robin",),
                                                       duration_s=3500)
    sc = replace(sc, workloads=sc.workloads[:1])          # the job alone, as in the log
    from lustre_alloc.simulator.engine import Simulation
    from lustre_alloc.simulator.network.model import make_network
    from lustre_alloc.simulator.runner import scenario_policy
    from lustre_alloc.simulator.workload import scenario_records
    cluster = prepare(sc)
    sim = Simulation(sc, cluster, scenario_policy(sc, "round_robin"), scenario_records(sc),
                     make_network(sc.network, **sc.network_params))
    sim.run()
    job = [f for f in sim.files.values() if f.job.endswith("#0")]     # the first replay
    slow_pos = sim.pos_of_index[sc.events[0].osts[0]]
    t = {}
    for f in job:
        if len(f.osts) == 1 and np.isfinite(f.times[1]):
            t.setdefault(int(f.osts[0]), []).append(f.times[1] - f.times[0])
    means = {p: float(np.mean(v)) for p, v in t.items()}
    others = np.median([m for p, m in means.items() if p != slow_pos])
    expected = 1.0 / sc.events[0].fraction
    assert means[slow_pos] / others == pytest.approx(expected, rel=0.15)


def test_qos_at_high_fill_concentrates_writes_and_round_robin_restores_them():
    sc = load_scenario("qos-high-fill").with_overrides(policies=("round_robin", "lustre_qos"),
                                                       duration_s=7200)
    runs = {r.policy: r for r in run_scenario(sc, jobs=1)}
    written = {p: r.ost_used_hourly[-1] - r.ost_used_hourly[0] for p, r in runs.items()}
    spread = {p: float(w.std() / w.mean()) for p, w in written.items()}
    # QOS's weighted mode concentrates the writes on the emptier OSTs (the 2011 report saw
    # OSTs left idle; our restated QOS on this real fill spread concentrates, but idles
    # none: docs/simulator.md); round-robin spreads them evenly
    assert spread["round_robin"] < 0.01 and spread["lustre_qos"] > 0.1
    bw = {p: sum(a.bytes_written for a in r.apps.values()) / sum(a.io_time_s for a in r.apps.values())
          for p, r in runs.items()}
    assert bw["lustre_qos"] < 0.8 * bw["round_robin"]


def test_failover_serves_the_moved_osts_at_half_speed_unflagged():
    sc = load_scenario("failover-half")
    cl = prepare(sc)
    st = effective_state(sc.events, 3 * 3600.0, cl.ost_oss, len(cl.oss_names), cl.ost_count)
    moved = np.flatnonzero(cl.ost_oss == 3)
    assert (st.ost_oss[moved] == 2).all()
    assert np.allclose(st.bw_factor[moved], 0.5) and not st.degraded[moved].any()
    during_recovery = effective_state(sc.events, 7200.0 + 100, cl.ost_oss, len(cl.oss_names),
                                      cl.ost_count)
    assert not during_recovery.available[moved].any()
    after = effective_state(sc.events, 11 * 3600.0, cl.ost_oss, len(cl.oss_names), cl.ost_count)
    assert (after.ost_oss[moved] == 3).all() and np.allclose(after.bw_factor, 1.0)
