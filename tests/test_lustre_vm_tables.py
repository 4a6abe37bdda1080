"""docs/lustre-vm.md's placement tables are what bench/lustre_vm_report.py makes of the
committed results (docs/lustre-vm-placement/), and the simulator's fit to a warm-up is the
one its docstring states."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from lustre_vm_simulated import fit_ost  # noqa: E402


def test_the_docs_tables_are_the_reports_of_the_committed_results():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "lustre_vm_report.py"),
                          str(ROOT / "docs" / "lustre-vm-placement")], capture_output=True,
                         text=True, check=True).stdout.strip()
    doc = (ROOT / "docs" / "lustre-vm.md").read_text()
    start = doc.index("<!-- tables: python bench/lustre_vm_report.py docs/lustre-vm-placement -->")
    block = doc[doc.index("\n", start) + 1:doc.index("<!-- /tables -->")].strip()
    assert block == out


def test_the_create_cost_tables_are_the_reports_of_the_committed_results():
    files = [ROOT / "docs" / "lustre-vm-create" / f for f in ("before.json", "after.json")]
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "lustre_vm_create_rpcs.py"),
                          "--report", *map(str, files)], capture_output=True, text=True,
                         check=True).stdout.strip()
    doc = (ROOT / "docs" / "lustre-vm.md").read_text()
    start = doc.index("<!-- create-rpcs: ")
    block = doc[doc.index("\n", start) + 1:doc.index("<!-- /create-rpcs -->")].strip()
    assert block == out


def test_a_per_file_cost_and_a_bandwidth_are_fitted_per_ost():
    files = [[0, 1, 0.3], [0, 4, 0.6], [0, 1, 0.3], [1, 1, 2.0], [1, 4, 8.0]]
    a, bw = fit_ost(files, 0)
    assert a == pytest.approx(0.2) and bw == pytest.approx(10.0)
    a, bw = fit_ost(files, 1)               # no fixed cost: the line through the origin
    assert a == pytest.approx(0.0, abs=1e-9) and bw == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no file on OST 2"):
        fit_ost(files, 2)


def test_a_shim_rounds_create_cost_is_its_slowest_writers_and_the_report_weighs_it(tmp_path):
    from lustre_alloc.common.record_file import RECORD_KEYS
    from lustre_vm_placement import create_waits
    from lustre_vm_report import control_goal, create_cost_line

    def line(path, mapper_us, total_us):
        f = dict.fromkeys(RECORD_KEYS, "")
        f.update(v="4", path=path, result="layout", mapper_us=str(mapper_us),
                 total_us=str(total_us))
        return "\t".join(f"{k}={f[k]}" for k in RECORD_KEYS)

    job = tmp_path / "job-control-0-shim"
    record = tmp_path / "record.tsv"
    record.write_text("\n".join([
        line(f"{job}/w0-0", 300_000, 400_000), line(f"{job}/w0-1", 100, 20_000),
        line(f"{job}/w1-0", 250_000, 300_000),
        line(f"{tmp_path}/job-control-0-shimmer/w0-0", 9e9, 9e9),   # another job's
    ]) + "\n")
    got = create_waits(record, job)
    assert got["files"] == 3
    assert got["slowest_writer_mapper_s"] == 0.3001
    assert abs(got["slowest_writer_open_s"] - 0.42) < 1e-9
    assert create_waits(record, tmp_path / "nothing") is None

    def rounds(excess):
        return [r for i, e in enumerate(excess) for r in (
            {"round": i, "mode": "lustre", "seconds": 10.0},
            {"round": i, "mode": "shim", "seconds": 10.0 + e, "creates": got})]
    far = {"rounds": rounds([1.5, 1.6, 1.4]), "ratio_to_lustre": {"shim": {"mean": 1.15}}}
    near = {"rounds": rounds([0.1, 0.9, -0.4]), "ratio_to_lustre": {"shim": {"mean": 1.02}}}
    noisy = {"rounds": rounds([-1.0, 2.0, 0.5]), "ratio_to_lustre": {"shim": {"mean": 1.08}}}
    assert "more than the per-create wait" in create_cost_line(far)
    assert "within 5% of Lustre" in create_cost_line(near)
    assert "accounted for" in create_cost_line(noisy)
    for r in noisy["rounds"]:
        r["stack_cpu_s"] = {"mapper": 2.0 if r["mode"] == "shim" else 0.5, "broker": 0.1}
    assert "used 2.1 s of the guest's CPU during the default's job, 0.6 s during Lustre's" \
        in create_cost_line(noisy)
    assert create_cost_line({"rounds": rounds([1.0])[:1], "ratio_to_lustre": {}}) is None
    slow = {"rounds": [dict(r, mode="drain") if r["mode"] == "lustre" else r
                       for r in far["rounds"]], "ratio_to_lustre": {}}
    said = create_cost_line(slow, "drain")
    assert "+1.50 s" in said and "more than the hand drain's in the same round." in said
    noisy["ratio_to_lustre"]["drain"] = {"mean": 0.85}
    said = control_goal(noisy, create_cost_line(noisy))
    assert "within 5% of Lustre's job" in said and "took 0.85" in said and "accounted" in said
