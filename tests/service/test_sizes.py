"""File sizes at close (protocol v2 ``sizes``): the mapper teaches them to mcmf's chains
under the job id the client's creates are learned under, a malformed message is refused in
one line and changes nothing learned, and a create that announces no size stays unsized
(pricing it at the chain's predicted size changed nothing measurable and was removed:
docs/placement.md)."""
from __future__ import annotations

import errno

import msgpack
import pytest

from lustre_alloc.mapper.policies.mcmf.policy import McmfPolicy
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.client import MapperClient, MapperError
from lustre_alloc.mapper.service.wire import decode_v2

from .conftest import make_service

pytestmark = pytest.mark.timeout(60)
MIB = 1 << 20


@pytest.fixture
def mcmf():
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False)
    yield svc
    svc.stop()


def _app(svc, job: str):
    predictor = svc.policy.primary.predictor
    return predictor.app_info(job)


def test_sizes_teach_the_chain_of_the_job(mcmf):
    with MapperClient(mcmf.endpoint, timeout_s=5) as c:
        c.alloc("ckpt.1", 1)                     # the client's job, as its creates name it
        assert c.sizes("ckpt.1", [64 * MIB] * 6) == 6
    info = _app(mcmf, "ckpt.1")
    assert info is not None and info.requests == 6
    reg = mcmf.metrics.registry
    assert reg.get_sample_value("lustre_alloc_mapper_file_sizes_total",
                                {"result": "learned"}) == 6
    assert reg.get_sample_value("lustre_alloc_mapper_requests_total",
                                {"result": "sizes"}) == 1


def test_a_malformed_sizes_message_is_refused_and_changes_nothing(mcmf):
    with MapperClient(mcmf.endpoint, timeout_s=5) as c:
        for body, what in (({"sizes": []}, "'sizes'"), ({"sizes": [-1]}, "'sizes'"),
                           ({"sizes": ["big"]}, "'sizes'"), ({"sizes": [1] * 1025}, "'sizes'"),
                           ({"sizes": [1 << 63]}, "'sizes'"), ({"job": ""}, "'job'"),
                           ({"job": "j" * (wire.MAX_JOB_BYTES + 1)}, "'job'")):
            msg = {"v": 2, "op": "sizes", "id": 3, "job": "ckpt.1", "sizes": [MIB], **body}
            reply = c.request(msgpack.packb(msg), 3)
            assert not reply["ok"] and reply["errno"] == errno.EINVAL and what in reply["error"]
            assert "\n" not in reply["error"]
        assert c.ping() == "mcmf"                                   # still serving
    assert _app(mcmf, "ckpt.1") is None                             # nothing learned


def test_a_policy_without_chains_learns_nothing():
    svc = make_service(static_cluster="4x2", policy="round_robin")
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            assert c.sizes("ckpt.1", [MIB, MIB]) == 0
        assert svc.metrics.registry.get_sample_value(
            "lustre_alloc_mapper_file_sizes_total", {"result": "ignored"}) == 2
    finally:
        svc.stop()


def test_wire_round_trip():
    req = decode_v2(msgpack.unpackb(wire.encode_sizes_request(4, "ior.7", [1, 2, 3], "scratch")),
                    4)
    assert (req.op, req.job, req.sizes, req.fsname) == ("sizes", "ior.7", (1, 2, 3), "scratch")


def test_sizes_learned_at_close_do_not_price_an_unsized_create():
    from lustre_alloc.mapper.policies.registry import build_policy
    from tests.mapper.test_mcmf import cluster
    snap = cluster()
    policy = build_policy("mcmf", {}, gate=False)
    assert isinstance(policy, McmfPolicy)
    assert policy.learn_sizes("ckpt.1", [256 * MIB] * 8) == 8
    policy.allocate_batch(snap, [CreateRequest("ckpt.1", 2, MIB)])
    assert sum(policy.predicted_load().values()) == pytest.approx(2 * MIB, rel=0.05)
    # an announced size is learned; an unsized create teaches nothing
    n = policy.predictor.app_info("ckpt.1").requests
    policy.allocate_batch(snap, [CreateRequest("ckpt.1", 2, MIB, expected_bytes=3 * MIB),
                                 CreateRequest("ckpt.1", 2, MIB)])
    assert policy.predictor.app_info("ckpt.1").requests == n + 1
