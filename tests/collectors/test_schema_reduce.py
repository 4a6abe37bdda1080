"""Message schema v1 round trip and checks; reduction helpers."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import SchemaError
from lustre_alloc.collectors.reduce import CounterReset, choose_interval, histogram_delta, summarize_log2
from lustre_alloc.collectors.schema import decode, encode, make_sample, topic_for

BODY = {"server": {"values": {"cpu_percent": 3.5}, "unavailable": {}},
        "targets": {"fs-OST0000": {"kind": "ost", "index": 0, "available": True,
                                    "values": {"kbytes_free": 47029440512}, "jobs": [],
                                    "unavailable": {}}}}


@pytest.mark.parametrize("compress", [False, True])
def test_round_trip_keeps_values(compress):
    msg = make_sample(role="oss", host="oss1", epoch=7, seq=3, time=10.0, interval_s=5.0, body=BODY)
    payload = encode(msg, compress)
    assert payload[0] == (1 if compress else 0)
    assert decode(payload) == msg
    assert topic_for("oss", "oss1") == b"lustre-alloc.v1.oss.oss1"


@pytest.mark.parametrize("change", [{"schema": 2}, {"role": "client"}, {"seq": "1"}, {"seq": True}])
def test_wrong_fields_raise_schema_error(change):
    msg = make_sample(role="oss", host="h", epoch=1, seq=1, time=1.0, interval_s=5.0, body=BODY)
    msg.update(change)
    with pytest.raises(SchemaError):
        decode(encode(msg))


def test_missing_field_and_unknown_encoding_raise():
    with pytest.raises(SchemaError):
        decode(encode({"schema": 1}))
    with pytest.raises(SchemaError):
        decode(b"\x07abc")


def test_log2_summary_uses_bucket_midpoints_and_upper_bounds():
    s = summarize_log2({1: 10, 2: 0, 4: 80, 8: 9, 16: 1})
    assert s.count == 100 and s.p50 == 4 and s.p99 == 8 and s.max == 16
    assert s.mean == pytest.approx((10 * 0.5 + 80 * 3 + 9 * 6 + 1 * 12) / 100)
    assert summarize_log2({4: 0}) is None


def test_histogram_delta_detects_a_cleared_histogram():
    assert histogram_delta("h", {1: 2}, {1: 5, 2: 1}) == {1: 3, 2: 1}
    with pytest.raises(CounterReset):
        histogram_delta("h", {1: 5}, {1: 2})
    with pytest.raises(CounterReset):
        histogram_delta("h", {1: 5, 2: 3}, {1: 5})


def test_interval_prefers_snapshot_time_when_plausible():
    assert choose_interval(100.0, 105.0, 5.02) == 5.0
    assert choose_interval(100.0, 100.0, 5.02) == 5.02    # replayed file
    assert choose_interval(100.0, 9000.0, 5.0) == 5.0     # clock jump
    assert choose_interval(None, 105.0, 4.0) == 4.0
