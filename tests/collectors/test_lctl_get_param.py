"""Splitting real ``lctl get_param`` dumps, and parsing every statistics parameter in them."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import LctlParamError
from lustre_alloc.collectors.readers.brw_stats import parse_brw_stats
from lustre_alloc.collectors.readers.job_stats import parse_job_stats
from lustre_alloc.collectors.readers.kbytes import parse_single_value
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param
from lustre_alloc.collectors.readers.stats_file import parse_stats

from .conftest import DDN, all_ddn_dumps

DUMPS = [p for p in all_ddn_dumps() if p.name not in ("lnetctl_stats.txt", "lnetctl_net_show.txt",
                                                       "mgs-fs.txt")
         and not p.name.startswith("brw_stats_")]


def test_fixture_set_is_the_expected_one():
    assert len(all_ddn_dumps()) == 30


def assert_every_statistics_parameter_parses(dump) -> None:
    """Every stats, md_stats, brw_stats, job_stats and kbytes/files parameter of an
    ``lctl get_param`` dump parses with nothing skipped."""
    params = parse_get_param(dump.read_text(), str(dump))
    assert params.values
    for name, text in params.values.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("stats", "md_stats"):
            snap = parse_stats(text, name)
            assert snap.skipped == [], (name, snap.skipped)
        elif leaf == "brw_stats":
            brw = parse_brw_stats(text, name)
            assert brw.skipped == [] and brw.histograms, name
        elif leaf == "job_stats":
            assert parse_job_stats(text, name).skipped == []
        elif leaf in ("kbytesfree", "kbytestotal", "kbytesavail", "filesfree", "filestotal"):
            assert parse_single_value(text, name) >= 0


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: str(p.relative_to(DDN)))
def test_every_statistics_parameter_of_every_dump_parses(dump):
    assert_every_statistics_parameter_parses(dump)


def test_valid_dump_values():
    dump = parse_get_param((DDN / "valid/valid.txt").read_text())
    assert dump.values["osd-ldiskfs.ai400-OST0000.kbytesfree"] == "3875693364\n"
    assert dump.values["memused"] == "5969573401\n"
    assert dump.matching("osd-*", "kbytestotal") == {"ai400-MDT0000": "110635320\n",
                                                     "ai400-OST0000": "3978095168\n",
                                                     "ai400-OST0001": "3978095168\n"}
    uuid = dump.values["mdt.ai400-MDT0000.exports.0@lo.uuid"].splitlines()
    assert uuid[0] == "52cb8dca-ba5c-4725-9cff-41cd0d45e3e7" and len(uuid) == 4


def test_value_on_the_parameter_line_starts_a_multiline_value():
    dump = parse_get_param((DDN / "valid/valid_mds.txt").read_text())
    snap = parse_stats(dump.values["ost.OSS.ost_io.stats"])
    assert snap.snapshot_time == pytest.approx(1709915907.132154184) and snap.counters == {}


def test_repeated_parameters_keep_the_first_and_are_reported():
    dump = parse_get_param((DDN / "2.14.0_ddn144_mds.txt").read_text())
    assert sum("repeated parameter osd-ldiskfs" in r for _, r in dump.skipped) == 4
    brw = parse_brw_stats(dump.values["osd-ldiskfs.fs-OST0000.brw_stats"])
    assert brw.start_time is not None


def test_dump_without_trailing_newline_keeps_the_last_line():
    dump = parse_get_param((DDN / "valid/valid_no_newline.txt").read_text())
    last = list(dump.values)[-1]
    assert dump.values[last].rstrip().endswith("16 16 16 256")


def test_ddn133_2_14_obdfilter_read_bytes():
    dump = parse_get_param((DDN / "2.14.0_ddn133_quota.txt").read_text())
    rb = parse_stats(dump.values["obdfilter.ai400x2-OST0000.stats"]).counters["read_bytes"]
    assert (rb.samples, rb.sum) == (71482249, 58370831220736)


def test_text_without_parameters_raises():
    with pytest.raises(LctlParamError):
        parse_get_param((DDN / "mgs-fs.txt").read_text())
