"""bench/placement_eval.py: a variant runs exactly as the simulator's CLI runs it (one
way to build a run), and its seeds table's intervals, paired differences and headroom
follow the per-seed rows."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from lustre_alloc.simulator.report import headroom_captured, user_metrics
from lustre_alloc.simulator.runner import prepare, run_policy
from lustre_alloc.simulator.scenario import load_scenario

from .conftest import eight_ost_world, rec, small, unflagged_degrade

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pe():
    spec = importlib.util.spec_from_file_location("placement_eval", ROOT / "bench" / "placement_eval.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["placement_eval"] = mod
    spec.loader.exec_module(mod)
    return mod


def _hinted_world(make_scenario, hint: str):
    """Two jobs of uneven files on 4 OSTs of uneven speed; the first job's creates say
    each file's size (``size_hint``) or not, and the second is left to Lustre's QOS."""
    body = small(duration=600, policies='["mcmf"]').replace(
        "ost_bandwidth_mib_s = 100", "ost_bandwidth_mib_s = [200, 50, 200, 50]")
    body += f'size_hint = "{hint}"\n'
    body += '\n[[workload]]\ntrace = "u.csv"\nmanaged = false\n'
    recs = [rec(1 + i, "write", "a", f"f{i}", (1 + 7 * (i % 3)) << 26, sc=2) for i in range(12)]
    make_scenario("", [rec(2.5, "write", "b", "g0", 1 << 28)], name="u")
    return make_scenario(body, recs)


def test_a_variant_runs_as_the_cli_runs_it(pe, make_scenario):
    """Size hints and unmanaged jobs reach placement_eval's runs as they reach the CLI's:
    the same scenario gives the same user metrics through both."""
    for hint in ("per_file", "none"):
        path = _hinted_world(make_scenario, hint)
        sc = load_scenario(path)
        um = user_metrics(run_policy(sc, prepare(sc), "mcmf"))
        row = pe.run_variant(str(path), None, "mcmf", "mcmf", {})
        assert row["job_io_mean_s"] == pytest.approx(um["job_io_time_s_mean"])
        assert row["phase_io_p99_s"] == pytest.approx(um["phase_io_time_s_p99"])
        assert row["jobs"] == um["jobs"]


def test_variant_parameters_and_leases_reach_the_policy(pe):
    # the flow on every round, by the variant's parameters: rounds are counted
    row = pe.run_variant("paper-32ost", 600, "lease", "mcmf+lease", {"regime": False},
                         seed_offset=1)
    assert row["lease_stats"]["taken"] > 0 and row["policy_stats"]["rounds"] > 0
    # by default the regime's alike OSTs are left to Lustre's allocator; without that,
    # the regime's own round-robin answers
    default = pe.run_variant("paper-32ost", 600, "lease", "mcmf+lease", {}, seed_offset=1)
    assert default["lease_stats"]["to_lustre"] > 0
    own = pe.run_variant("paper-32ost", 600, "lease", "mcmf+lease", {"alike_to_lustre": False},
                         seed_offset=1)
    assert own["policy_stats"]["regime_rr_requests"] > 0 and own["lease_stats"]["to_lustre"] == 0
    assert row["seed"] == load_scenario("paper-32ost").seed + 1
    plain = pe.run_variant("paper-32ost", 600, "rr", "round_robin", {})
    assert plain["lease_stats"] == {} and plain["policy_stats"] == {}
    with pytest.raises(Exception, match="no_such_knob"):
        pe.run_variant("paper-32ost", 600, "bad", "mcmf", {"no_such_knob": 1})


def _row(variant, phase, p99, bw, seed):
    return {"variant": variant, "policy": variant, "jobs": 3, "job_io_mean_s": phase * 10,
            "job_io_p99_s": phase * 20, "job_io_max_s": phase * 21,
            "phase_io_mean_s": phase, "phase_io_p99_s": p99, "phase_io_max_s": p99 * 2,
            "bandwidth_mib_s": bw, "jobs_unfinished": 0, "ost_max_mean_end": 1.1, "seed": seed}


def test_seeds_table_follows_the_per_seed_rows(pe):
    rng = np.random.default_rng(5)
    per_seed = []
    for k in range(5):
        rr = rng.uniform(90, 110)
        per_seed.append([_row("round_robin", rr, 2 * rr, 100.0, k),
                         _row("mcmf", rr * rng.uniform(0.5, 0.7), rr, 120.0 + k, k),
                         _row("oracle", rr * 0.4, rr * 0.5, 150.0, k)])
    agg = {a["variant"]: a for a in pe.over_seeds(per_seed)}
    phase = np.array([s[1]["phase_io_mean_s"] for s in per_seed])
    half = stats.t.ppf(0.975, 4) * phase.std(ddof=1) / math.sqrt(5)
    assert agg["mcmf"]["phase_io_mean_s"]["mean"] == pytest.approx(phase.mean(), abs=1e-4)
    assert agg["mcmf"]["phase_io_mean_s"]["ci95"] == pytest.approx(half, abs=1e-4)
    rel = [s[1]["phase_io_mean_s"] / s[0]["phase_io_mean_s"] - 1 for s in per_seed]
    d = agg["mcmf"]["vs_base"]["phase_io_mean_s"]
    assert d["mean"] == pytest.approx(np.mean(rel), abs=1e-4) and not d["includes_zero"]
    assert agg["round_robin"]["vs_base"] == {}
    heads = [headroom_captured(s[0]["phase_io_mean_s"], s[1]["phase_io_mean_s"],
                               s[2]["phase_io_mean_s"]) for s in per_seed]
    assert agg["mcmf"]["headroom_mean"]["mean"] == pytest.approx(np.mean(heads), abs=1e-3)
    assert agg["oracle"]["headroom_p99"]["mean"] == pytest.approx(1.0)
    # another base: the paired difference from it, headroom still over round-robin
    other = {a["variant"]: a for a in pe.over_seeds(per_seed, base="mcmf")}
    assert other["oracle"]["vs_base"]["bandwidth_mib_s"]["mean"] == pytest.approx(
        np.mean([150.0 / (120.0 + k) - 1 for k in range(5)]), abs=1e-4)
    assert other["mcmf"]["headroom_mean"] == agg["mcmf"]["headroom_mean"]
    lines = pe.seeds_table(list(other.values()))
    assert "vs mcmf" in lines[0] and lines[2].startswith("| round_robin (5 seeds) |")


def test_seeds_table_without_an_oracle_has_no_headroom(pe):
    per_seed = [[_row("round_robin", 100 + k, 200, 100.0, k), _row("mcmf", 100 + k, 200, 100.0, k)]
                for k in range(3)]
    agg = pe.over_seeds(per_seed)
    assert all(a["headroom_mean"] is None for a in agg)
    d = agg[1]["vs_base"]["phase_io_mean_s"]
    assert d["mean"] == 0 and d["includes_zero"]            # identical seeds: no difference
    assert "n.s." in pe.seeds_table(agg)[3]


def test_headroom_is_averaged_over_the_seeds_that_define_it(pe):
    """A seed where the oracle gains nothing over RR (a day without a slow OST) has no
    headroom; the others' is averaged, and the table says over how many seeds."""
    per_seed = [[_row("round_robin", 100.0, 200.0, 100.0, 0), _row("mcmf", 110.0, 210.0, 90.0, 0),
                 _row("oracle", 100.0, 200.0, 100.0, 0)]]
    per_seed += [[_row("round_robin", 900.0, 1200.0, 100.0, k), _row("mcmf", 60.0 + k, 340.0, 90.0, k),
                  _row("oracle", 35.0, 60.0, 100.0, k)] for k in (1, 2, 3)]
    agg = {a["variant"]: a for a in pe.over_seeds(per_seed)}
    h = agg["mcmf"]["headroom_mean"]
    assert h["n"] == 3
    assert h["mean"] == pytest.approx(np.mean([(900 - 60 - k) / 865 for k in (1, 2, 3)]), abs=1e-3)
    assert "(3 seeds)" in pe.seeds_table(list(agg.values()))[3]


def test_all_writes_each_world_into_the_docs_generated_section_and_resumes(pe, make_scenario,
                                                                           tmp_path, capsys):
    """``--all`` measures every listed world, rewrites only the doc's generated section
    (the text around it is kept), and ``--resume`` keeps a world already measured with the
    same variants and seeds; a world never measured is listed as such."""
    world = str(make_scenario(small(duration=300, policies='["mcmf"]'),
                              [rec(1 + i, "write", "a", f"f{i}", 1 << 26, sc=2) for i in range(6)]))
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{pe.DOC_BEGIN}\nold table\n{pe.DOC_END}\noutro\n")
    out = tmp_path / "out"
    argv = ["--all", "--worlds", world, "--seeds", "2", "--jobs", "1", "--out", str(out),
            "--doc", str(doc), "--variant", "round_robin", "--variant", "mcmf"]
    assert pe.main(argv) == 0
    text = doc.read_text()
    assert text.startswith(f"intro\n{pe.DOC_BEGIN}") and text.endswith(f"{pe.DOC_END}\noutro\n")
    assert "old table" not in text
    assert "| round_robin (2 seeds) |" in text and "| mcmf (2 seeds) |" in text
    kept = json.loads((out / f"{Path(world).stem}.json").read_text())
    rows = [r for seed in kept["per_seed"] for r in seed]
    assert len(rows) == 4 and not any("job_io_s" in r for r in rows)     # kept slim
    assert kept["commit"]
    saved = (out / f"{Path(world).stem}.json").stat().st_mtime_ns
    capsys.readouterr()
    assert pe.main(argv + ["--resume"]) == 0
    assert "kept" in capsys.readouterr().out
    assert (out / f"{Path(world).stem}.json").stat().st_mtime_ns == saved
    # other variants are not the saved ones: measured again
    assert not pe._done(out / f"{Path(world).stem}.json", [("round_robin", "round_robin", {})], 2)
    # --render writes the saved results without running; a world never measured is listed
    doc.write_text(f"{pe.DOC_BEGIN}\n{pe.DOC_END}\n")
    assert pe.main(["--all", "--render", "--worlds", f"{world},paper-32ost", "--out", str(out),
                    "--doc", str(doc)]) == 0
    assert "| mcmf (2 seeds) |" in doc.read_text()
    assert "Not yet measured with `--all`: `paper-32ost`." in doc.read_text()


def test_all_refuses_a_doc_without_its_generated_section(pe, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n")
    with pytest.raises(SystemExit, match="doc.md: no generated section"):
        pe.write_doc_block(doc, ["x"])
    assert doc.read_text() == "no markers here\n"


def test_update_replaces_only_the_given_variants_rows_and_names_their_commit(pe, make_scenario,
                                                                              tmp_path):
    """``--update`` re-measures the given variants under the saved seeds and duration,
    keeps every other row, recomputes the aggregate, and the heading names the commit of
    the replaced rows; a label the saved result lacks is one clear error."""
    world = str(make_scenario(small(duration=300, policies='["mcmf"]'),
                              [rec(1 + i, "write", "a", f"f{i}", 1 << 26, sc=2) for i in range(6)]))
    out, stem = tmp_path / "out", Path(world).stem
    base = ["--all", "--worlds", world, "--jobs", "1", "--out", str(out)]
    assert pe.main(base + ["--seeds", "2", "--variant", "round_robin", "--variant", "mcmf"]) == 0
    saved = json.loads((out / f"{stem}.json").read_text())
    saved["commit"] = "0ld0ld0"
    for rows in saved["per_seed"]:                 # mark the rows an update must replace
        rows[1]["phase_io_mean_s"] = -1.0
    (out / f"{stem}.json").write_text(json.dumps(saved))
    doc = tmp_path / "doc.md"
    doc.write_text(f"{pe.DOC_BEGIN}\n{pe.DOC_END}\n")
    # --seeds is the saved result's, whatever is asked
    assert pe.main(base + ["--seeds", "3", "--update", "--variant", "mcmf", "--doc", str(doc)]) == 0
    got = json.loads((out / f"{stem}.json").read_text())
    assert [[r["variant"] for r in rows] for rows in got["per_seed"]] == [["round_robin", "mcmf"]] * 2
    assert [rows[0] for rows in got["per_seed"]] == [rows[0] for rows in saved["per_seed"]]
    assert all(rows[1]["phase_io_mean_s"] > 0 for rows in got["per_seed"])
    agg = {a["variant"]: a for a in got["aggregate"]}
    assert agg["mcmf"]["phase_io_mean_s"]["mean"] == pytest.approx(
        np.mean([rows[1]["phase_io_mean_s"] for rows in got["per_seed"]]))
    assert got["commit"] == "0ld0ld0" and got["updated"]["mcmf"] not in ("", "0ld0ld0")
    assert f"commit 0ld0ld0; mcmf re-measured on {got['updated']['mcmf']})" in doc.read_text()
    before = (out / f"{stem}.json").read_text()
    with pytest.raises(SystemExit, match=f"{stem}.json: has no variant 'oracle' to replace"):
        pe.main(base + ["--update", "--variant", "oracle"])
    assert (out / f"{stem}.json").read_text() == before
    with pytest.raises(SystemExit):
        pe.main(["--all", "--update", "--worlds", world, "--out", str(out)])   # no --variant


WARM_WORLD = eight_ost_world("warm", '["mcmf"]', unflagged_degrade(5, 0, 600),
                             unflagged_degrade(2, 1800))


def test_a_warm_start_learns_the_state_at_t0_and_no_onset_to_come(pe, make_scenario):
    from lustre_alloc.simulator.runner import scenario_policy
    records = [rec(t, "write", f"job{t % 3}", f"/f{t}.{k}", 64 << 20)
               for t in range(0, 3600, 10) for k in range(4)]
    sc = load_scenario(make_scenario(WARM_WORLD, records))
    placing = scenario_policy(sc, "mcmf")
    assert pe._inner(placing).ost_speed_ratios() == {}          # cold: nothing known
    pe._warm_start(sc, "mcmf", placing)
    ratios = pe._inner(placing).ost_speed_ratios()
    # OST 5, slow at t = 0, was slow all the day before (its 600 s end held off); OST 2's
    # onset at 1800 s is still to come, so the day before never showed it
    assert ratios[5] < 0.5 and ratios[2] > 0.5
    with pytest.raises(SystemExit, match="warm_start: policy 'round_robin' keeps no learned state"):
        pe._warm_start(sc, "round_robin", scenario_policy(sc, "round_robin"))
    row = pe.run_variant(str(sc.path), None, "warm", "mcmf", {"warm_start": True})
    assert row["params"] == {"warm_start": True} and row["creates"] == len(records)


def test_held_at_start_keeps_what_is_active_at_t0_for_the_whole_run():
    from lustre_alloc.simulator.events import Event, held_at_start
    events = (Event(0, "degrade", 0.0, 600.0, osts=(5,)), Event(1, "degrade", 1800.0, osts=(2,)))
    assert held_at_start(events) == (Event(0, "degrade", 0.0, math.inf, osts=(5,)),)
