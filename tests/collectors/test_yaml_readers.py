"""lnetctl and job_stats are YAML: read with PyYAML, markers and flow style accepted, ids kept as
strings, malformed YAML one line naming the file and the line."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import JobStatsError, LnetctlError
from lustre_alloc.collectors.readers.job_stats import parse_job_stats
from lustre_alloc.collectors.readers.lnetctl import parse_lnetctl_stats

from .conftest import DDN, HPE_PROC

REAL_LNETCTL = (DDN / "lnetctl_stats.txt").read_text()


def test_lnetctl_with_document_markers_reads_the_same_counters():
    assert parse_lnetctl_stats("---\n" + REAL_LNETCTL + "...\n") == parse_lnetctl_stats(REAL_LNETCTL)


def test_lnetctl_in_flow_style_and_extra_keys():
    text = ("--- {statistics: {msgs_alloc: 0, send_count: 7, drop_length: 4832, "
            "note: later-version-extra, nested: {a: 1}}}\n")
    assert parse_lnetctl_stats(text) == {"msgs_alloc": 0, "send_count": 7, "drop_length": 4832}


def test_malformed_lnetctl_yaml_is_one_line_naming_file_and_line():
    with pytest.raises(LnetctlError) as e:
        parse_lnetctl_stats("statistics:\n    send_count: 1\n  recv_count: [2\n", "/tmp/lnetctl.out")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("/tmp/lnetctl.out:") and "malformed YAML" in msg
    assert e.value.line is not None


def test_two_lnetctl_documents_are_refused():
    with pytest.raises(LnetctlError, match="2 YAML documents"):
        parse_lnetctl_stats("statistics: {a: 1}\n---\nstatistics: {a: 2}\n", "x")


def test_numeric_looking_job_ids_stay_strings():
    js = parse_job_stats("job_stats:\n- job_id: 24\n  snapshot_time: 10\n"
                         "- job_id: 0x1A\n  snapshot_time: 10\n- job_id: on\n  snapshot_time: 1\n")
    assert list(js.jobs) == ["24", "0x1A", "on"]


def test_job_stats_with_markers_flow_style_and_extra_keys():
    block = parse_job_stats((HPE_PROC / "obdfilter/lustrefs-OST0000/job_stats").read_text())
    flow = parse_job_stats(
        "---\n{job_stats: [{job_id: 24, snapshot_time: 1510782606, future_key: x,\n"
        " write_bytes: {samples: 64575, unit: bytes, min: 4096, max: 4194304, sum: 215147593728}}]}\n...\n")
    assert flow.jobs["24"].counters["write_bytes"] == block.jobs["24"].counters["write_bytes"]
    assert flow.jobs["24"].snapshot_time == 1510782606
    assert flow.skipped == [(2, "future_key: unrecognised field")]


def test_bad_counter_field_is_skipped_with_its_line():
    js = parse_job_stats("job_stats:\n- job_id: a\n  write_bytes: { samples: x, unit: bytes }\n"
                         "  punch: { samples: 1, unit: reqs }\n")
    assert js.jobs["a"].counters["punch"].samples == 1
    assert js.skipped == [(3, "write_bytes: a counter needs 'samples: <count>' and 'unit: <name>'")]


def test_malformed_job_stats_yaml_is_one_line_naming_file_and_line():
    with pytest.raises(JobStatsError) as e:
        parse_job_stats("job_stats:\n- job_id: a\n  punch: { samples: 1, unit: reqs\n",
                        "/proc/fs/lustre/obdfilter/x-OST0000/job_stats")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("/proc/fs/lustre/obdfilter/x-OST0000/job_stats:")
    assert "malformed YAML" in msg
