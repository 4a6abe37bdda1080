"""Real processes over 127.0.0.1: collectors on fixture trees and an lctl dump -> standalone
broker -> subscriber; every sample arrives with the file's values, an injected gap is seen, and
the collectors come back by themselves after a broker restart."""
from __future__ import annotations

import os
import subprocess
import time
from collections import defaultdict

import pytest
import zmq

from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.collectors.subscriber import Subscriber

from tests.support import join

from .conftest import DDN, HPE, PYTHON, fake_lctl, free_ports

pytestmark = pytest.mark.timeout(60)
INTERVAL = "0.25"


def spawn(args, log):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.Popen([PYTHON, "-m", *args], stdout=log, stderr=subprocess.STDOUT, env=env)


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_collectors_broker_subscriber_over_real_sockets(tmp_path):
    ports = free_ports(3)
    front, back, snap = (f"tcp://127.0.0.1:{p}" for p in ports)
    broker_args = ["lustre_alloc.collectors.broker_cli", "--frontend", front, "--backend", back,
                   "--snapshot", snap, "--heartbeat", "0.2"]
    log = open(tmp_path / "procs.log", "w")
    procs = []
    ctx = zmq.Context()
    try:
        broker = spawn(broker_args, log)
        procs.append(broker)
        common = ["--broker", front, "--interval", INTERVAL]
        lctl = " ".join(fake_lctl(tmp_path, DDN / "valid/valid.txt"))
        for args in (["--role", "oss", "--root", str(HPE), "--host", "oss-a", "--source", "files"],
                     ["--role", "oss", "--root", str(HPE), "--host", "oss-b", "--compress"],
                     ["--role", "mds", "--root", str(HPE), "--host", "mds-1"],
                     ["--role", "oss", "--source", "lctl", "--lctl-command", lctl,
                      "--host", "oss-lctl"]):
            procs.append(spawn(["lustre_alloc.collectors.cli", *common, *args], log))
        sub = Subscriber(back, snap, context=ctx, snapshot_timeout_s=1.0).start()
        by_host = defaultdict(list)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and min((len(by_host[h]) for h in
                                                   ("oss-a", "oss-b", "mds-1", "oss-lctl")), default=0) < 6:
            s = sub.recv(0.5)
            if s is not None:
                by_host[s.host].append(s)
        for host in ("oss-a", "oss-b", "mds-1", "oss-lctl"):
            seqs = [s.seq for s in by_host[host]]
            assert seqs[:6] == list(range(1, 7)), (host, seqs)
        assert sub.gaps == []
        ost = by_host["oss-a"][-1].targets["lustrefs-OST0000"]
        assert ost["values"]["kbytes_free"] == 47029440512 and ost["available"]
        assert by_host["oss-b"][-1].targets["lustrefs-OST0006"]["values"]["files_total"] == 982675104
        assert by_host["mds-1"][-1].targets["lustrefs-MDT0000"]["kind"] == "mdt"
        assert by_host["oss-lctl"][-1].targets["ai400-OST0001"]["values"]["kbytes_free"] == 3978093456
        # Every sample is taken on an interval boundary, and the collectors share boundaries:
        # some boundary appears in every host's samples (the hosts started at different times,
        # so their last samples need not be the same).
        ticks = {h: {round(s.time / 0.25) for s in by_host[h]} for h in by_host}
        assert all(abs(s.time / 0.25 - round(s.time / 0.25)) < 1e-6
                   for h in by_host for s in by_host[h])
        assert set.intersection(*ticks.values()), ticks

        # injected gap: a publisher that skips a sequence number
        inj = Publisher(front, "oss", "injector", context=ctx)
        body = {"server": {"values": {}, "unavailable": {}}, "targets": {}}

        def injector_sample(timeout_s: float):
            s = sub.recv(timeout_s)
            return s if s is not None and s.host == "injector" else None
        join(lambda: inj.publish(0.5, 0.25, body), injector_sample, what="the injector's probe")
        first = inj.publish(1.0, 0.25, body)
        inj.skip()
        second = inj.publish(2.0, 0.25, body)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(g.host == "injector" for g in sub.gaps):
            sub.recv(0.2)
        assert [(g.expected_seq, g.received_seq) for g in sub.gaps
                if g.host == "injector"] == [(first + 1, second)]
        inj.close()

        # broker restart: same ports, collectors reconnect by themselves
        last_before = {h: sub.last_seq("oss", h) for h in ("oss-a", "oss-lctl")}
        stop(broker)                  # exited: its ports are free again
        broker = spawn(broker_args, log)
        procs.append(broker)
        after = defaultdict(list)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (sub.broker_restarts == 0 or min(
                (len(after[h]) for h in last_before), default=0) < 3):
            s = sub.recv(0.5)
            if s is not None and s.host in last_before and s.seq > last_before[s.host]:
                after[s.host].append(s.seq)
        assert all(len(after[h]) >= 3 for h in last_before), dict(after)
        assert sub.broker_restarts == 1
        for gap in sub.gaps:  # samples sent while the broker was down are reported, not hidden
            assert gap.received_seq > gap.expected_seq
        assert all(p.poll() is None for p in procs[1:5]), "a collector died"
        sub.close()
    finally:
        for p in procs:
            stop(p)
        log.close()
        ctx.destroy(linger=0)
