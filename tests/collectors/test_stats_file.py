"""obdfilter stats / md_stats reader against real 2.10.1 files and 2.14 lctl dumps."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import StatsFileError
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param
from lustre_alloc.collectors.readers.stats_file import parse_stats

from .conftest import DDN, HPE_PROC


def test_reads_2_10_obdfilter_stats_values_from_file():
    path = HPE_PROC / "obdfilter/lustrefs-OST0000/stats"
    snap = parse_stats(path.read_text(), str(path))
    assert snap.snapshot_time == pytest.approx(1510782606.789180921)
    assert snap.start_time is None and snap.elapsed_time is None
    wb = snap.counters["write_bytes"]
    assert (wb.samples, wb.unit, wb.min, wb.max, wb.sum, wb.sumsq) == (
        4298711, "bytes", 4096, 4194304, 16552048697344, None)
    assert snap.counters["punch"].samples == 57 and snap.counters["punch"].unit == "reqs"
    assert snap.counters["ping"].samples == 141
    assert "read_bytes" not in snap.counters  # zero-sample counters are not printed


def test_repeated_statfs_in_2_10_keeps_first_and_reports_the_repeat():
    snap = parse_stats((HPE_PROC / "obdfilter/lustrefs-OST0002/stats").read_text())
    assert snap.counters["statfs"].samples == 35354
    assert any("repeated counter statfs" in reason for _, reason in snap.skipped)


def test_reads_2_10_md_stats():
    snap = parse_stats((HPE_PROC / "mdt/lustrefs-MDT0000/md_stats").read_text())
    assert snap.snapshot_time == pytest.approx(1510781853.009826353)
    assert {n: c.samples for n, c in snap.counters.items()} == {
        "open": 10, "close": 9, "mknod": 1, "getattr": 16, "setattr": 57, "getxattr": 2, "statfs": 1}
    assert snap.skipped == []


def test_reads_2_14_usecs_stats_with_start_and_elapsed_time():
    dump = parse_get_param((DDN / "valid/valid.txt").read_text())
    snap = parse_stats(dump.values["obdfilter.ai400-OST0000.stats"])
    assert snap.start_time == pytest.approx(1688526475.271489350)
    assert snap.elapsed_time == pytest.approx(76567.282925497)
    w = snap.counters["write"]
    assert (w.samples, w.unit, w.min, w.max, w.sum, w.sumsq) == (25001, "usecs", 86, 16684,
                                                                  41700926, 74443748896)
    assert snap.counters["write_bytes"].sumsq == 439803838556274688
    md = parse_stats(dump.values["mdt.ai400-MDT0000.md_stats"])
    assert md.counters["statfs"].samples == 44863 and md.counters["open"].unit == "usecs"


def test_reads_master_35_wide_names():
    text = ("snapshot_time                       1700000000.000000001 secs.nsecs\n"
            "start_time                          1699990000.5 secs.nsecs\n"
            "elapsed_time                        9999.499999999 secs.nsecs\n"
            "prealloc                            7 samples [usecs] 1 9 30 200\n")
    snap = parse_stats(text)
    assert snap.counters["prealloc"].sum == 30
    assert snap.start_time == pytest.approx(1699990000.5)


def test_unknown_lines_are_skipped_not_fatal():
    snap = parse_stats("snapshot_time 1.000000001 secs.nsecs\nfoo bar\nread_bytes 1 samples [bytes] 1 1 1\n")
    assert snap.counters["read_bytes"].sum == 1
    assert snap.skipped == [(2, "unrecognised line")]


@pytest.mark.parametrize("text", ["", "\n\n", "write_bytes 1 samples [bytes]\n", "garbage"])
def test_text_without_snapshot_time_raises_stats_file_error(text):
    with pytest.raises(StatsFileError) as info:
        parse_stats(text, "obdfilter/X/stats")
    assert "obdfilter/X/stats" in str(info.value)
