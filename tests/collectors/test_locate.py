"""File locations per Lustre version: 2.10 /proc (real tree), 2.12-2.14 sysfs kbytes, 2.15
debugfs brw_stats with a dangling obdfilter symlink, and 2.11+ debugfs LNet stats."""
from __future__ import annotations

import os

import pytest

from lustre_alloc.common.errors import SourceUnavailable
from lustre_alloc.collectors.locate import Locator, read_source
from lustre_alloc.collectors.readers.brw_stats import parse_brw_stats

from .conftest import DDN, HPE, HPE_PROC, link_tree

OST = "lustrefs-OST0000"


def test_finds_2_10_targets_in_real_tree(hpe_root):
    loc = Locator(hpe_root)
    assert loc.osts() == ["lustrefs-OST0000", "lustrefs-OST0002", "lustrefs-OST0004",
                          "lustrefs-OST0006"]
    assert loc.mdts() == ["lustrefs-MDT0000"]


def test_2_10_brw_stats_comes_from_osd_zfs(hpe_root):
    text, where = Locator(hpe_root).read_target("ost", OST, "brw_stats")
    assert where.endswith("proc/fs/lustre/osd-zfs/lustrefs-OST0000/brw_stats")
    assert parse_brw_stats(text).histograms["pages per bulk r/w"].as_dict("write")[1024] == 4059303


def test_2_10_lnet_stats_and_health_come_from_proc_and_sysfs(hpe_root):
    loc = Locator(hpe_root)
    assert loc.read_server("lnet_stats")[1].endswith("proc/sys/lnet/stats")
    assert loc.read_server("health_check")[0].strip() == "healthy"
    assert loc.read_server("version")[0].strip() == "2.10.1"


def test_2_10_obdfilter_brw_stats_symlink_is_followed(tmp_path):
    # 2.10: obdfilter/T/brw_stats -> ../../osd-zfs/T/brw_stats (built here, not taken from how
    # the fixture folder was copied)
    real = HPE_PROC / "osd-zfs" / OST / "brw_stats"
    osd = tmp_path / "osd-zfs" / OST
    osd.mkdir(parents=True)
    (osd / "brw_stats").write_text(real.read_text())
    link = tmp_path / "obdfilter" / OST / "brw_stats"
    link.parent.mkdir(parents=True)
    os.symlink(f"../../osd-zfs/{OST}/brw_stats", link)
    assert read_source(link) == real.read_text()


def test_dangling_symlink_counts_as_missing(tmp_path):
    link = tmp_path / "obdfilter" / OST / "read_cache_enable"
    link.parent.mkdir(parents=True)
    os.symlink(f"../../osd-zfs/{OST}/read_cache_enable", link)
    with pytest.raises(SourceUnavailable) as info:
        read_source(link)
    assert info.value.reason == "missing" and "dangling" in info.value.detail


def test_text_file_holding_a_link_target_is_just_text(tmp_path):
    # a tree copied without symlink support: the reader does not guess, the parser rejects it
    placeholder = tmp_path / "brw_stats"
    placeholder.write_text(f"../../osd-zfs/{OST}/brw_stats")
    assert read_source(placeholder) == f"../../osd-zfs/{OST}/brw_stats"


def test_2_12_layout_reads_kbytes_from_sysfs(tmp_path):
    src = HPE_PROC / "obdfilter" / OST
    root = link_tree(tmp_path, {
        f"proc/fs/lustre/obdfilter/{OST}/stats": src / "stats",
        f"sys/fs/lustre/obdfilter/{OST}/kbytesfree": src / "kbytestotal",  # distinguishable
        f"proc/fs/lustre/obdfilter/{OST}/kbytesfree": src / "kbytesfree",
        "sys/kernel/debug/lnet/stats": HPE / "proc/sys/lnet/stats",
    })
    loc = Locator(root)
    assert loc.osts() == [OST]
    text, where = loc.read_target("ost", OST, "kbytesfree")
    assert "sys/fs/lustre/obdfilter" in where and int(text) == 47168367616
    assert loc.read_server("lnet_stats")[1].endswith("sys/kernel/debug/lnet/stats")


def test_2_15_layout_reads_brw_stats_from_debugfs_despite_dangling_link(tmp_path):
    root = link_tree(tmp_path, {
        f"sys/kernel/debug/lustre/osd-ldiskfs/{OST}/brw_stats":
            DDN / "brw_stats_with_start_and_elapsed_time.txt",
    })
    dangling = root / f"proc/fs/lustre/obdfilter/{OST}/brw_stats"
    dangling.parent.mkdir(parents=True)
    os.symlink(f"../../osd-ldiskfs/{OST}/brw_stats", dangling)
    loc = Locator(root)
    text, where = loc.read_target("ost", OST, "brw_stats")
    assert "sys/kernel/debug" in where
    assert parse_brw_stats(text).start_time == pytest.approx(1684865295.727058577)
    with pytest.raises(SourceUnavailable) as info:
        read_source(dangling)
    assert info.value.reason == "missing" and info.value.detail == "dangling symlink"


def test_missing_everywhere_reports_missing(tmp_path):
    (tmp_path / f"proc/fs/lustre/obdfilter/{OST}").mkdir(parents=True)
    with pytest.raises(SourceUnavailable) as info:
        Locator(tmp_path).read_target("ost", OST, "kbytesfree")
    assert info.value.reason == "missing"
