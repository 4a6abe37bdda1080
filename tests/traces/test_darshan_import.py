"""Darshan import, checked against counters read straight from PyDarshan."""
from __future__ import annotations

import darshan
import pytest

from lustre_alloc.traces.darshan_import import (DarshanImportError, DarshanLogNotFound,
                                   dxt_write_sizes, example_log_path, import_darshan,
                                   lustre_layouts, resolve_log, shipped_logs)
from lustre_alloc.traces.format import load_trace, validate_trace, write_trace


def _posix(name: str):
    """The POSIX counters of a shipped log, as PyDarshan gives them."""
    # closed at once (records stay in memory): a report left to the garbage collector can
    # deadlock in PyDarshan's __del__ (see lustre_alloc.traces.darshan_import._opened)
    with darshan.DarshanReport(str(example_log_path(name)), read_all=True) as r:
        return r, r.records["POSIX"].to_df()["counters"]


def test_shipped_logs_include_the_ones_the_tests_use():
    logs = shipped_logs()
    for name in ("sample-goodost.darshan", "ior_hdf5_example.darshan", "noposix.darshan",
                 "dxt.darshan", "example.darshan"):
        assert logs[name].is_file()


def test_example_log_path_accepts_name_without_suffix():
    assert example_log_path("sample-goodost") == example_log_path("sample-goodost.darshan")


def test_example_log_path_lists_available_logs_when_missing():
    with pytest.raises(DarshanLogNotFound) as err:
        example_log_path("no-such-log")
    assert "no-such-log" in str(err.value) and "sample-goodost.darshan" in str(err.value)


def test_goodost_ior_log_gives_one_write_per_file_matching_posix_counters():
    report, c = _posix("sample-goodost.darshan")
    res = import_darshan(example_log_path("sample-goodost.darshan"))
    assert res.jobid == "ior.6909118"
    assert len(res.records) == 48 == len(c)
    assert all(r.op == "write" for r in res.records)
    assert sum(r.bytes for r in res.records) == int(c["POSIX_BYTES_WRITTEN"].sum())
    assert sum(r.ops for r in res.records) == int(c["POSIX_WRITES"].sum())
    # ior -t 8m -b 256m -s 4 -F: 1 GiB per file in 128 writes of 8 MiB
    assert {(r.bytes, r.ops) for r in res.records} == {(1 << 30, 128)}


def test_goodost_layouts_are_stripe_count_1_over_a_24_ost_file_system():
    layouts = lustre_layouts(example_log_path("sample-goodost.darshan"))
    assert len(layouts) == 48
    assert {(l.stripe_count, l.stripe_size) for l in layouts.values()} == {(1, 1 << 20)}
    osts = sorted({o for l in layouts.values() for o in l.ost_ids})
    assert osts == list(range(24))  # every OST used twice by 48 files
    res = import_darshan(example_log_path("sample-goodost.darshan"))
    assert {(r.stripe_count, r.stripe_size) for r in res.records} == {(1, 1 << 20)}


def test_vpic_log_without_dxt_uses_counters_and_its_24_stripe_layout():
    report, c = _posix("example.darshan")
    res = import_darshan(example_log_path("example.darshan"))
    (rec,) = res.records
    assert rec.bytes == int(c["POSIX_BYTES_WRITTEN"].sum())
    assert rec.ops == int(c["POSIX_WRITES"].sum())
    assert rec.stripe_count == 24
    f = report.records["POSIX"].to_df()["fcounters"]
    assert rec.timestamp_s == pytest.approx(float(f["POSIX_F_WRITE_START_TIMESTAMP"][0]))
    assert any(n.startswith("DXT_POSIX: module absent") for n in res.notes)


def test_ior_hdf5_log_uses_dxt_segments_matching_posix_operation_counts():
    report, c = _posix("ior_hdf5_example.darshan")
    segs = report.records["DXT_POSIX"].to_numpy()
    n_w = sum(len(s["write_segments"]) for s in segs)
    n_r = sum(len(s["read_segments"]) for s in segs)
    assert (n_w, n_r) == (int(c["POSIX_WRITES"].sum()), int(c["POSIX_READS"].sum()))
    res = import_darshan(example_log_path("ior_hdf5_example.darshan"))
    assert res.jobid == "ior.32324925"
    assert sum(r.ops for r in res.records if r.op == "write") == n_w
    assert sum(r.ops for r in res.records if r.op == "read") == n_r
    assert sum(r.bytes for r in res.records if r.op == "write") == int(c["POSIX_BYTES_WRITTEN"].sum())
    assert sum(r.bytes for r in res.records if r.op == "read") == int(c["POSIX_BYTES_READ"].sum())
    (layout,) = res.layouts.values()
    assert (layout.stripe_size, layout.stripe_count, layout.ost_ids) == (1 << 20, 1, (106,))


def test_aggregate_zero_keeps_one_record_per_dxt_segment():
    res = import_darshan(example_log_path("ior_hdf5_example.darshan"), aggregate_s=0)
    assert len(res.records) == 23 + 36
    assert all(r.ops == 1 for r in res.records)


def test_dxt_write_sizes_are_per_rank_sequences_summing_to_bytes_written():
    report, c = _posix("ior_hdf5_example.darshan")
    sizes = dxt_write_sizes(example_log_path("ior_hdf5_example.darshan"))
    assert sorted(k.split(":", 1)[0] for k in sizes) == ["0", "1", "2", "3"]
    assert all(k.endswith(":/global/cscratch1/sd/ssnyder/test123.h5") for k in sizes)
    assert sum(map(sum, sizes.values())) == int(c["POSIX_BYTES_WRITTEN"].sum())
    assert sizes["0:/global/cscratch1/sd/ssnyder/test123.h5"][:4] == [262144] * 4


def test_dxt_write_sizes_of_a_log_without_dxt_is_empty():
    assert dxt_write_sizes(example_log_path("sample-goodost.darshan")) == {}


def test_log_without_posix_or_dxt_imports_empty_and_says_so():
    res = import_darshan(example_log_path("noposix.darshan"))
    assert res.records == []
    assert len(res.layouts) == 519
    assert any(n.startswith("POSIX: module absent") for n in res.notes)
    assert any(n.startswith("DXT_POSIX: module absent") for n in res.notes)


def test_reads_of_files_not_written_and_without_layout_are_skipped_and_counted():
    res = import_darshan(example_log_path("dxt.darshan"))
    assert any("LUSTRE: module absent" in n for n in res.notes)
    skipped = [n for n in res.notes if n.startswith("reads:")]
    assert skipped and int(skipped[0].split()[1]) > 0
    assert res.jobid == "darshan.1537455"  # the log's exe line is empty


def test_reads_of_preexisting_files_name_their_osts_from_lustre():
    # sample-badost: IOR read phase files have LUSTRE layouts
    report, c = _posix("sample-badost.darshan")
    res = import_darshan(example_log_path("sample-badost.darshan"))
    ost_reads = [r for r in res.records if r.op == "read" and not r.file_id]
    file_reads = [r for r in res.records if r.op == "read" and r.file_id]
    assert all(r.ost is not None for r in ost_reads)
    assert sum(r.bytes for r in ost_reads + file_reads) == int(c["POSIX_BYTES_READ"].sum())
    assert sum(r.bytes for r in res.records if r.op == "write") == int(c["POSIX_BYTES_WRITTEN"].sum())


@pytest.mark.parametrize("name", sorted(shipped_logs()))
def test_every_shipped_log_imports_into_a_valid_trace(tmp_path, name):
    res = import_darshan(example_log_path(name))
    p = tmp_path / "t.csv"
    write_trace(p, res.records)
    s = validate_trace(p)
    assert s.records == len(res.records)
    assert load_trace(p) == res.records


def test_not_a_darshan_log_is_a_clear_error(tmp_path):
    p = tmp_path / "x.darshan"
    p.write_text("hello\n")
    with pytest.raises(DarshanImportError, match=r"x.darshan: not a Darshan 3 log"):
        import_darshan(p)


def test_missing_log_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        import_darshan(tmp_path / "absent.darshan")


def test_resolve_log_prefers_an_existing_path_then_a_shipped_name(tmp_path):
    p = tmp_path / "mine.darshan"
    p.write_bytes(b"3.21\0\0\0\0")
    assert resolve_log(p) == p
    assert resolve_log("sample-goodost.darshan") == example_log_path("sample-goodost")
    with pytest.raises(FileNotFoundError):
        resolve_log(tmp_path / "sub" / "absent.darshan")
