"""Composite (PFL) layouts on the mapper: one OST list per component
with OST objects, each decided and booked with the file's bytes inside its extent; a file
whose component cannot be placed is refused whole and leaves nothing booked."""
from __future__ import annotations

import errno

import msgpack
import pytest

from lustre_alloc.mapper.service.client import MapperClient, MapperError
from lustre_alloc.mapper.service.wire import WireError
from lustre_alloc.mapper.service.wire import decode_request
from lustre_alloc.mapper.service.wire import LUSTRE_EOF, Component, Extent, encode_composite_request

from .conftest import make_service

MIB, GIB = 1 << 20, 1 << 30
pytestmark = pytest.mark.timeout(60)

# lfs setstripe -E 1M -c 1 -E 1G -c 4 -E -1 -c 8 (the lfs-setstripe(1) PFL example's shape)
PFL3 = [Component(0, MIB, 1), Component(MIB, GIB, 4), Component(GIB, LUSTRE_EOF, 8)]


@pytest.fixture
def mcmf():
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False,
                       pools={"flash": [0, 1, 2, 3]})
    yield svc
    svc.stop()


def _booked(svc) -> float:
    with svc.lock:
        return sum(svc.policy.primary.pending.bytes_by_ost().values())


def test_each_component_gets_its_own_list_booked_with_the_bytes_inside_its_extent(mcmf):
    with MapperClient(mcmf.endpoint, timeout_s=5) as c:
        got = c.alloc_composite("app.1", PFL3, expected_bytes=4 * GIB, path="/lustre/run/f")
    assert [len(osts) for osts in got.layouts] == [1, 4, 8]
    assert all(len(set(osts)) == len(osts) for osts in got.layouts)
    assert got.policy == "mcmf" and got.fallback == ""
    # 1 MiB + (1 GiB - 1 MiB) + 3 GiB: the whole file, each part where it goes
    assert _booked(mcmf) == pytest.approx(4 * GIB)
    assert mcmf.metrics.requests.labels("ok")._value.get() == 1


def test_a_small_file_books_only_the_components_it_reaches(mcmf):
    with MapperClient(mcmf.endpoint, timeout_s=5) as c:
        got = c.alloc_composite("app.1", PFL3, expected_bytes=512 * 1024)
    assert [len(osts) for osts in got.layouts] == [1, 4, 8]
    # 512 KiB in the first component; the others hold nothing yet and book one
    # stripe size per stripe (the policy's rule for a create of unknown size)
    assert _booked(mcmf) == pytest.approx(512 * 1024 + 12 * MIB)


def test_component_pools_are_kept_and_a_component_that_cannot_be_placed_refuses_the_file(mcmf):
    comps = [Component(0, 64 * MIB, 2, pool="flash"), Component(64 * MIB, LUSTRE_EOF, 4)]
    with MapperClient(mcmf.endpoint, timeout_s=5) as c:
        got = c.alloc_composite("app.1", comps, expected_bytes=GIB)
        assert set(got.layouts[0]) <= {0, 1, 2, 3}
        before = _booked(mcmf)
        with pytest.raises(MapperError) as refused:
            c.alloc_composite("app.1", [comps[0], Component(64 * MIB, LUSTRE_EOF, 2,
                                                            pool="nosuch")])
        assert refused.value.errno == errno.EINVAL and "nosuch" in refused.value.reason
        # the placed first component came off the books with the file
        assert _booked(mcmf) == pytest.approx(before)
        assert c.ping() == "mcmf"


def test_shadow_mode_and_a_scope_pool_rule_leave_composite_files_to_lustre():
    for scope, why in (({"shadow": True}, "composite"), ({"pools": ["flash"]}, "pool")):
        svc = make_service(static_cluster="4x2", policy="round_robin",
                           pools={"flash": [0, 1, 2, 3]}, scope=scope)
        try:
            with MapperClient(svc.endpoint, timeout_s=5) as c:
                comps = [Component(0, MIB, 1, pool="flash"), Component(MIB, LUSTRE_EOF, 2)]
                with pytest.raises(MapperError) as left:
                    c.alloc_composite("app.1", comps)
                assert left.value.errno == errno.EPERM and why in left.value.reason
        finally:
            svc.stop()


@pytest.mark.parametrize("change, field", [
    ({"components": []}, "'components'"),
    ({"components": [{"start": 0, "end": MIB}]}, "components[0].stripe_count"),
    ({"components": [{"start": 0, "end": 1000, "stripe_count": 1, "stripe_size": MIB}]},
     "components[0] extent"),
    ({"components": [{"start": 0, "end": 2 * MIB, "stripe_count": 1, "stripe_size": MIB},
                     {"start": MIB, "end": LUSTRE_EOF, "stripe_count": 1,
                      "stripe_size": MIB}]}, "components[1] starts"),
    ({"components": [{"start": 0, "end": MIB, "stripe_count": 9, "stripe_size": MIB}]},
     "stripe_count 9"),
    ({"components": [{"start": 0, "end": MIB, "stripe_count": 1, "stripe_size": 1000}]},
     "components[0].stripe_size"),
    ({"components": [{"start": 0, "end": MIB, "stripe_count": 1, "stripe_size": MIB,
                      "pool": 7}]}, "components[0].pool"),
    ({"job": ""}, "'job'"),
])
def test_a_malformed_composite_request_names_its_field_and_the_mapper_keeps_serving(
        static_service, change, field):
    body = msgpack.unpackb(encode_composite_request(5, "app.1", PFL3[:1]))
    body.update(change)
    with MapperClient(static_service.endpoint, timeout_s=5) as c:
        reply = c.request(msgpack.packb(body), 5)
        assert not reply["ok"] and reply["errno"] == errno.EINVAL and field in reply["error"]
        assert c.alloc_composite("app.1", PFL3[:2]).layouts


def test_decoding_gives_each_component_the_bytes_inside_its_extent():
    # a DoM component [0, 64K) stays with the client: the first OST component starts there
    comps = [Component(65536, 4 * MIB, 1), Component(4 * MIB, LUSTRE_EOF, 2, pool="p")]
    req = decode_request(encode_composite_request(1, "app.1", comps, expected_bytes=10 * MIB,
                                                  pool="q"), ost_count=8)
    assert req.op == "alloc" and req.version == 2
    assert [c.expected_bytes for c in req.components] == [4 * MIB - 65536, 6 * MIB]
    assert [c.pool for c in req.components] == ["q", "p"]     # the file's pool by default
    assert req.extents == (Extent(65536, 4 * MIB), Extent(4 * MIB, LUSTRE_EOF))
    with pytest.raises(WireError):
        decode_request(encode_composite_request(1, "app.1", comps[:1] * 40))
