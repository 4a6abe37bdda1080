"""A collector that sends garbage, and publishers without an authorised CURVE key: rejected,
counted (broker: dropped / handshake_failures in its heartbeat; mapper:
samples_rejected_total), and every other collector, the broker and the mapper carry on."""
from __future__ import annotations

import time

import msgpack
import pytest
import zmq

from lustre_alloc.common.curve import CurveClient, generate_keys
from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.collectors.schema import HEARTBEAT_TOPIC, encode, topic_for
from lustre_alloc.collectors.subscriber import Subscriber
from lustre_alloc.mapper.service.client import MapperClient
from tests.support import wait_for

pytestmark = pytest.mark.timeout(180)


def heartbeat(backend: str, curve: CurveClient | None = None, timeout_s: float = 10) -> dict:
    """The next broker heartbeat."""
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.linger = 0
    if curve is not None:
        curve.apply(sub)
    sub.setsockopt(zmq.SUBSCRIBE, HEARTBEAT_TOPIC)
    sub.connect(backend)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if sub.poll(200):
                topic, payload = sub.recv_multipart()
                return msgpack.unpackb(payload)
        raise AssertionError("no broker heartbeat")
    finally:
        sub.close(0)


def wait_metric(stack, name: str, at_least: float, timeout_s: float = 20) -> float:
    def reached() -> float | None:
        value = stack.metrics().get(name, 0.0)
        return value if value >= at_least else None
    return wait_for(reached, timeout_s, f"{name} >= {at_least}", poll_s=0.1)


def primary_serves(stack, policy: str) -> None:
    with MapperClient(stack.endpoints.mapper, timeout_s=5.0) as c:
        for _ in range(5):
            lay = c.alloc("check.1", 2)
            assert (lay.policy, lay.fallback) == (policy, "")


def fake_sample_body(index: int) -> dict:
    """A well-formed sample claiming one OST (what an impostor would publish)."""
    return {"server": {"values": {"cpu_percent": 1.0}, "unavailable": {}},
            "targets": {f"demofs-OST{index:04x}": {
                "kind": "ost", "index": index, "available": True, "jobs": [], "unavailable": {},
                "values": {"kbytes_total": 1 << 40, "kbytes_free": 1 << 40,
                           "kbytes_avail": 1 << 40, "files_free": 1 << 30}}}}


def test_garbage_from_a_collector_is_dropped_counted_and_harms_nobody(live):
    lv = live(policy="round_robin")
    stack = lv.stack
    samples_before = stack.metrics()["lustre_alloc_mapper_samples_total"]
    ctx = zmq.Context.instance()
    pub = ctx.socket(zmq.PUB)
    pub.linger = 1000
    pub.connect(stack.endpoints.frontend)
    # the broker's subscription reaches the PUB socket: a foreign topic, sent until the broker
    # counts it dropped (a heartbeat follows each send, so no probe is still in flight)
    dropped_before = heartbeat(stack.endpoints.backend)["dropped"]

    def probe_dropped() -> int:
        pub.send_multipart([b"probe-not-our-topic", b"x"])
        return heartbeat(stack.endpoints.backend)["dropped"] > dropped_before
    wait_for(probe_dropped, 20, "the broker's subscription on a new PUB socket", poll_s=0.0)
    dropped_base = heartbeat(stack.endpoints.backend)["dropped"]
    good = topic_for("oss", "garbler")
    pub.send_multipart([b"not-our-topic", b"x"])                    # broker: dropped
    pub.send_multipart([good, b"a", b"third frame"])                # broker: dropped
    pub.send_multipart([good, b"\x00\xc1\xff garbage"])             # mapper: undecodable
    pub.send_multipart([good, b"\x07" + b"\x00" * 40])              # unknown encoding byte
    pub.send_multipart([good, encode({"schema": 1, "role": "oss"})])  # missing fields
    pub.send_multipart([good, b"\x01not zlib at all"])              # bad zlib
    beat = heartbeat(stack.endpoints.backend)
    deadline = time.monotonic() + 10
    while beat["dropped"] < dropped_base + 2 and time.monotonic() < deadline:
        beat = heartbeat(stack.endpoints.backend)
    assert beat["dropped"] == dropped_base + 2
    assert wait_metric(stack, "lustre_alloc_mapper_samples_rejected_total", 4) == 4
    pub.close()

    # everyone else unaffected: all pieces alive, samples flowing, no new or stale OST,
    # the primary decides
    assert all(p.poll() is None for p in stack.procs.values())
    m = stack.metrics()
    assert m['lustre_alloc_mapper_osts{fsname="demofs",state="all"}'] == 8
    assert m['lustre_alloc_mapper_stale_servers{fsname="demofs"}'] == 0
    wait_metric(stack, "lustre_alloc_mapper_samples_total", samples_before + 8)
    primary_serves(stack, "round_robin")
    hosts: set[str] = set()
    with Subscriber(stack.endpoints.backend, stack.endpoints.snapshot) as sub:
        deadline = time.monotonic() + 20
        while len(hosts) < 4 and time.monotonic() < deadline:
            s = sub.recv(0.5)
            if s is not None and not s.from_cache:
                hosts.add(s.host)
    assert hosts == {"oss0", "oss1", "oss2", "oss3"}


def test_publishers_without_an_authorised_curve_key_are_refused(live, tmp_path):
    lv = live(policy="round_robin", curve=True)
    stack = lv.stack
    keys = stack.keys
    assert keys is not None
    mapper_curve = CurveClient(keys.secret("mapper"), keys.public("broker"))
    base = heartbeat(stack.endpoints.backend, mapper_curve)["handshake_failures"]
    ctx = zmq.Context()
    # no CURVE at all, and a CURVE key the broker has never authorised
    generate_keys(tmp_path / "intruder", "intruder")
    intruders = [Publisher(stack.endpoints.frontend, "oss", "plain", context=ctx),
                 Publisher(stack.endpoints.frontend, "oss", "unknown-key", context=ctx,
                           curve=CurveClient(str(tmp_path / "intruder/intruder.key_secret"),
                                             keys.public("broker")))]
    try:
        def refused() -> dict | None:
            for k, pub in enumerate(intruders):
                pub.publish(time.time(), 0.5, fake_sample_body(90 + k))
            beat = heartbeat(stack.endpoints.backend, mapper_curve)
            return beat if beat["handshake_failures"] - base >= 2 else None
        beat = wait_for(refused, 15, "both intruders' handshakes failing", poll_s=0.0)
        assert beat["cached"] == 4                      # the four real collectors only
    finally:
        for pub in intruders:
            pub.close()
        ctx.destroy(linger=0)
    m = stack.metrics()
    assert m['lustre_alloc_mapper_osts{fsname="demofs",state="all"}'] == 8   # OSTs 90/91 never seen
    assert m['lustre_alloc_mapper_stale_servers{fsname="demofs"}'] == 0
    assert all(p.poll() is None for p in stack.procs.values())
    primary_serves(stack, "round_robin")
    # and a heartbeat subscriber without a key learns nothing
    with pytest.raises(AssertionError, match="no broker heartbeat"):
        heartbeat(stack.endpoints.backend, None, timeout_s=1.5)
