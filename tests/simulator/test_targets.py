"""Per-target performance: the four ways to give a value, their errors, and the engine using them."""
import numpy as np
import pytest

from lustre_alloc.simulator.runner import prepare, run_policy
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario
from lustre_alloc.simulator.targets import TargetValueError, parse_target_values

from .conftest import rec, small

MIB = 1 << 20
LMT = "pkg:lustre_alloc_data/nersc-pytokio/snx11025_2018-01-28.sqlite3"


def _parse(raw, allow_zero=False):
    from pathlib import Path
    from lustre_alloc.simulator.scenario import _expand
    return parse_target_values("cluster.k", raw, lambda r: _expand(Path("/nonexistent/s.toml"), r),
                               allow_zero=allow_zero)


def test_constant_list_and_distribution_resolve():
    assert _parse(600).resolve(3).tolist() == [600.0] * 3
    assert _parse([1, 2, 3]).resolve(3).tolist() == [1.0, 2.0, 3.0]
    a = _parse({"distribution": "lognormal", "median": 100, "sigma": 0.2, "seed": 4}).resolve(50)
    b = _parse({"distribution": "lognormal", "median": 100, "sigma": 0.2, "seed": 4}).resolve(50)
    assert np.array_equal(a, b) and 60 < np.median(a) < 160 and a.std() > 0
    u = _parse({"distribution": "uniform", "low": 5, "high": 6, "seed": 1}).resolve(100)
    assert u.min() >= 5 and u.max() <= 6


def test_derived_from_lmt_is_the_measured_spread_times_the_median():
    from lustre_alloc_data import resource_path
    from lustre_alloc.traces.lmt import ost_spread, read_lmt
    spread = ost_spread(read_lmt(resource_path(LMT)), "lifetime_bytes")
    v = _parse({"derived": f"lmt:{LMT}", "statistic": "lifetime_bytes", "median": 700}).resolve(24)
    assert np.allclose(v, 700 * spread)
    assert np.median(v) == pytest.approx(700)
    # another size: a seeded resample of the 24 measured values
    w = _parse({"derived": f"lmt:{LMT}", "median": 700, "seed": 2}).resolve(100)
    assert set(np.round(w, 6)) <= set(np.round(700 * spread, 6))


@pytest.mark.parametrize("raw, msg", [
    (-3, "cluster.k: must be > 0"),
    ([1, -1], "cluster.k[1]: must be > 0"),
    ({"distribution": "zipf", "median": 1}, "cluster.k.distribution: unknown"),
    ({"derived": "lmt:nope.sqlite3", "median": 1}, "cluster.k.derived: LMT database not found"),
    ({"derived": f"lmt:{LMT}", "median": 1, "statistic": "x"}, "cluster.k.statistic: unknown"),
    ({"median": 1}, "exactly one of"),
    ({"distribution": "uniform", "low": 3}, "cluster.k.high: missing"),
    ("fast", "cluster.k: expected a number"),
])
def test_bad_values_are_one_line_naming_the_key(raw, msg):
    with pytest.raises(TargetValueError) as e:
        _parse(raw)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_list_of_the_wrong_length_is_rejected_before_any_run(make_scenario):
    body = small().replace("ost_bandwidth_mib_s = 100", "ost_bandwidth_mib_s = [100, 100, 100]")
    sc = load_scenario(make_scenario(body, [rec(0, "write", "a", "f", MIB)]))
    with pytest.raises(ScenarioError, match=r"t\.toml: cluster\.ost_bandwidth_mib_s: has 3 values for 4"):
        prepare(sc)


def test_each_ost_serves_at_its_own_bandwidth(make_scenario):
    # OST 3 at 25 MiB/s, the others at 100: the same 100 MiB write takes 4x longer there.
    body = small().replace("ost_bandwidth_mib_s = 100", "ost_bandwidth_mib_s = [100, 100, 100, 25]")
    recs = [rec(0, "write", f"j{i}", f"f{i}", 100 * MIB) for i in range(4)]
    sc = load_scenario(make_scenario(body, recs))
    r = run_policy(sc, prepare(sc), "round_robin")
    times = sorted(r.apps[f"j{i}"].io_time_s for i in range(4))
    assert times == pytest.approx([1.0, 1.0, 1.0, 4.0])


def test_read_bandwidth_latency_and_oss_cap(make_scenario):
    body = small().replace("ost_bandwidth_mib_s = 100", "ost_bandwidth_mib_s = 100\n"
                           "ost_read_bandwidth_mib_s = 200\noss_nic_mib_s = 150")
    # 300 MiB striped over the 4 OSTs: 150 MiB through each OSS's 150 MiB/s NIC -> 1 s
    # (the OSTs alone would allow 4 x 100 MiB/s -> 0.75 s); reading it back, the OSTs
    # would allow 4 x 200 MiB/s, the NICs still 2 x 150 MiB/s -> 1 s; without the NIC
    # limit the read takes 300/800 s.
    recs = [rec(0, "write", "a", "f0", 300 * MIB, sc=4), rec(10, "read", "c", "f0", 300 * MIB)]
    sc = load_scenario(make_scenario(body, recs))
    r = run_policy(sc, prepare(sc), "round_robin")
    assert r.apps["a"].io_time_s == pytest.approx(1.0)
    assert r.apps["c"].io_time_s == pytest.approx(1.0)
    sc = load_scenario(make_scenario(body.replace("oss_nic_mib_s = 150\n", ""), recs, name="nonic"))
    r = run_policy(sc, prepare(sc), "round_robin")
    assert r.apps["a"].io_time_s == pytest.approx(0.75)
    assert r.apps["c"].io_time_s == pytest.approx(300 / 800)
    # 100 ms per request, 80 requests of 1 MiB, 8 in flight: +1 s on an 80 MiB write
    body = small().replace("ost_bandwidth_mib_s = 100", "ost_bandwidth_mib_s = 100\nost_latency_ms = 100").replace("t.csv", "lat.csv")
    sc = load_scenario(make_scenario(body, [rec(0, "write", "a", "f", 80 * MIB, ops=80)], name="lat"))
    r = run_policy(sc, prepare(sc), "round_robin")
    assert r.apps["a"].io_time_s == pytest.approx(1.8)


def test_scalability_hetero_study_takes_the_measured_spread(tmp_path):
    from lustre_alloc.simulator.scalability import scale_scenario_toml
    p = tmp_path / "s.toml"
    p.write_text(scale_scenario_toml(160, 20, duration_s=60, hetero=True))
    cl = prepare(load_scenario(p))
    ratio = cl.bandwidth_bytes_s / np.median(cl.bandwidth_bytes_s)
    assert 0.96 < ratio.min() < 1.0 < ratio.max() < 1.17          # snx11025: 0.97..1.16
    p.write_text(scale_scenario_toml(160, 20, duration_s=60))
    assert np.all(prepare(load_scenario(p)).bandwidth_bytes_s == 300 * MIB)
