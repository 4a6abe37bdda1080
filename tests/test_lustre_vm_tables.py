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
