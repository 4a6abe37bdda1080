"""bench/compare_summaries.py finds a changed field and ignores what measures the machine."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "compare_summaries.py"


def _tree(root: Path, **row) -> Path:
    doc = {"scenario": "s", "provenance": {"written_utc": str(row.pop("when", "t0"))},
           "policies": [{"policy": "mcmf", "wall_s": row.pop("wall_s", 1.0),
                         "job_io_time_s_mean": row.pop("io", 10.0)}]}
    (root / "s").mkdir(parents=True)
    (root / "s" / "summary.json").write_text(json.dumps(doc))
    return root


def _run(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(a), str(b)], capture_output=True,
                          text=True)


def test_equal_trees_but_for_wall_clock_and_provenance(tmp_path):
    done = _run(_tree(tmp_path / "a", wall_s=1.0, when="x"), _tree(tmp_path / "b", wall_s=9.0, when="y"))
    assert done.returncode == 0, done.stdout
    assert "1 scenarios compared, 0 differences" in done.stdout


def test_a_changed_field_is_named(tmp_path):
    done = _run(_tree(tmp_path / "a", io=10.0), _tree(tmp_path / "b", io=10.5))
    assert done.returncode == 1
    assert "s.policies[mcmf].job_io_time_s_mean: 10.0 -> 10.5" in done.stdout
