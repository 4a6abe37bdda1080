"""The scalability study (Fig. 16/17) end to end on a reduced sweep (correctness only)."""
import json

import pytest

from lustre_alloc.simulator.cli import main as sim_main
from lustre_alloc.simulator.scalability import (SIZES, gains, parse_sizes, run_study, scale_scenario_toml,
                                   table_lines)
from lustre_alloc.simulator.scenario import load_scenario


def test_scenarios_scale_the_workload_with_the_cluster(tmp_path):
    counts = {}
    for osts, osses in SIZES:
        p = tmp_path / f"scale-{osts}.toml"
        p.write_text(scale_scenario_toml(osts, osses, duration_s=60))
        sc = load_scenario(p)
        assert sc.cluster.oss_count == osses and sc.cluster.osts_per_oss * osses == osts
        assert sc.network == "flow" and sc.network_params["client_nodes"] == 4 * osses
        counts[osts] = len(sc.workloads)
    # One IOR + HACC-IO + TPA group per 32 OSTs.
    assert counts == {160: 15, 480: 45, 800: 75, 1024: 96, 3600: 339}


def test_parse_sizes_knows_the_papers_sizes_and_takes_pairs():
    assert parse_sizes("160,3600") == [(160, 20), (3600, 450)]
    assert parse_sizes("64:8") == [(64, 8)]
    with pytest.raises(ValueError, match="OSTS:OSSES"):
        parse_sizes("100")


@pytest.fixture(scope="module")
def small_study():
    return run_study([(64, 8), (128, 16)], ["round_robin", "random"], duration_s=240, jobs=2)


def test_short_study_runs_every_size_and_policy(small_study):
    rows = small_study
    assert [(r.osts, r.policy) for r in rows] == [(64, "round_robin"), (64, "random"),
                                                  (128, "round_robin"), (128, "random")]
    for r in rows:
        assert r.mean_io_bandwidth_mib_s > 0 and r.creates > 0 and r.failed_creates == 0
        assert r.alloc_us_mean > 0 and r.alloc_us_p99 > 0   # timed: measured, not compared
        assert r.ost_served_max_mean >= 1.0 and r.oss_served_max_mean >= 1.0
    # Twice the OSTs, twice the workload groups: about twice the creates.
    assert rows[2].creates == pytest.approx(2 * rows[0].creates, rel=0.2)
    g = gains(rows, "random", "round_robin")
    assert set(g) == {64, 128}
    lines = table_lines(rows)
    assert lines[0].startswith("| OSTs (OSS) | policy | mean I/O MiB/s")
    assert len(lines) == 2 + len(rows)


def test_same_study_twice_gives_the_same_numbers(small_study):
    again = run_study([(64, 8)], ["round_robin"], duration_s=240, jobs=1)
    first = small_study[0]
    assert again[0].mean_io_bandwidth_mib_s == first.mean_io_bandwidth_mib_s
    assert again[0].ost_served_max_mean == first.ost_served_max_mean


def test_scale_subcommand_writes_table_and_both_figures(tmp_path, capsys):
    out = tmp_path / "out"
    code = sim_main(["scale", "--sizes", "64:8", "--policy", "round_robin", "--policy", "lustre_qos",
                     "--duration", "120", "--jobs", "1", "--out", str(out)])
    assert code == 0
    assert (out / "fig16_alloc_time.png").stat().st_size > 0
    assert (out / "fig17_bandwidth.png").stat().st_size > 0
    summary = json.loads((out / "scalability.json").read_text())
    assert summary["paper"]["mcmf_gain_over_rr_percent"] == {"800": 54.5}
    assert "lustre_qos_over_round_robin" in summary["gains_percent"]
    assert "| 64 (8) | lustre_qos |" in capsys.readouterr().out
