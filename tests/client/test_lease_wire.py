"""The shim's protocol v2 frames against the mapper's own encoder and decoder, on exact
bytes (liblustre_alloc/tests/test_lease_wire.c): what the shim packs the mapper decodes as
meant, and every reply the mapper can send the shim reads as meant."""
from __future__ import annotations

import errno
import subprocess

import msgpack
import pytest

from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.policies.placement import CreateRequest

from .conftest import LIBDIR

PROG = LIBDIR / "tests" / "test_lease_wire"


def _parse(tmp_path, body: bytes) -> dict[str, str]:
    f = tmp_path / "reply"
    f.write_bytes(body)
    p = subprocess.run([PROG, "parse", f], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return dict(kv.split("=", 1) for kv in p.stdout.split())


def test_the_mapper_decodes_what_the_shim_packs(shim_lib):
    p = subprocess.run([PROG, "pack"], capture_output=True, text=True, timeout=30, check=True)
    out = dict(line.split("=", 1) for line in p.stdout.split())
    lease = wire.decode_request(bytes.fromhex(out["lease"]))
    assert (lease.op, lease.id, lease.version, lease.lease_count) == ("lease", 5, 2, 16)
    assert lease.create == CreateRequest("ior.7", 2, 4 << 20, 1 << 30, "flash", "/lustre/run")
    assert lease.owner == wire.Owner(1000, 100, 42)
    release = wire.decode_request(bytes.fromhex(out["release"]))
    assert (release.op, release.released, release.files) == ("release", ((11, 3), (12, 0)), ())
    named = wire.decode_request(bytes.fromhex(out["release_files"]))
    assert (named.released, named.files) == (((11, 3),), ((11, 0, "f.0"), (11, 2, "f.2")))
    assert out["small"] == "0"


def test_the_shim_reads_every_reply_the_mapper_sends(shim_lib, tmp_path):
    got = _parse(tmp_path, wire.encode_lease(9, 77, [(0, 5), (1, 6), (2, 7)], 1 << 20,
                                                  "mcmf", 2000, 3, revoke=[70, 71]))
    assert (got["rc"], got["v"], got["id"], got["lease"], got["lease_ms"]) == \
        ("0", "2", "9", "77", "2000")
    assert got["layouts"] == "0,5;1,6;2,7;" and got["revoke"] == "70,71"
    assert got["policy"] == "mcmf" and got["stripe_size"] == str(1 << 20)
    quota = _parse(tmp_path, wire.encode_lease_error(9, errno.EDQUOT, "quota",
                                                           revoke=[5]))
    assert (quota["rc"], quota["err"], quota["revoke"]) == (str(-errno.EDQUOT), "122", "5")
    shadow = _parse(tmp_path, wire.encode_lease_error(9, errno.EPERM, "shadow",
                                                            per_create=True))
    assert (shadow["per_create"], shadow["rc"]) == ("1", str(-errno.EPERM))
    scope = _parse(tmp_path, wire.encode_lease_error(9, errno.EPERM, "scope",
                                                           retry_ms=2000))
    assert scope["retry_ms"] == "2000"
    released = _parse(tmp_path, wire.encode_released(4, ["ok"]))
    assert released["rc"] == "1"                                  # not a lease answer
    v1 = _parse(tmp_path, wire.encode_error(9, errno.EPROTO, "protocol version 2"))
    assert (v1["v"], v1["rc"]) == ("1", str(-errno.EPROTO))       # a v1 mapper's answer


@pytest.mark.parametrize("change", [
    {"layouts": [[1, 1]]},                  # an OST twice
    {"layouts": [[0xFFFF]]},                # LOV_OFFSET_DEFAULT is "none"
    {"layouts": [list(range(65))]},         # wider than a leased layout may be
    {"layouts": []},
    {"stripe_size": 1000},
    {"lease_ms": 0},
    {"lease": 0},
])
def test_a_malformed_grant_is_never_used(shim_lib, tmp_path, change):
    body = msgpack.unpackb(wire.encode_lease(9, 77, [(0, 5)], 1 << 20, "mcmf", 2000, 3))
    body.update(change)
    got = _parse(tmp_path, msgpack.packb(body))
    assert got["rc"] == str(-errno.EPROTO) and got["layouts"] == ""


def test_garbage_is_not_a_reply(shim_lib, tmp_path):
    for body in (b"\xc1 not msgpack", msgpack.packb([1, 2]), msgpack.packb({"v": 2, "ok": True})):
        assert _parse(tmp_path, body)["rc"] == str(-errno.EPROTO)
