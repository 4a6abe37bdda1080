"""job_stats reader: 2.10.1 OST and MDT files, 2.14 empty tables, 2.15/2.16/master variants."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import JobStatsError
from lustre_alloc.collectors.readers.job_stats import parse_job_stats
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param

from .conftest import CONSTRUCTED, DDN, HPE_PROC


def test_reads_2_10_ost_job_stats():
    js = parse_job_stats((HPE_PROC / "obdfilter/lustrefs-OST0000/job_stats").read_text())
    job = js.jobs["24"]
    assert job.snapshot_time == 1510782606
    wb = job.counters["write_bytes"]
    assert (wb.samples, wb.unit, wb.min, wb.max, wb.sum) == (64575, "bytes", 4096, 4194304,
                                                             215147593728)
    assert job.counters["punch"].samples == 1 and job.counters["punch"].unit == "reqs"
    assert js.jobs["26"].counters["write_bytes"].sum == 185838792704
    assert js.skipped == []
    assert len(js.jobs) == (HPE_PROC / "obdfilter/lustrefs-OST0000/job_stats").read_text().count("- job_id:")


def test_reads_2_10_mdt_job_stats():
    js = parse_job_stats((HPE_PROC / "mdt/lustrefs-MDT0000/job_stats").read_text())
    assert js.jobs["43"].counters["setattr"].samples == 1
    assert js.jobs["43"].snapshot_time == 1510781837
    assert "crossdir_rename" in js.jobs["43"].counters


def test_reads_2_14_empty_job_stats_from_lctl_dump():
    dump = parse_get_param((DDN / "2.14.0_ddn133_quota.txt").read_text())
    assert parse_job_stats(dump.values["obdfilter.ai400x2-OST0000.job_stats"]).jobs == {}
    assert parse_job_stats(dump.values["mdt.ai400x2-MDT0000.job_stats"]).jobs == {}


# No real 2.15+/master job_stats with jobs is in the fixtures: built from the format in
# lustre-stats-formats.md (lprocfs_jobstats.c).
JOB_2_15 = """job_stats:
- job_id:          dd.0
  snapshot_time:   1700000010.123456789 secs.nsecs
  start_time:      1700000000.000000001 secs.nsecs
  elapsed_time:    10.123456788 secs.nsecs
  read_bytes:      { samples:           0, unit: bytes, min:        0, max:        0, sum:                0, sumsq:                  0 }
  write_bytes:     { samples:          10, unit: bytes, min:     4096, max:  1048576, sum:          5246976, sumsq:      5497558138880 }
  write:           { samples:          10, unit: usecs, min:       20, max:      900, sum:             2000, sumsq:             900000 }
"""
JOB_2_16_HIST = """job_stats:
- job_id:          "ior.1 x"
  snapshot_time:   1700000010.000000000 secs.nsecs
  write_bytes:     { samples:           3, unit: bytes, min:     4096, max:  1048576, sum:          1056768, sumsq:      1099528404992, hist: { 4K: 2, 1M: 1 } }
"""


def test_reads_2_15_secs_nsecs_times_and_sumsq():
    job = parse_job_stats(JOB_2_15).jobs["dd.0"]
    assert job.snapshot_time == pytest.approx(1700000010.123456789)
    assert job.elapsed_time == pytest.approx(10.123456788)
    assert job.counters["write_bytes"].sum == 5246976
    assert job.counters["write"].sumsq == 900000


def test_reads_2_16_hist_and_quoted_master_job_id():
    js = parse_job_stats(JOB_2_16_HIST)
    assert js.jobs["ior.1 x"].counters["write_bytes"].samples == 3
    assert js.skipped == []


def test_reads_2_15_0_unindented_times():
    """2.15.0/2.15.1: lprocfs_stats_header(p, ..., 16, ":", true) inside the list item prints
    the times at column 0 (not YAML: every OST's table was refused)."""
    js = parse_job_stats((CONSTRUCTED / "job_stats-2.15.0.txt").read_text())
    assert set(js.jobs) == {"dd.4854", "ior.1207"}
    job = js.jobs["dd.4854"]
    # the three times read as numbers, consistent with each other
    assert job.snapshot_time - job.start_time == pytest.approx(job.elapsed_time)
    assert job.counters["write_bytes"].sum == 1073741824
    assert js.jobs["ior.1207"].counters["read_bytes"].samples == 16
    assert js.skipped == []


def test_an_empty_2_17_table_prints_nothing_and_reads_as_no_jobs():
    """2.17: the header comes with the first job (OJS_HEADER), an empty table is empty."""
    text = (CONSTRUCTED / "job_stats-2.17-empty.txt").read_text()
    assert text == ""
    assert parse_job_stats(text).jobs == {}


@pytest.mark.parametrize("text", ["jobs:\n- job_id: 1\n", "- job_id: 1\n"])
def test_missing_header_raises_job_stats_error(text):
    with pytest.raises(JobStatsError):
        parse_job_stats(text)


def test_reads_2_16_and_2_17_escaped_quoted_job_ids_and_histograms():
    """2.16.0 and 2.17.0 (lprocfs_jobstats.c lprocfs_jobstats_seq_show()): a job_id with a
    character outside [A-Za-z0-9.@-_:/] is double-quoted with \\xHH escapes, one with ':'
    quoted; read_bytes/write_bytes carry ", hist: { ... }" (empty: "{  }")."""
    js = parse_job_stats((CONSTRUCTED / "job_stats-2.16-2.17.txt").read_text())
    assert set(js.jobs) == {"mpirun a.1207", "slurm:4242", "dd.4854"} and js.skipped == []
    job = js.jobs["mpirun a.1207"]
    assert job.counters["write_bytes"].sum == 64 << 20
    assert job.counters["read_bytes"].samples == 0
    assert job.counters["prealloc"].unit == "usecs"
    assert job.snapshot_time - job.start_time == pytest.approx(job.elapsed_time)
    assert js.jobs["slurm:4242"].counters["write_bytes"].sum == 8 * 4096


def _bump(text: str, job: str, counter: str, by: int) -> str:
    """``text`` with ``job``'s ``counter`` samples raised by ``by`` (a later reading)."""
    head, _, rest = text.partition(f"- job_id:          {job}\n")
    line = next(ln for ln in rest.splitlines() if ln.strip().startswith(f"{counter}:"))
    n = int(line.split("samples:")[1].split(",")[0])
    return head + f"- job_id:          {job}\n" + rest.replace(
        line, line.replace(f"samples: {n:>11},", f"samples: {n + by:>11},"), 1)


def test_mdt_rows_carry_creates_per_s_from_mknod():
    from lustre_alloc.collectors.collector import reduce_jobs
    before_text = (HPE_PROC / "mdt/lustrefs-MDT0000/job_stats").read_text()
    after_text = _bump(_bump(before_text, "44", "mknod", 20), "44", "open", 20)
    values: dict = {}
    rows = reduce_jobs(parse_job_stats(before_text), parse_job_stats(after_text), 5.0, values, {})
    assert [r["job_id"] for r in rows] == ["44"]
    assert rows[0]["creates_per_s"] == pytest.approx(4.0)
    assert rows[0]["ops_per_s"] == pytest.approx(8.0)


def test_ost_rows_have_no_creates():
    from lustre_alloc.collectors.collector import reduce_jobs
    text = (HPE_PROC / "obdfilter/lustrefs-OST0000/job_stats").read_text()
    job = next(iter(parse_job_stats(text).jobs))
    later = _bump(text, job, "punch", 3)
    rows = reduce_jobs(parse_job_stats(text), parse_job_stats(later), 5.0, {}, {})
    assert rows and all("creates_per_s" not in r for r in rows)
