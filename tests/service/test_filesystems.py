"""Two file systems with the same OST indices stay apart: state keyed by (fsname, index),
one store and one learned state per file system; a request for a file system the mapper does
not serve is refused (ENODEV), over a real broker and the real request socket."""
from __future__ import annotations

import dataclasses
import errno
import time

import pytest
import zmq

from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.mapper.service.client import MapperClient, MapperError
from lustre_alloc.mapper.service.fs_context import gated_policy
from prometheus_client import generate_latest
from lustre_alloc.mapper.state.state_store import StateStore

from .conftest import make_service
from tests.support import wait_for

pytestmark = pytest.mark.timeout(60)
KIB = 1 << 30


def ost(fs: str, index: int, kib_avail: int, available: bool = True) -> tuple[str, dict]:
    return f"{fs}-OST{index:04x}", {
        "kind": "ost", "index": index, "fsname": fs, "available": available, "jobs": [],
        "unavailable": {}, "values": {"kbytes_total": KIB, "kbytes_free": kib_avail,
                                      "kbytes_avail": kib_avail, "files_free": 1 << 20}}


def body(*targets: tuple[str, dict]) -> dict:
    return {"server": {"values": {"cpu_percent": 5.0}, "unavailable": {}},
            "targets": dict(targets)}


def test_same_indices_of_two_file_systems_do_not_overwrite_each_other():
    scratch, home = StateStore(fsname="scratch"), StateStore(fsname="home")
    sample = body(ost("scratch", 0, KIB // 2), ost("home", 0, KIB // 8),
                  ost("home", 1, KIB // 4))
    for store in (scratch, home):
        store.apply("oss", "oss0", 100.0, 5.0, sample["server"], sample["targets"])
    assert [(o.index, o.kbytes_avail) for o in scratch.snapshot.osts] == [(0, KIB // 2)]
    assert [(o.index, o.kbytes_avail) for o in home.snapshot.osts] == [(0, KIB // 8),
                                                                        (1, KIB // 4)]
    assert (scratch.foreign_targets, home.foreign_targets) == (2, 1)
    # a store not told its fsname adopts the first OST sample's and keeps the others out
    adopted = StateStore()
    adopted.apply("oss", "oss0", 100.0, 5.0, sample["server"], sample["targets"])
    assert adopted.fsname == "scratch" and len(adopted.snapshot.osts) == 1
    # older samples without the field: the fsname comes from the target name
    name, target = ost("home", 3, KIB)
    del target["fsname"]
    home.apply("oss", "oss1", 101.0, 5.0, {"values": {}}, {name: target})
    assert [o.index for o in home.snapshot.osts] == [0, 1, 3]


def test_mapper_serves_its_file_systems_only():
    svc = make_service(policy="round_robin", fsnames=["scratch", "home"], embed_broker=True,
                       broker_frontend="tcp://127.0.0.1:*",
                       broker_backend_bind="tcp://127.0.0.1:*",
                       broker_snapshot_bind="tcp://127.0.0.1:*")
    ctx = zmq.Context()
    pub = Publisher(svc.broker_endpoints[0], "oss", "oss0", context=ctx)
    try:
        # OST 1 of home is unreadable; OST 1 of scratch is fine: same index, other fs
        sample = body(ost("scratch", 0, KIB // 2), ost("scratch", 1, KIB // 2),
                      ost("home", 0, KIB // 2), ost("home", 1, KIB // 2, available=False),
                      ost("home", 2, KIB // 2))
        with MapperClient(svc.endpoint, timeout_s=2) as c:
            def ready():
                pub.publish(time.time(), 0.2, sample)
                return all(len(s.snapshot.osts) == n for s, n in
                           ((svc.contexts["scratch"].store, 2), (svc.contexts["home"].store, 3)))
            wait_for(ready, what="both file systems' OSTs")
            for _ in range(6):
                assert sorted(c.alloc("ior.1", -1, fsname="scratch").osts) == [0, 1]
                assert sorted(c.alloc("ior.1", -1, fsname="home").osts) == [0, 2]
            with pytest.raises(MapperError) as exc:
                c.alloc("ior.1", 1, fsname="work")
            assert exc.value.errno == errno.ENODEV and "'work'" in str(exc.value)
            with pytest.raises(MapperError) as exc:
                c.alloc("ior.1", 1)
            assert exc.value.errno == errno.EINVAL and "fsname" in str(exc.value)
            assert c.ping()                      # the mapper keeps serving
    finally:
        pub.close()
        svc.stop()
        ctx.destroy(linger=0)


def test_ping_and_gauges_report_each_file_system():
    """A ping names its file system's policy (not the first one's whatever was asked), and
    the MDS CPU / OST / stale gauges carry an ``fsname`` label each."""
    svc = make_service(policy="round_robin", fsnames=["scratch", "home"], embed_broker=True,
                       broker_frontend="tcp://127.0.0.1:*",
                       broker_backend_bind="tcp://127.0.0.1:*",
                       broker_snapshot_bind="tcp://127.0.0.1:*")
    home = svc.contexts["home"]
    home.gate = gated_policy(dataclasses.replace(svc.config, policy="random"), home.store)
    ctx = zmq.Context()
    pub = Publisher(svc.broker_endpoints[0], "oss", "oss0", context=ctx)
    try:
        sample = body(ost("scratch", 0, KIB // 2), ost("home", 0, KIB // 2),
                      ost("home", 1, KIB // 2))
        with MapperClient(svc.endpoint, timeout_s=2) as c:
            def ready():
                pub.publish(time.time(), 0.2, sample)
                return svc.contexts["scratch"].store.ost_count == 1 and home.store.ost_count == 2
            wait_for(ready, what="both file systems' OSTs")
            assert c.ping(fsname="home") == "random"
            assert c.ping(fsname="scratch") == "round_robin"
            with pytest.raises(MapperError) as exc:
                c.ping(fsname="work")
            assert exc.value.errno == errno.ENODEV

            def gauges():
                text = generate_latest(svc.metrics.registry).decode()
                want = ['lustre_alloc_mapper_osts{fsname="scratch",state="all"} 1.0',
                        'lustre_alloc_mapper_osts{fsname="home",state="all"} 2.0',
                        'lustre_alloc_mapper_mds_cpu_ratio{fsname="home"}',
                        'lustre_alloc_mapper_stale_servers{fsname="scratch"}']
                return all(w in text for w in want)
            wait_for(gauges, what="per-file-system gauges")
    finally:
        pub.close()
        svc.stop()
        ctx.destroy(linger=0)
