"""brw_stats reader against 2.10.1 osd-zfs, 2.14 ldiskfs and 2.15 (start/elapsed time) files."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import BrwStatsError
from lustre_alloc.collectors.readers.brw_stats import DISK_IN_FLIGHT, DISK_IO_SIZE, IO_TIME, parse_brw_stats

from .conftest import CONSTRUCTED, DDN, HPE_PROC

ALL_BLOCKS = ["pages per bulk r/w", "discontiguous pages", "discontiguous blocks",
              "disk fragmented I/Os", "disk I/Os in flight", IO_TIME, DISK_IO_SIZE, "block maps msec"]


def test_reads_2_10_osd_zfs_histograms():
    brw = parse_brw_stats((HPE_PROC / "osd-zfs/lustrefs-OST0000/brw_stats").read_text())
    assert brw.snapshot_time == pytest.approx(1510782606.797216394)
    # osd-zfs 2.10 has no "discontiguous blocks" nor "disk fragmented I/Os"
    assert list(brw.histograms) == ["pages per bulk r/w", "discontiguous pages",
                                    "disk I/Os in flight", IO_TIME, DISK_IO_SIZE]
    pages = brw.histograms["pages per bulk r/w"]
    assert pages.unit == "rpcs"
    assert pages.as_dict("write")[1024] == 4059303 and pages.as_dict("read")[1] == 13
    assert brw.histograms["discontiguous pages"].as_dict("write")[31] == 4293275
    assert brw.histograms[IO_TIME].as_dict("read") == {1: 1}
    size = brw.histograms[DISK_IO_SIZE]
    assert size.as_dict("read")[8192] == 12 and size.as_dict("write")[4 << 20] == 4059303
    assert brw.histograms["disk I/Os in flight"].as_dict("write")[10] == 3
    assert brw.skipped == []


def test_reads_2_14_histograms_with_block_maps():
    brw = parse_brw_stats((DDN / "brw_stats_with_data.txt").read_text())
    assert brw.snapshot_time == pytest.approx(1534158712.738772898)
    assert list(brw.histograms) == ALL_BLOCKS
    assert brw.histograms[IO_TIME].as_dict("write") == {32: 1, 64: 0, 128: 2, 256: 6}
    assert brw.histograms[DISK_IO_SIZE].as_dict("write") == {128 << 10: 1, 256 << 10: 0,
                                                              512 << 10: 0, 1 << 20: 32}
    assert brw.histograms["block maps msec"].as_dict("read") == {1: 12689}
    assert brw.histograms["disk I/Os in flight"].as_dict("write")[32] == 44513


def test_reads_2_15_start_and_elapsed_time_and_empty_blocks():
    brw = parse_brw_stats((DDN / "brw_stats_with_start_and_elapsed_time.txt").read_text())
    assert brw.snapshot_time == pytest.approx(1684867636.682465202)
    assert brw.start_time == pytest.approx(1684865295.727058577)
    assert brw.elapsed_time == pytest.approx(2340.955406625)
    assert list(brw.histograms) == ALL_BLOCKS
    assert all(not h.buckets for h in brw.histograms.values())


def test_reads_empty_pre_2_15():
    brw = parse_brw_stats((DDN / "brw_stats_empty.txt").read_text())
    assert brw.snapshot_time == pytest.approx(1534429278.185762481)
    assert brw.start_time is None and len(brw.histograms) == 8


def test_placeholder_symlink_text_is_not_brw_stats(tmp_path):
    # A tree copied without symlink support holds obdfilter/T/brw_stats (a symlink to
    # ../../osd-zfs/T/brw_stats on a 2.10 OSS) as a text file with the link target.
    placeholder = tmp_path / "brw_stats"
    placeholder.write_text("../../osd-zfs/lustrefs-OST0000/brw_stats")
    with pytest.raises(BrwStatsError):
        parse_brw_stats(placeholder.read_text())


def test_obdfilter_brw_stats_symlink_reads_the_osd_histogram():
    # In the fixture the link is real again: it resolves to the osd-zfs file and parses.
    link = HPE_PROC / "obdfilter/lustrefs-OST0000/brw_stats"
    assert link.is_symlink()
    assert parse_brw_stats(link.read_text()).histograms


def test_rows_outside_blocks_are_skipped():
    brw = parse_brw_stats("snapshot_time: 1.5 secs.nsecs\n1:\t\t 1 1 1 | 1 1 1\n")
    assert brw.histograms == {} and brw.skipped == [(2, "row outside a block")]


def test_reads_master_in_flight_in_log2_buckets():
    """lprocfs_status_server.c brw_stats_seq_show(): with bs_inflight_io_log2 the in-flight
    block has power-of-two labels; a label L then stands for (L/2, L]."""
    bs = parse_brw_stats((CONSTRUCTED / "brw_stats-inflight-log2.txt").read_text())
    h = bs.histograms[DISK_IN_FLIGHT]
    assert h.buckets == [1, 2, 4, 8, 16, 32, 64] and h.log2_labels
    assert h.in_flight_value(64) == 48 and h.in_flight_value(1) == 1
    assert bs.skipped == []


def test_linear_in_flight_labels_stay_linear():
    text = (CONSTRUCTED / "brw_stats-inflight-log2.txt").read_text()
    linear = text.replace("4:\t\t         0   0   0   |   30", "3:\t\t         0   0   0   |   30")
    linear = "\n".join(ln for ln in linear.splitlines()
                       if not ln.startswith(("8:", "16:", "32:", "64:")))
    h = parse_brw_stats(linear).histograms[DISK_IN_FLIGHT]
    assert h.buckets == [1, 2, 3] and not h.log2_labels and h.in_flight_value(3) == 3
