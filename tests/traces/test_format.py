"""The trace format v1: reader, writer, validation, merge."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from lustre_alloc.traces.format import (COLUMNS, MAGIC, TraceFormatError, TraceRecord, format_record,
                           load_trace, merge_traces, read_trace, validate_trace,
                           write_trace)

HEADER = ",".join(COLUMNS)


def _trace(tmp_path: Path, *rows: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text("\n".join([MAGIC, HEADER, *rows]) + "\n", encoding="utf-8")
    return p


def _w(t: float, fid: str = "j/f", b: int = 1 << 20, job: str = "j") -> TraceRecord:
    return TraceRecord(t, "write", job, fid, b, 1, 1 << 20, None, 1)


def test_round_trip_keeps_every_field(tmp_path):
    recs = [TraceRecord(0.0, "write", "ior.1", "ior.1/f0", 67108864, 4, 1 << 20, None, 64),
            TraceRecord(1.5, "read", "ior.1", "ior.1/f0", 8192, 0, 0, None, 2),
            TraceRecord(2.0, "read", "hacc.2", "", 4096, 0, 0, 17, 1),
            TraceRecord(3.0, "delete", "ior.1", "ior.1/f0", 0, 0, 0, None, 1)]
    p = tmp_path / "rt.csv"
    assert write_trace(p, recs, comments=["seed=1"]) == 4
    assert load_trace(p) == recs


def test_gzip_trace_round_trips_and_is_compressed(tmp_path):
    recs = [_w(float(i), f"j/f{i}") for i in range(100)]
    p = tmp_path / "t.csv.gz"
    write_trace(p, recs)
    with gzip.open(p, "rt") as fh:
        assert fh.readline().rstrip("\n") == MAGIC
    assert load_trace(p) == recs


def test_writer_puts_comments_after_magic_and_reader_skips_them(tmp_path):
    p = tmp_path / "c.csv"
    write_trace(p, [_w(0.0)], comments=["generator: ior", 'odd "quote, comma'])
    lines = p.read_text().splitlines()
    assert lines[0] == MAGIC
    assert lines[1] == "# generator: ior"
    assert lines[2] == '# odd "quote, comma'
    assert load_trace(p) == [_w(0.0)]


def test_multiline_comment_becomes_several_comment_lines(tmp_path):
    p = tmp_path / "c.csv"
    write_trace(p, [_w(0.0)], comments=["a\nb"])
    assert p.read_text().splitlines()[1:3] == ["# a", "# b"]
    assert load_trace(p) == [_w(0.0)]


def test_ids_with_commas_and_quotes_are_quoted_and_read_back(tmp_path):
    rec = _w(0.0, fid='j:/scratch/a,b "c".h5', job='x,"y')
    p = tmp_path / "q.csv"
    write_trace(p, [rec])
    assert load_trace(p) == [rec]


def test_writer_refuses_line_break_in_file_id():
    with pytest.raises(ValueError, match="file_id"):
        format_record(_w(0.0, fid="a\nb"))


def test_blank_and_comment_lines_are_ignored_and_defaults_apply(tmp_path):
    p = _trace(tmp_path, "", "# note", "0.5,write,j,j/f,10,,,,")
    (rec,) = load_trace(p)
    assert rec == TraceRecord(0.5, "write", "j", "j/f", 10, 1, 1 << 20, None, 1)


def test_stripe_count_zero_means_default_one_and_minus_one_is_kept(tmp_path):
    p = _trace(tmp_path, "0,write,j,a,1,0,,,1", "1,write,j,b,1,-1,,,1")
    assert [r.stripe_count for r in load_trace(p)] == [1, -1]


@pytest.mark.parametrize("row, line_field, reason", [
    ("0,write,j,j/f,12x,1,,,1", "bytes", "not an integer"),
    ("0,write,j,j/f,-5,1,,,1", "bytes", "must be >= 0"),
    ("zero,write,j,j/f,1,1,,,1", "timestamp_s", "not a number"),
    ("nan,write,j,j/f,1,1,,,1", "timestamp_s", "finite"),
    ("-1,write,j,j/f,1,1,,,1", "timestamp_s", "finite and >= 0"),
    ("0,append,j,j/f,1,1,,,1", "op", "unknown op"),
    ("0,write,,j/f,1,1,,,1", "job_id", "empty"),
    ("0,write,j,,1,1,,,1", "file_id", "a write needs a file_id"),
    ("0,write,j,j/f,,1,,,1", "bytes", "a write needs bytes"),
    ("0,write,j,j/f,1,1,,3,1", "ost", "cannot name an OST"),
    ("0,write,j,j/f,1,2001,,,1", "stripe_count", "LOV_MAX_STRIPE_COUNT"),
    ("0,write,j,j/f,1,1,1000,,1", "stripe_size", "must be >= 65536"),
    ("0,write,j,j/f,1,1,100000000,,1", "stripe_size", "multiple of 64 KiB"),
    ("0,write,j,j/f,1,1,,,0", "ops", "must be >= 1"),
    ("0,read,j,,1,,,,1", "file_id", "a file_id or an ost"),
    ("0,delete,j,,,,,,1", "file_id", "a delete needs a file_id"),
    ("0,write,j,j/f,1,1,,", "row", "expected 9 fields, got 8"),
])
def test_reader_names_file_line_and_field_for_each_bad_value(tmp_path, row, line_field, reason):
    p = _trace(tmp_path, "0,write,j,ok,1,1,,,1", row)
    with pytest.raises(TraceFormatError) as err:
        load_trace(p)
    e = err.value
    assert (e.path, e.line, e.field) == (str(p), 4, line_field)
    assert str(e).startswith(f"{p}:4: {line_field}: ")
    assert reason in e.reason


def test_reader_names_the_line_where_time_goes_backwards(tmp_path):
    p = _trace(tmp_path, "5,write,j,a,1,1,,,1", "# c", "4,write,j,b,1,1,,,1")
    with pytest.raises(TraceFormatError, match=r":5: timestamp_s: goes backwards"):
        load_trace(p)


def test_missing_magic_is_line_one(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text(HEADER + "\n0,write,j,a,1,1,,,1\n")
    with pytest.raises(TraceFormatError, match=r"m.csv:1: magic: expected"):
        load_trace(p)


def test_wrong_header_is_reported_with_its_line(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text(f"{MAGIC}\n# c\ntime,op\n")
    with pytest.raises(TraceFormatError, match=r"h.csv:3: header: expected timestamp_s"):
        load_trace(p)


def test_missing_header_is_an_error(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text(MAGIC + "\n# only a comment\n")
    with pytest.raises(TraceFormatError, match="header: missing"):
        load_trace(p)


def test_load_trace_returns_nothing_half_loaded(tmp_path):
    p = _trace(tmp_path, "0,write,j,a,1,1,,,1", "1,write,j,b,1,1,,,1", "2,write,j,c,x,1,,,1")
    streamed = []
    with pytest.raises(TraceFormatError):
        for r in read_trace(p):
            streamed.append(r)
    assert len(streamed) == 2  # the streaming reader had yielded the good lines
    result = None
    with pytest.raises(TraceFormatError):
        result = load_trace(p)
    assert result is None


def test_validate_counts_ops_bytes_and_jobs(tmp_path):
    p = _trace(tmp_path, "0,write,a,a/f,100,1,,,1", "1,read,a,a/f,40,,,,1",
               "2,read,b,,60,,,3,1", "3,delete,a,a/f,,,,,1")
    s = validate_trace(p)
    assert (s.records, s.writes, s.reads, s.deletes) == (4, 1, 2, 1)
    assert (s.bytes_written, s.bytes_read) == (100, 100)
    assert (s.first_s, s.last_s, s.jobs) == (0.0, 3.0, frozenset({"a", "b"}))


def test_validate_rejects_delete_of_unknown_file_with_its_line(tmp_path):
    p = _trace(tmp_path, "0,write,a,a/f,1,1,,,1", "1,delete,a,a/g,,,,,1")
    with pytest.raises(TraceFormatError, match=r":4: file_id: delete of 'a/g'"):
        validate_trace(p)


def test_validate_rejects_read_after_delete(tmp_path):
    p = _trace(tmp_path, "0,write,a,a/f,1,1,,,1", "1,delete,a,a/f,,,,,1",
               "2,read,a,a/f,1,,,,1")
    with pytest.raises(TraceFormatError, match=r":5: file_id: read of 'a/f' before"):
        validate_trace(p)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_trace(tmp_path / "nope.csv")


def test_merge_orders_by_time_and_is_stable():
    a = [_w(0.0, "a/1", job="a"), _w(2.0, "a/2", job="a")]
    b = [_w(0.0, "b/1", job="b"), _w(1.0, "b/2", job="b")]
    merged = list(merge_traces([a, b]))
    assert [r.file_id for r in merged] == ["a/1", "b/1", "b/2", "a/2"]


_ident = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20)
_record = st.one_of(
    st.builds(lambda b, sc, ss, n, f, j: TraceRecord(0, "write", j, f, b, sc, ss, None, n),
              st.integers(0, 1 << 50), st.sampled_from([-1, 1, 2, 4, 2000]),
              st.integers(1, 1 << 14).map(lambda k: k * 65536), st.integers(1, 10**9),
              _ident, _ident),
    st.builds(lambda b, ost, n, f, j: TraceRecord(0, "read", j, f if ost is None else "", b,
                                                  0, 0, ost, n),
              st.integers(0, 1 << 50), st.one_of(st.none(), st.integers(0, 5000)),
              st.integers(1, 10**9), _ident, _ident),
    st.builds(lambda f, j: TraceRecord(0, "delete", j, f, 0, 0, 0, None, 1), _ident, _ident),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**12), _record), max_size=15))
def test_any_valid_records_round_trip(tmp_path_factory, items):
    # timestamps are written with microsecond precision: use microsecond values
    items.sort(key=lambda x: x[0])
    recs = [r._replace(timestamp_s=us / 1e6) for us, r in items]
    p = tmp_path_factory.mktemp("rt") / "t.csv"
    write_trace(p, recs)
    assert load_trace(p) == recs
