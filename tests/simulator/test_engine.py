import numpy as np
import pytest

from lustre_alloc.simulator.runner import prepare, run_policy, run_scenario
from lustre_alloc.simulator.scenario import load_scenario

from .conftest import rec, small

MIB = 1 << 20


def run_one(make_scenario, records, **kw):
    sc = load_scenario(make_scenario(small(**kw), records))
    return run_policy(sc, prepare(sc), sc.policies[0])


def test_striped_write_lands_one_stripe_share_per_ost(make_scenario):
    # 400 MiB over 4 stripes of 1 MiB on 4 OSTs at 100 MiB/s: 100 MiB each, done in 1 s.
    r = run_one(make_scenario, [rec(0, "write", "a", "f", 400 * MIB, sc=4)])
    grown = r.ost_used_hourly[-1] - r.ost_used_hourly[0]
    assert grown.tolist() == [100 * MIB] * 4
    app = r.apps["a"]
    assert app.bytes_written == 400 * MIB
    assert app.io_time_s == pytest.approx(1.0)
    assert app.mean_bandwidth_bytes_s == pytest.approx(400 * MIB)


def test_transfers_on_one_ost_share_its_bandwidth(make_scenario):
    # Stripe count 4 for the first file puts both 1-stripe... use a 1-OST pool instead:
    # two 100 MiB writes at t=0 on a single-OST cluster each get 50 MiB/s -> 2 s each.
    body = small().replace("oss_count = 2", "oss_count = 1").replace("osts_per_oss = 2", "osts_per_oss = 1")
    body = body.replace("[0.0, 0.0, 0.0, 0.0]", "[0.0]")
    from lustre_alloc.simulator.scenario import load_scenario as ls
    sc = ls(make_scenario(body, [rec(0, "write", "a", "f1", 100 * MIB),
                                 rec(0, "write", "b", "f2", 100 * MIB)]))
    r = run_policy(sc, prepare(sc), "round_robin")
    assert r.apps["a"].io_time_s == pytest.approx(2.0)
    assert r.apps["b"].io_time_s == pytest.approx(2.0)
    assert r.ost_used_hourly[-1, 0] == 200 * MIB


def test_delete_frees_exactly_the_files_bytes(make_scenario):
    r = run_one(make_scenario, [rec(0, "write", "a", "f", 300 * MIB, sc=2),
                                rec(10, "write", "a", "g", 100 * MIB, sc=1),
                                rec(20, "delete", "a", "f")])
    assert r.ost_used_hourly[-1].sum() == 100 * MIB
    assert r.counters["files_deleted"] == 1


def test_read_loads_the_osts_holding_the_file_without_using_space(make_scenario):
    r = run_one(make_scenario, [rec(0, "write", "a", "f", 200 * MIB, sc=2),
                                rec(5, "read", "a", "f", 200 * MIB)])
    assert r.apps["a"].bytes_read == 200 * MIB
    # 2 stripes at 100 MiB/s each: 1 s for the write, 1 s for the read
    assert r.apps["a"].io_time_s == pytest.approx(2.0)
    assert r.ost_used_hourly[-1].sum() == 200 * MIB


def test_full_osts_make_creates_fail_cleanly(make_scenario):
    r = run_one(make_scenario, [rec(0, "write", "a", "f", MIB)], fill="[1.0, 1.0, 1.0, 1.0]")
    assert r.counters["create_failed_NoSpaceError"] == 1
    assert r.apps["a"].failed_creates == 1


def test_oss_cpu_ratio_rises_when_one_oss_serves_all_io(make_scenario):
    r = run_one(make_scenario, [rec(0, "write", "a", "f", 3000 * MIB, sc=1)])
    # one OSS busy, one idle: max/mean > 1 while the transfer runs (30 s at 100 MiB/s)
    assert r.oss_cpu_max_mean[:30].min() > 1.0
    assert r.oss_cpu_max_mean[40:].max() == 1.0


def test_every_policy_starts_from_identical_conditions_and_runs_are_reproducible(make_scenario):
    records = [rec(t, "write", f"j{t % 3}", f"f{t}", (t % 7 + 1) * 10 * MIB, sc=1 + t % 3)
               for t in range(0, 600, 5)]
    path = make_scenario(small(policies='["round_robin", "lustre_qos", "random"]',
                               fill="[0.5, 0.1, 0.2, 0.05]"), records)
    sc = load_scenario(path)
    first = run_scenario(sc)
    again = run_scenario(sc, jobs=2)
    for a, b in zip(first, again):
        assert np.array_equal(a.ost_used_hourly, b.ost_used_hourly)
        assert a.counters == b.counters
    starts = [r.ost_used_hourly[0] for r in first]
    assert all(np.array_equal(starts[0], s) for s in starts)
    assert [r.policy for r in first] == ["round_robin", "lustre_qos", "random"]


def test_qos_favours_the_emptier_osts_on_an_unbalanced_start(make_scenario):
    # 1000 files x 30 MiB: RR would put 7.5 GiB on each OST, within OST 0's 10 GiB free.
    records = [rec(t, "write", "a", f"f{t}", 30 * MIB) for t in range(0, 2000, 2)]
    path = make_scenario(small(policies='["round_robin", "lustre_qos"]',
                               fill="[0.9, 0.1, 0.1, 0.1]"), records)
    rr, qos = run_scenario(load_scenario(path))
    grown_rr = rr.ost_used_hourly[-1] - rr.ost_used_hourly[0]
    grown_qos = qos.ost_used_hourly[-1] - qos.ost_used_hourly[0]
    assert grown_rr[0] == pytest.approx(grown_rr[1:].mean(), rel=0.05)   # RR ignores space
    assert grown_qos[0] < 0.3 * grown_qos[1:].mean()                     # QOS avoids the full OST


def test_the_flow_balances_the_papers_unbalanced_start_faster_than_lustres_allocators():
    # End to end: the bundled paper scenario, first 2 simulated hours, the flow on every
    # round (mcmf_flow) against the baselines from identical conditions. Round-robin and
    # QOS (which falls back to RR while free space is within 17%) give every OST the same
    # share, so the initially fuller OSTs stay ahead; the flow sends new files to the
    # emptier ones. (The default mcmf answers even load with Lustre's RR and leaves space
    # to the rebalancer: docs/placement.md.)
    from lustre_alloc.simulator.metrics import max_mean_ratio
    sc = load_scenario("paper-32ost").with_overrides(
        policies=["round_robin", "lustre_qos", "mcmf_flow"], duration_s=7200)
    results = {r.policy: r for r in run_scenario(sc, jobs=1)}
    ratio = {p: max_mean_ratio(r.ost_used_hourly) for p, r in results.items()}
    assert ratio["mcmf_flow"][0] == ratio["round_robin"][0]            # same start
    assert ratio["mcmf_flow"][1] < ratio["lustre_qos"][1] < ratio["mcmf_flow"][0]
    assert ratio["mcmf_flow"][1] < ratio["round_robin"][1]
    assert results["mcmf_flow"].counters["creates"] == results["round_robin"].counters["creates"]
    assert not results["mcmf_flow"].notes.get("fallback mds_cpu")       # MDS stays below 70%


def test_mcmf_falls_back_to_the_configured_policy_above_the_mds_cpu_limit(make_scenario):
    body = small(duration=60, policies='["mcmf"]') + """
[policy_params.mcmf]
fallback = "round_robin"
mds_cpu_limit_percent = 0.0
"""
    records = [rec(t, "write", "a", f"f{t}", 1 << 20) for t in range(10)]
    result = run_scenario(load_scenario(make_scenario(body, records)))[0]
    assert result.notes["fallback mds_cpu"] == 10
    assert result.counters["creates"] == 10
