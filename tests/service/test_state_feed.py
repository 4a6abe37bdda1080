"""Cluster state from the collectors over a real broker: samples become OSTs and OSSes, the
MDS CPU sample drives the gate, silence makes the state stale and the fallback answers;
with a real collector process on the 2.10.1 fixture tree and the mapper in a subprocess."""
from __future__ import annotations

import threading
import time

import pytest
import zmq

from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.mapper.service.client import MapperClient

from .conftest import (PROJECT, PYTHON, free_port, log_events, make_service, spawn_mapper,
                       stop_process, wait_ready)
from tests.support import wait_for

pytestmark = pytest.mark.timeout(60)
INTERVAL = 0.2
KIB_TOTAL = 1 << 30


def oss_body(first_ost: int, n: int, *, cpu: float = 10.0, unavailable: set[int] = frozenset()):
    targets = {}
    for i in range(first_ost, first_ost + n):
        targets[f"fs-OST{i:04x}"] = {
            "kind": "ost", "index": i, "available": i not in unavailable, "jobs": [],
            "unavailable": {"kbytesfree": "missing: gone"} if i in unavailable else {},
            "values": {"kbytes_total": KIB_TOTAL, "kbytes_free": KIB_TOTAL // 2,
                       "kbytes_avail": KIB_TOTAL // 2, "files_free": 1 << 20,
                       "write_bytes_per_s": 1e8, "write_io_time_ms_mean": 3.0}}
    return {"server": {"values": {"cpu_percent": cpu, "mem_percent": 40.0,
                                  "lnet_send_bytes_per_s": 1.25e9,
                                  "lnet_recv_bytes_per_s": 0.0}, "unavailable": {}},
            "targets": targets}


class Feeder:
    """Two OSSes (OSTs 0-1 and 2-3) and the MDS publishing every INTERVAL until stopped."""

    def __init__(self, frontend: str, ctx: zmq.Context):
        self.pubs = {name: Publisher(frontend, role, name, context=ctx)
                     for role, name in (("oss", "oss0"), ("oss", "oss1"), ("mds", "mds0"))}
        self.mds_cpu = 10.0
        self.unavailable: set[int] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            now = time.time()
            self.pubs["oss0"].publish(now, INTERVAL, oss_body(0, 2, unavailable=self.unavailable))
            self.pubs["oss1"].publish(now, INTERVAL, oss_body(2, 2, unavailable=self.unavailable))
            self.pubs["mds0"].publish(now, INTERVAL, {
                "server": {"values": {"cpu_percent": self.mds_cpu}, "unavailable": {}},
                "targets": {}})
            self.stop.wait(INTERVAL)

    def close(self):
        self.stop.set()
        self.thread.join(5)
        for p in self.pubs.values():
            p.close()


def test_samples_build_state_and_gate_on_mds_cpu_and_staleness():
    svc = make_service(policy="round_robin", embed_broker=True,
                       broker_frontend="tcp://127.0.0.1:*", broker_backend_bind="tcp://127.0.0.1:*",
                       broker_snapshot_bind="tcp://127.0.0.1:*")
    ctx = zmq.Context()
    feeder = Feeder(svc.broker_endpoints[0], ctx)
    feeder.thread.start()
    try:
        with MapperClient(svc.endpoint, timeout_s=2) as c:
            def primary_answers():
                try:
                    layout = c.alloc("ior.1", 4)
                except Exception:  # noqa: BLE001 - EAGAIN until the first samples land
                    return None
                return layout if layout.fallback == "" else None
            layout = wait_for(primary_answers, what="primary answers")
            assert sorted(layout.osts) == [0, 1, 2, 3] and layout.policy == "round_robin"
            snap = svc.store.snapshot
            assert [o.oss for o in snap.osts] == ["oss0", "oss0", "oss1", "oss1"]
            assert snap.osts[0].write_latency_s == pytest.approx(0.003)      # ms -> s
            assert snap.osts[0].kbytes_avail == KIB_TOTAL // 2
            assert snap.osses["oss1"].cpu_percent == 10.0
            assert snap.osses["oss1"].lnet_load == pytest.approx(10.0)      # 1.25 of 12.5 GB/s
            assert snap.osts[2].write_bytes_per_s == 1e8        # the field the simulator fills

            feeder.mds_cpu = 95.0                                           # MDS busy
            wait_for(lambda: c.alloc("ior.1", 2).fallback == "mds_cpu", what="mds_cpu fallback")
            feeder.mds_cpu = 20.0
            wait_for(lambda: c.alloc("ior.1", 2).fallback == "", what="primary again")

            feeder.unavailable = {1}                                        # OST 1 unreadable
            wait_for(lambda: not svc.store.snapshot.osts[1].active, what="OST 1 inactive")
            for _ in range(10):
                assert 1 not in c.alloc("ior.1", -1).osts

            feeder.close()                                                  # collectors stop
            layout = wait_for(lambda: (lambda l: l if l.fallback == "stale" else None)(
                c.alloc("ior.1", 2)), what="stale fallback")
            assert layout.policy == "lustre_qos" and set(layout.osts) <= {0, 2, 3}
            assert svc.policy.last_stale == ["oss0", "oss1"]
            wait_for(lambda: svc.metrics.stale_servers.labels(svc.store.fsname)._value.get() == 2, what="stale gauge")
    finally:
        feeder.close()
        svc.stop()
        ctx.destroy(linger=0)


def test_mapper_process_with_embedded_broker_and_real_collector(tmp_path):
    """lustre-alloc-mapper (subprocess, embedded broker) + lustre-alloc-collector (subprocess)
    on the HPE 2.10.1 fixture tree: the fixture's OSTs are handed out; when the collector
    stops, the fallback answers with reason stale."""
    import os
    import subprocess
    from tests.collectors.conftest import HPE
    bind, front, back, snap = (f"tcp://127.0.0.1:{free_port()}" for _ in range(4))
    config = tmp_path / "mapper.toml"
    config.write_text(f"""[mapper]
bind = "{bind}"
embed_broker = true
broker_frontend = "{front}"
broker_backend_bind = "{back}"
broker_snapshot_bind = "{snap}"
policy = "random"
""")
    mapper = spawn_mapper(["--config", str(config)], tmp_path / "mapper.log")
    collector = subprocess.Popen(
        [PYTHON, "-m", "lustre_alloc.collectors.cli", "--role", "oss", "--root", str(HPE), "--source", "files",
         "--host", "oss-hpe", "--broker", front, "--interval", "0.25"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "collector.log", "w"),
        env={**os.environ, "PYTHONPATH": str(PROJECT)}, cwd=PROJECT)
    try:
        wait_ready(bind, mapper)
        with MapperClient(bind, timeout_s=2) as c:
            def placed():
                try:
                    return c.alloc("hacc", -1)
                except Exception:  # noqa: BLE001 - EAGAIN until the first sample
                    return None
            layout = wait_for(placed, timeout_s=15, what="first layout")
            assert set(layout.osts) <= {0, 2, 4, 6} and layout.osts
            wait_for(lambda: c.alloc("hacc", 2).fallback == "", what="primary answers")
            stop_process(collector)
            layout = wait_for(lambda: (lambda l: l if l.fallback == "stale" else None)(
                c.alloc("hacc", 2)), what="stale fallback")
            assert layout.policy == "lustre_qos"
    finally:
        stop_process(collector)
        assert stop_process(mapper) == 0
    events = [e["event"] for e in log_events(tmp_path / "mapper.log")]
    assert "mapper_start" in events
    assert "broker_start" in events and "ost_new" in events and events[-1] == "mapper_stop"
