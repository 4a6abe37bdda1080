import json

from lustre_alloc.simulator.cli import main


def test_short_paper_scenario_run_end_to_end_writes_table_files_and_figures(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["run", "paper-32ost", "--duration", "7200", "--out", str(out), "--jobs", "1"])
    text = capsys.readouterr().out
    assert code == 0
    bundled = {"round_robin", "lustre_qos", "random", "mcmf", "mcmf_flow"}
    for policy in bundled:
        assert policy in text
        assert (out / f"hourly_{policy}.csv").read_text().count("\n") == 4  # header + hours 0, 1, 2
        assert (out / f"fig_capacity_box_{policy}.png").stat().st_size > 1000
    summary = json.loads((out / "summary.json").read_text())
    rows = {p["policy"]: p for p in summary["policies"]}
    assert set(rows) == bundled
    assert all(r["creates"] > 0 and r["failed_creates"] == 0 for r in rows.values())
    # identical start for every policy
    assert len({r["ost_max_mean_start"] for r in rows.values()}) == 1
    assert (out / "fig_ost_max_mean.png").exists() and (out / "fig_oss_cpu_max_mean.png").exists()


def test_policy_flag_restricts_the_run(tmp_path, capsys):
    code = main(["run", "paper-32ost", "--duration", "600", "--policy", "random",
                 "--out", str(tmp_path), "--no-figures"])
    assert code == 0
    rows = json.loads((tmp_path / "summary.json").read_text())["policies"]
    assert [r["policy"] for r in rows] == ["random"]


def test_unknown_policy_flag_is_one_error_line(capsys):
    code = main(["run", "paper-32ost", "--policy", "fastest", "--duration", "60"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "unknown policy 'fastest'" in err
