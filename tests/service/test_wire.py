"""The v1 request decoder: every malformed body is a WireError with the right errno and a
reason naming the field; nothing else ever escapes it (hypothesis fuzzing)."""
from __future__ import annotations

import errno

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.policies.placement import CreateRequest

GOOD = {"v": 1, "op": "alloc", "id": 42, "job": "ior.1000", "stripe_count": 4,
        "stripe_size": 1 << 20, "expected_bytes": 1 << 30, "path": "/lustre/a", "pool": None}


def body(**changes) -> bytes:
    d = {**GOOD, **changes}
    return msgpack.packb({k: v for k, v in d.items() if v is not ...}, use_bin_type=True)


def refused(frame: bytes, ost_count: int | None = 8) -> wire.WireError:
    with pytest.raises(wire.WireError) as info:
        wire.decode_request(frame, ost_count)
    return info.value


def test_valid_request_decodes_to_create_request():
    req = wire.decode_request(body(), 8)
    assert req.op == "alloc" and req.id == 42
    assert req.create == CreateRequest(jobid="ior.1000", stripe_count=4, stripe_size=1 << 20,
                                       expected_bytes=1 << 30, pool=None, path="/lustre/a")


def test_optional_fields_default_and_bin_job_is_accepted():
    req = wire.decode_request(body(expected_bytes=..., path=..., pool=..., job=b"job\xff"), 8)
    assert req.create.expected_bytes == 0 and req.create.path == "" and req.create.pool is None
    assert req.create.jobid == "job\\xff"
    assert wire.decode_request(body(stripe_count=-1), 8).create.stripe_count == -1
    assert wire.decode_request(body(pool=""), 8).create.pool is None
    assert wire.decode_request(body(unknown_key=[1, 2]), 8).id == 42


def test_ping_needs_only_version_op_and_id():
    req = wire.decode_request(msgpack.packb({"v": 1, "op": "ping", "id": 7}))
    assert req.op == "ping" and req.id == 7 and req.create is None


@pytest.mark.parametrize("changes, err, words", [
    ({"stripe_count": 0}, errno.EINVAL, "stripe_count 0"),
    ({"stripe_count": -2}, errno.EINVAL, "stripe_count -2"),
    ({"stripe_count": 9}, errno.EINVAL, "exceeds the 8 OSTs"),
    ({"stripe_count": "4"}, errno.EINVAL, "'stripe_count' must be an integer"),
    ({"stripe_count": True}, errno.EINVAL, "'stripe_count' must be an integer"),
    ({"stripe_count": ...}, errno.EINVAL, "missing field 'stripe_count'"),
    ({"stripe_size": 1000}, errno.EINVAL, "stripe_size 1000"),
    ({"stripe_size": 0}, errno.EINVAL, "stripe_size 0"),
    ({"stripe_size": -65536}, errno.EINVAL, "stripe_size -65536"),
    ({"stripe_size": 1 << 32}, errno.EINVAL, "below 4 GiB"),
    ({"stripe_size": 1.5}, errno.EINVAL, "'stripe_size' must be an integer"),
    ({"expected_bytes": -1}, errno.EINVAL, "expected_bytes -1"),
    ({"expected_bytes": 2.0}, errno.EINVAL, "'expected_bytes' must be an integer"),
    ({"job": ...}, errno.EINVAL, "missing field 'job'"),
    ({"job": ""}, errno.EINVAL, "'job' is empty"),
    ({"job": 12}, errno.EINVAL, "'job' must be a string"),
    ({"path": 3}, errno.EINVAL, "'path' must be a string"),
    ({"pool": 3}, errno.EINVAL, "'pool' must be a string"),
    ({"pool": "p" * 16}, errno.EINVAL, "LOV_MAXPOOLNAME"),
    ({"op": "free"}, errno.EINVAL, "'op' must be one of"),
    ({"op": ...}, errno.EINVAL, "'op' must be one of"),
    ({"id": -1}, errno.EINVAL, "'id'"),
    ({"id": "x"}, errno.EINVAL, "'id'"),
    ({"id": ...}, errno.EINVAL, "missing field 'id'"),
    ({"v": 3}, errno.EPROTO, "protocol version 3 (this mapper speaks 1, 2)"),
    ({"v": 2}, errno.EINVAL, "'components'"),        # a v2 alloc is a composite layout
    ({"v": ...}, errno.EPROTO, "missing field 'v'"),
])
def test_bad_field_is_refused_with_errno_and_reason(changes, err, words):
    exc = refused(body(**changes))
    assert exc.errno == err and words in exc.reason
    if "id" not in changes:
        assert exc.request_id == 42  # the reply can still be matched


@pytest.mark.parametrize("frame, err", [
    (b"", errno.EPROTO),
    (b"\xc1", errno.EPROTO),                                  # never-used msgpack byte
    (msgpack.packb([1, 2]), errno.EPROTO),                    # not a map
    (msgpack.packb(GOOD) + b"\x00", errno.EPROTO),            # trailing bytes
    (msgpack.packb(GOOD)[:-3], errno.EPROTO),                 # truncated
    (b"x" * (wire.MAX_FRAME_BYTES + 1), errno.EMSGSIZE),
])
def test_undecodable_or_oversized_frames_are_refused(frame, err):
    assert refused(frame).errno == err


def test_frame_of_exactly_64_kib_is_decoded():
    frame = body(path="p" * 100)
    frame = body(path="p" * (100 + wire.MAX_FRAME_BYTES - len(frame) - 1))  # str16 header
    assert len(frame) == wire.MAX_FRAME_BYTES
    assert wire.decode_request(frame, 8).id == 42


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.floats()
    | st.text(max_size=20) | st.binary(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12) | st.integers(-(1 << 63), (1 << 64) - 1), children,
                      max_size=6),
    max_leaves=20)
field_values = {
    "v": st.sampled_from([1, 1, 1, 0, 2, "1", None]),
    "op": st.sampled_from(["alloc", "alloc", "ping", "", "ALLOC", None]),
    "id": st.integers(-5, (1 << 64) - 1) | msgpack_values,
    "job": st.text(max_size=30) | st.binary(max_size=30) | msgpack_values,
    "stripe_count": st.integers(-3, 12) | msgpack_values,
    "stripe_size": st.sampled_from([65536, 1 << 20, 0, -65536, 65537, 1 << 32]) | msgpack_values,
    "expected_bytes": st.integers(-2, (1 << 64) - 1) | msgpack_values,
    "path": st.text(max_size=30) | msgpack_values,
    "pool": st.none() | st.text(max_size=20) | msgpack_values,
}
requests = st.fixed_dictionaries({}, optional=field_values)


def _check_result(frame: bytes) -> None:
    try:
        req = wire.decode_request(frame, 8)
    except wire.WireError as exc:
        assert exc.errno in (errno.EPROTO, errno.EINVAL, errno.EMSGSIZE)
        assert exc.reason and "\n" not in exc.reason
        assert 0 <= exc.request_id < 1 << 64
        return
    assert req.op in ("alloc", "ping")
    if req.op == "alloc":
        c = req.create
        assert c.jobid and (c.stripe_count == -1 or 1 <= c.stripe_count <= 8)
        assert c.stripe_size > 0 and c.stripe_size % 65536 == 0 and c.expected_bytes >= 0


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.binary(max_size=300))
def test_decoder_only_ever_raises_wire_error_on_random_bytes(frame):
    _check_result(frame)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(requests)
def test_decoder_accepts_exactly_the_valid_field_combinations(fields):
    _check_result(msgpack.packb(fields, use_bin_type=True))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(msgpack_values)
def test_decoder_refuses_any_msgpack_object_that_is_not_a_request(obj):
    _check_result(msgpack.packb(obj, use_bin_type=True))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(0, (1 << 64) - 1), st.text(min_size=1, max_size=40),
       st.integers(1, 8) | st.just(-1), st.integers(1, 4096),
       st.integers(0, (1 << 63) - 1), st.none() | st.text("abcxyz_-", max_size=15))
def test_client_encoding_round_trips_through_the_decoder(rid, job, count, units, nbytes, pool):
    frame = wire.encode_request(rid, job, count, units * 65536, nbytes, "/p", pool)
    req = wire.decode_request(frame, 8)
    assert (req.id, req.create.jobid, req.create.stripe_count, req.create.stripe_size,
            req.create.expected_bytes, req.create.pool) == (rid, job, count, units * 65536,
                                                            nbytes, pool or None)


def test_replies_are_maps_a_client_parses():
    ok = wire.decode_reply(wire.encode_placement(9, (3, 1), 1 << 20, "mcmf", ""))
    assert ok == {"v": 1, "id": 9, "ok": True, "osts": [3, 1], "stripe_size": 1 << 20,
                  "policy": "mcmf", "fallback": ""}
    err = wire.decode_reply(wire.encode_error(9, errno.ENOSPC, "no usable OST"))
    assert err == {"v": 1, "id": 9, "ok": False, "errno": 28, "error": "no usable OST"}
    with pytest.raises(wire.WireError):
        wire.decode_reply(b"\x93\x01\x02\x03")


# The decoder's fast path (well-formed requests, one pass of type checks) must decode
# exactly what the full validation decodes, and refuse (fall back on it) everything else.
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1),
    st.sampled_from([0, 1, 2, -1, 65536, 1 << 20, 3 * 65536 + 1, (1 << 32) - 65536, 1 << 32,
                     (1 << 63) - 1, 1 << 63]),
    st.text(max_size=70), st.binary(max_size=20), st.floats(allow_nan=False),
    st.sampled_from(["alloc", "ping", "", "x" * 64, "é" * 64, "ü" * 128, "fs1", "pool_longer_than_15"]))
_FIELDS = ("v", "op", "id", "job", "stripe_count", "stripe_size", "expected_bytes", "path",
           "pool", "fsname")


def _outcome(fn, frame, ost_count):
    try:
        return fn(frame, ost_count)
    except wire.WireError as exc:
        return ("error", exc.errno, exc.reason, exc.request_id)


@given(changes=st.dictionaries(st.sampled_from(_FIELDS), _VALUES, max_size=4),
       drop=st.sets(st.sampled_from(_FIELDS), max_size=2),
       ost_count=st.sampled_from([None, 8]))
@settings(max_examples=600, deadline=None)
def test_fast_path_decodes_as_the_full_validation(changes, drop, ost_count):
    d = {**GOOD, "fsname": "fs1", **changes}
    for k in drop:
        d.pop(k, None)
    frame = msgpack.packb(d, use_bin_type=True)
    assert _outcome(wire.decode_request, frame, ost_count) == \
        _outcome(wire._decode_checked, frame, ost_count)


def test_fast_path_matches_on_plain_requests():
    for frame in (body(), body(pool="p1"), body(pool=""), body(stripe_count=-1),
                  body(expected_bytes=None), body(path=...), body(expected_bytes=...),
                  wire.encode_request(7, "app", 4, 1 << 20, 1 << 28, fsname="fs1"),
                  wire.encode_request(8, "app", 1, 65536, op="ping")):
        assert wire.decode_request(frame, 8) == wire._decode_checked(frame, 8)
