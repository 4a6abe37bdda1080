"""Results a storage admin can read: table headers and legend, 'never' naming its threshold,
provenance in summary.json, tidy CSVs, the 1.05 line in the figure legends, a robust `list`,
one-line errors with exit code 2 for a scenario or data file that cannot be used."""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import shutil

import pytest

import lustre_alloc.simulator.cli as sim_cli
from lustre_alloc.simulator.cli import main
from lustre_alloc.simulator.metrics import BALANCED_MAX_MEAN
from lustre_alloc.simulator.scenario import SCENARIO_DIR


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """One run for the module, made by the fixture (whichever test a worker runs first)."""
    out = tmp_path_factory.mktemp("run")
    argv = ["run", "nersc-edison-real", "--duration", "3600", "--policy", "round_robin",
            "--policy", "random", "--jobs", "1", "--no-figures", "--out", str(out)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(argv) == 0
    return out, argv, printed.getvalue()


def test_table_headers_legend_and_never_with_threshold(short_run):
    out, argv, printed = short_run
    text = " ".join(printed.split())  # rich wraps the legend at 150 columns
    # the real Edison state (65%..82% full) stays above 1.05 for a 1 h run: 'never' names 1.05
    assert f"never ≤{BALANCED_MAX_MEAN}" in text
    for words in ("OST used max/mean", f"(≤{BALANCED_MAX_MEAN}) from hour", "Jain",
                  "allocation µs", "files created", "non-", "default path"):
        assert words in text, words
    # legend under the table: the threshold, what the counts count, what a note means
    assert f"stays ≤{BALANCED_MAX_MEAN} to the end" in text
    assert "creates refused because no OST could take them" in text
    assert "random found fewer OSTs above its free-space floor" in text


def test_summary_json_records_provenance(short_run):
    out, argv, _ = short_run
    summary = json.loads((out / "summary.json").read_text())
    prov = summary["provenance"]
    scenario = SCENARIO_DIR / "nersc-edison-real.toml"
    assert prov["version"] and prov["seed"] == 2018 and prov["duration_s"] == 3600
    assert prov["scenario_sha256"] == hashlib.sha256(scenario.read_bytes()).hexdigest()
    assert prov["scenario_path"].endswith("nersc-edison-real.toml")
    assert prov["command_line"].startswith("lustre-alloc-sim run nersc-edison-real --duration 3600")
    fill = prov["data_files"]["cluster.initial_fill.path"]
    assert fill["path"].endswith("sample_ost-fullness.txt.gz") and len(fill["sha256"]) == 64
    assert any(k.endswith(".darshan") for k in prov["data_files"])
    assert summary["balanced_max_mean"] == BALANCED_MAX_MEAN


def test_summary_csvs_are_tidy(short_run):
    out, _, _ = short_run
    with open(out / "summary.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["policy"] for r in rows] == ["round_robin", "random"]
    cells = [v for r in rows for v in r.values()]
    assert not any(v.startswith(("{", "[")) for v in cells)
    with open(out / "summary_apps.csv") as fh:
        apps = list(csv.DictReader(fh))
    assert {a["policy"] for a in apps} == {"round_robin", "random"}
    assert all(float(a["mean_io_bandwidth_mib_s"]) >= 0 for a in apps)
    with open(out / "summary_notes.csv") as fh:
        notes = list(csv.DictReader(fh))
    summary = json.loads((out / "summary.json").read_text())
    by_policy = {p["policy"]: p["creates_by_note"] for p in summary["policies"]}
    assert {(n["policy"], n["note"]): int(n["creates"]) for n in notes} == {
        (p, note): c for p, d in by_policy.items() for note, c in d.items()}


def test_balanced_threshold_is_in_both_figure_legends(tmp_path, monkeypatch):
    import matplotlib.figure
    legends = {}

    def savefig(fig, path, **_):
        legends[path.name] = [t.get_text() for ax in fig.axes if ax.get_legend()
                              for t in ax.get_legend().get_texts()]
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    assert main(["run", "paper-32ost", "--duration", "3600", "--policy", "round_robin",
                 "--jobs", "1", "--out", str(tmp_path)]) == 0
    for name in ("fig_ost_max_mean.png", "fig_oss_cpu_max_mean.png"):
        assert f"balanced: max/mean ≤ {BALANCED_MAX_MEAN}" in legends[name], legends[name]


def test_list_names_a_scenario_that_does_not_load_and_lists_the_others(tmp_path, monkeypatch,
                                                                       capsys):
    shutil.copy(SCENARIO_DIR / "paper-32ost.toml", tmp_path)
    (tmp_path / "broken.toml").write_text('name = "broken"\nduration_s = "a day"\n')
    monkeypatch.setattr(sim_cli, "SCENARIO_DIR", tmp_path)
    code = main(["list"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0].startswith("broken") and "CANNOT LOAD" in out[0] and "duration_s" in out[0]
    assert out[1].startswith("paper-32ost") and "CANNOT" not in out[1]


def _one_line_error(capsys, argv, code=2):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lustre-alloc-sim: error: "), err
    return err


def test_missing_data_file_of_a_scenario_is_one_line_exit_2(tmp_path, capsys):
    text = (SCENARIO_DIR / "nersc-edison-real.toml").read_text().replace(
        "pkg:lustre_alloc_data/nersc-pytokio/sample_ost-fullness.txt.gz", "gone/lfs-df.txt.gz")
    (tmp_path / "s.toml").write_text(text)
    err = _one_line_error(capsys, ["run", str(tmp_path / "s.toml"), "--duration", "60"])
    assert "cluster.initial_fill.path" in err and "gone/lfs-df.txt.gz" in err


def test_missing_package_data_reference_is_one_line_exit_2(tmp_path, capsys):
    text = (SCENARIO_DIR / "nersc-edison-real.toml").read_text().replace(
        "nersc-pytokio/sample_ost-map.txt.gz", "nersc-pytokio/no-such-map.txt.gz")
    (tmp_path / "s.toml").write_text(text)
    err = _one_line_error(capsys, ["validate", str(tmp_path / "s.toml")])
    assert "cluster.initial_fill.ost_map" in err and "no-such-map" in err


def test_missing_hacc_summary_is_one_line_exit_2(tmp_path, capsys):
    text = (SCENARIO_DIR / "paper-32ost.toml").read_text()
    text = text.replace('generator = "hacc"', 'generator = "hacc"\nparams = { hacc_csv = "/nonexistent/hacc.csv.gz" }', 1)
    assert "/nonexistent/hacc.csv.gz" in text
    (tmp_path / "s.toml").write_text(text)
    err = _one_line_error(capsys, ["run", str(tmp_path / "s.toml"), "--duration", "60",
                                   "--policy", "round_robin", "--jobs", "1", "--no-figures",
                                   "--out", str(tmp_path / "o")])
    assert "/nonexistent/hacc.csv.gz" in err
