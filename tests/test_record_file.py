"""lustre_alloc/common/record_file.py: the one parser of the shim's record file."""
from __future__ import annotations

import pytest

from lustre_alloc.common.record_file import RECORD_KEYS, RecordFileError, RecordTail, parse_line, read_records


def _line(**over: str) -> str:
    fields = {k: "x" for k in RECORD_KEYS} | over
    return "\t".join(f"{k}={v}" for k, v in fields.items())


def test_encoded_fields_are_decoded_and_the_others_kept():
    rec = parse_line(_line(path="/d/a%09b%25", job="ior%0A1", osts="1,2", reason="x%7F"))
    assert tuple(rec) == RECORD_KEYS
    assert (rec["path"], rec["job"], rec["reason"]) == ("/d/a\tb%", "ior\n1", "x\x7f")
    assert rec["osts"] == "1,2"


def test_a_malformed_line_is_named():
    with pytest.raises(RecordFileError, match="without key=value"):
        parse_line("v=1\tgarbage")


def test_tail_returns_complete_new_lines_and_skips_bad_ones(tmp_path):
    path = tmp_path / "rec.tsv"
    tail = RecordTail(path)
    assert tail.read() == []                         # not created yet
    path.write_text(_line(path="/a") + "\nnot a record\n" + _line(path="/b"))   # last partial
    assert [r["path"] for r in tail.read()] == ["/a"] and tail.skipped == 1
    with open(path, "a") as fh:
        fh.write("\n")
    assert [r["path"] for r in tail.read()] == ["/b"]
    with pytest.raises(RecordFileError):
        read_records(path)                           # the whole-file reader is strict
