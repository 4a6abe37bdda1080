"""The mapper over real sockets on a static emulated cluster: valid layouts for concurrent
clients (threads and processes), bad requests answered with errors while everyone else is
served, batching, the CPU gate and the last-line placement check."""
from __future__ import annotations

import errno
import multiprocessing
import threading

import msgpack
import pytest
import zmq

from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.client import MapperClient, MapperError, MapperTimeout
from lustre_alloc.mapper.state.cluster_state import OstFlag
from lustre_alloc.mapper.policies.placement import Placement
from lustre_alloc.mapper.service.server import MapperService
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.mapper.service.config import load_config

from .conftest import make_service

pytestmark = pytest.mark.timeout(60)


def assert_valid(osts, stripe_count, ost_count=8, allowed=None):
    allowed = set(range(ost_count)) if allowed is None else allowed
    assert len(osts) == (len(allowed) if stripe_count == -1 else min(stripe_count, len(allowed)))
    assert len(set(osts)) == len(osts) and set(osts) <= allowed


def test_alloc_returns_distinct_osts_in_stripe_order(static_service):
    with MapperClient(static_service.endpoint) as c:
        assert c.ping() == "round_robin"
        for count in (1, 2, 4, 8, -1):
            layout = c.alloc("ior.1", count, 1 << 20, expected_bytes=1 << 30, path="/l/f")
            assert_valid(layout.osts, count)
            assert layout.stripe_size == 1 << 20 and layout.policy == "round_robin"
            assert layout.fallback == ""


def _thread_worker(endpoint, n, out, errors):
    try:
        with MapperClient(endpoint, timeout_s=5) as c:
            for i in range(n):
                count = 1 + i % 8
                out.append((count, c.alloc(f"job{threading.get_ident()}", count, 65536 * (1 + i % 4))))
    except Exception as exc:  # noqa: BLE001
        errors.append(exc)


def test_concurrent_thread_clients_all_get_valid_layouts(static_service):
    out, errors = [], []
    threads = [threading.Thread(target=_thread_worker, args=(static_service.endpoint, 200, out, errors))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and len(out) == 1600
    for count, layout in out:
        assert_valid(layout.osts, count)


def _process_worker(endpoint, job, n, queue):
    with MapperClient(endpoint, timeout_s=5, context=zmq.Context()) as c:
        res = []
        for i in range(n):
            count = 1 + (i * 3) % 8
            res.append((count, c.alloc(job, count).osts))
        queue.put(res)


def test_concurrent_process_clients_all_get_valid_layouts(static_service):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_worker, args=(static_service.endpoint, f"app{p}", 150, queue))
             for p in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=40) for _ in procs]
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    assert sum(len(r) for r in results) == 600
    for r in results:
        for count, osts in r:
            assert_valid(osts, count)
    assert static_service.rounds.count <= 600


def test_requests_arriving_together_are_solved_in_shared_rounds():
    ids = list(range(1000, 1064))
    svc = make_service(static_cluster="4x2", policy="round_robin", batch_window_s=0.02)
    with MapperClient(svc.endpoint) as c:
        for rid in ids:
            c.socket.send_multipart([b"", wire.encode_request(rid, "burst", 2, 65536)])
        replies = [c.recv_reply(None, timeout_s=5) for _ in ids]
    svc.stop()
    assert sorted(r["id"] for r in replies) == ids and all(r["ok"] for r in replies)
    assert svc.rounds.count < len(ids)                 # several requests per round


BAD_FRAMES = [
    ([b"", b"\xc1\xc1"], errno.EPROTO),
    ([b"", msgpack.packb("a string")], errno.EPROTO),
    ([b"", msgpack.packb({"v": 1, "op": "alloc", "id": 5, "job": "j", "stripe_count": 0,
                          "stripe_size": 65536})], errno.EINVAL),
    ([b"", msgpack.packb({"v": 1, "op": "alloc", "id": 5, "job": "j", "stripe_count": 99,
                          "stripe_size": 65536})], errno.EINVAL),
    ([b"", msgpack.packb({"v": 1, "op": "alloc", "id": 5, "job": "j", "stripe_count": 2,
                          "stripe_size": 65536, "expected_bytes": -5})], errno.EINVAL),
    ([b"", msgpack.packb({"v": 1, "op": "alloc", "id": 5, "stripe_count": 2,
                          "stripe_size": 65536})], errno.EINVAL),
    ([b"", b"\x80" + b"x" * 70_000], errno.EMSGSIZE),
    ([b"", b"body", b"extra frame"], errno.EPROTO),
    ([b"no delimiter"], errno.EPROTO),
]


@pytest.mark.parametrize("frames, err", BAD_FRAMES)
def test_bad_request_gets_an_error_reply_and_others_are_still_served(static_service, frames, err):
    with MapperClient(static_service.endpoint) as bad, MapperClient(static_service.endpoint) as good:
        bad.send_frames(frames)
        reply = bad.recv_reply(None)
        assert reply["ok"] is False and reply["errno"] == err and reply["error"]
        assert_valid(good.alloc("fine", 3).osts, 3)
        assert_valid(bad.alloc("fine", 3).osts, 3)   # the same client recovers too


def test_unknown_pool_is_einval_and_pool_members_only(tmp_path):
    svc = make_service(static_cluster="4x2", policy="random", pools={"fast": [1, 3, 5]})
    try:
        with MapperClient(svc.endpoint) as c:
            with pytest.raises(MapperError) as info:
                c.alloc("j", 2, pool="nope")
            assert info.value.errno == errno.EINVAL and "nope" in info.value.reason
            for _ in range(20):
                assert_valid(c.alloc("j", 2, pool="fast").osts, 2, allowed={1, 3, 5})
            assert_valid(c.alloc("j", -1, pool="fast").osts, -1, allowed={1, 3, 5})
    finally:
        svc.stop()


def test_no_cluster_state_yet_is_eagain():
    cfg = load_config(None, {"bind": "tcp://127.0.0.1:*", "policy": "round_robin"})
    svc = MapperService(cfg, store=StateStore())
    svc._open_state_feed = lambda: None          # no broker: the store stays empty
    svc.start()
    try:
        with MapperClient(svc.endpoint) as c:
            assert c.ping() == "round_robin"
            with pytest.raises(MapperError) as info:
                c.alloc("j", 1)
            assert info.value.errno == errno.EAGAIN
    finally:
        svc.stop()


def test_mds_cpu_at_limit_falls_back_and_recovers(static_service):
    with MapperClient(static_service.endpoint) as c:
        assert c.alloc("j", 2).fallback == ""
        static_service.store.mds_cpu_override = 70.0
        layout = c.alloc("j", 2)
        assert (layout.policy, layout.fallback) == ("lustre_qos", "mds_cpu")
        assert_valid(layout.osts, 2)
        static_service.store.mds_cpu_override = 69.9
        assert c.alloc("j", 2).fallback == ""
    assert static_service.policy.fallbacks["mds_cpu"] == 1


def test_unusable_osts_are_never_handed_out(static_service):
    osts = static_service.store.snapshot.osts
    osts[0].active = False
    osts[3].flags = OstFlag.ENOSPC
    osts[6].flags = OstFlag.READONLY
    static_service.store.version += 1
    static_service.store.snapshot.changed()
    with MapperClient(static_service.endpoint) as c:
        for count in (1, 3, 5, -1):
            for _ in range(5):
                assert_valid(c.alloc("j", count).osts, count, allowed={1, 2, 4, 5, 7})


class Broken:
    """A primary that answers with an unusable, duplicated OST list."""
    name = "broken"

    def allocate(self, snapshot, request):
        return Placement((0, 0, 99), self.name)


def test_invalid_primary_answer_is_replaced_by_the_fallback_and_counted(static_service):
    static_service.policy.primary = Broken()
    with MapperClient(static_service.endpoint) as c:
        layout = c.alloc("j", 3)
    assert (layout.policy, layout.fallback) == ("lustre_qos", "check")
    assert_valid(layout.osts, 3)
    assert static_service.path.check_violations == 1
    assert static_service.metrics.check_violations._value.get() == 1


class Crashing:
    name = "crashing"

    def allocate(self, snapshot, request):
        raise RuntimeError("solver bug")


def test_primary_crash_falls_back_with_reason_error(static_service):
    static_service.policy.primary = Crashing()
    with MapperClient(static_service.endpoint) as c:
        layout = c.alloc("j", 2)
        assert layout.fallback == "error"
        assert_valid(layout.osts, 2)
        assert c.ping() == "round_robin"


def test_client_times_out_when_nothing_listens():
    with MapperClient("tcp://127.0.0.1:1", timeout_s=0.1) as c:
        with pytest.raises(MapperTimeout):
            c.alloc("j", 1)
