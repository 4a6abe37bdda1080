"""tests/lustre/report.py: one run's report and the matrix of configurations that
docs/reference/lustre-on-lustre.md holds."""
from __future__ import annotations

import json
from pathlib import Path

from tests.lustre.report import config_name, render, render_matrix

JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.lustre.test_shim" name="test_a" time="1.5"/>
<testcase classname="tests.lustre.test_dne" name="test_b" time="0.1">{b}</testcase>
</testsuite></testsuites>
"""


def run(tmp: Path, name: str, config: dict, b: str, agrees: bool) -> Path:
    d = tmp / name
    d.mkdir()
    (d / "tier.xml").write_text(JUNIT.format(b=b))
    (d / "config.json").write_text(json.dumps(config))
    (d / "rules.jsonl").write_text(json.dumps(
        {"rule": "a list is applied in order", "source": "lod_qos.c", "standin": "model",
         "seen": "got [3, 1]", "agrees": agrees, "version": config["version"]}) + "\n")
    return d


def test_the_matrix_has_a_column_per_configuration_with_each_tests_outcome(tmp_path):
    zfs = run(tmp_path, "a", {"version": "2.17.0", "osd": "zfs", "mdts": 1,
                              "command": "bash scripts/lustre-vm.sh test"}, "", True)
    dne = run(tmp_path, "b", {"version": "2.17.0", "osd": "zfs", "mdts": 2},
              '<failure message="MDTs {0}"/>', False)
    one = run(tmp_path, "c", {"version": "2.15.8", "osd": "zfs", "mdts": 1},
              '<skipped message="one MDT: no MDT0001"/>', True)
    text = render_matrix([zfs, dne, one])
    assert "| test | 2.17.0 zfs | 2.17.0 zfs, 2 MDTs | 2.15.8 zfs |" in text
    assert "| `test_dne::test_b` | passed | **failed**: MDTs {0} | skipped: one MDT: no MDT0001 |" \
        in text
    assert "| 2.17.0 zfs, 2 MDTs | `` | 1 | 0 | 1 | 2 |" in text
    assert "yes: got [3, 1] | **no**: got [3, 1] | yes: got [3, 1] |" in text


def test_one_runs_report_counts_what_passed(tmp_path):
    d = run(tmp_path, "a", {"version": "2.17.0"}, "", True)
    text = render(d / "tier.xml", d / "rules.jsonl")
    assert "## Tests (2 of 2 passed" in text and "| a list is applied in order |" in text


def test_a_configuration_is_named_by_version_osd_and_mdts():
    assert config_name({"version": "2.17.0", "osd": "ldiskfs", "mdts": 1}) == "2.17.0 ldiskfs"
    assert config_name({"version": "2.17.0", "osd": "zfs", "mdts": 2}) == "2.17.0 zfs, 2 MDTs"
