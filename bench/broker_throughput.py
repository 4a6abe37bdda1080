"""Broker throughput with 450 simulated OSSes (the paper's largest setup, Section IV).

Runs ``lustre-alloc-broker`` as its own process, spreads 450 PUB publishers over worker
processes, each sending realistic 8-OST samples (the body a collector builds from the real
Lustre 2.10.1 fixture), and counts what a raw SUB socket receives from the backend. Two runs:

* paced: every OSS at the paper's 5 s interval, compressed (the real load: 90 samples/s);
* flat out: every publisher as fast as it can, to find the broker's ceiling.

Prints a table with messages/s in and out, loss and broker CPU; asserts nothing.

    .venv/bin/python bench/broker_throughput.py [--osses 450] [--seconds 10] [--workers 1]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import zmq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lustre_alloc.collectors.collector import Collector  # noqa: E402
from lustre_alloc.collectors.publisher import Publisher  # noqa: E402
from lustre_alloc.collectors.sources import FileSource  # noqa: E402

HPE = ROOT / "tests/fixtures/lustre/hpe-lustre-2.10.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sample_body(n_osts: int = 8) -> dict:
    """A realistic body: two real collections of the fixture, targets duplicated to n_osts."""
    c = Collector("oss", FileSource(HPE))
    c.collect()
    body = c.collect()
    osts = list(body["targets"].values())
    body["targets"] = {f"bench-OST{i:04x}": dict(osts[i % len(osts)], index=i) for i in range(n_osts)}
    return body


def worker(endpoint: str, first: int, count: int, seconds: float, interval: float,
           compress: bool, start_at: float, body: dict) -> None:
    ctx = zmq.Context()
    pubs = [Publisher(endpoint, "oss", f"oss{first + i:03d}", compress=compress, context=ctx,
                      sndhwm=100) for i in range(count)]
    time.sleep(max(0.0, start_at - time.time()))
    end = time.time() + seconds
    if interval > 0:  # paced: each OSS once per interval, spread over the interval
        step = interval / count
        t = time.time()
        while t < end:
            for i, pub in enumerate(pubs):
                due = t + i * step
                delay = due - time.time()
                if delay > 0:
                    time.sleep(delay)
                pub.publish(due, interval, body)
            t += interval
    else:
        while time.time() < end:
            for pub in pubs:
                pub.publish(time.time(), 5.0, body)
    for pub in pubs:
        pub.close()
    ctx.term()


def run(args, interval: float, compress: bool, body: dict) -> dict:
    ports = [free_port() for _ in range(3)]
    front, back, snap = (f"tcp://127.0.0.1:{p}" for p in ports)
    broker = subprocess.Popen([sys.executable, "-m", "lustre_alloc.collectors.broker_cli", "--frontend", front,
                               "--backend", back, "--snapshot", snap, "--log-level", "warning"],
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.rcvhwm = 1_000_000
    sub.setsockopt(zmq.SUBSCRIBE, b"lustre-alloc.v1.")
    sub.connect(back)
    per = args.osses // args.workers
    start_at = time.time() + 4.0  # imports + connections
    procs = [mp.Process(target=worker, args=(front, w * per, per if w < args.workers - 1
                                             else args.osses - w * per, args.seconds, interval,
                                             compress, start_at, body))
             for w in range(args.workers)]
    try:
        for p in procs:
            p.start()
        bp = psutil.Process(broker.pid)
        while time.time() < start_at:
            time.sleep(0.05)
        cpu0 = sum(bp.cpu_times()[:2])
        received = 0
        nbytes = 0
        hosts = set()
        t0 = time.monotonic()
        deadline = t0 + args.seconds + 2.0
        while time.monotonic() < deadline:
            if sub.poll(200):
                topic, payload = sub.recv_multipart()
                received += 1
                nbytes += len(payload)
                hosts.add(topic)
        cpu = sum(bp.cpu_times()[:2]) - cpu0
        for p in procs:
            p.join(30)
    finally:
        broker.terminate()
        broker.wait(10)
        sub.close(0)
        ctx.term()
        for p in procs:
            if p.is_alive():
                p.kill()
    expected = args.osses * int(args.seconds / interval) if interval > 0 else None
    return {"received": received, "rate": received / args.seconds, "hosts": len(hosts),
            "bytes": nbytes / max(1, received), "cpu": 100 * cpu / args.seconds,
            "expected": expected}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osses", type=int, default=450)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=1,
                    help="publisher processes (more than the free cores starves the broker)")
    args = ap.parse_args()
    body = sample_body()
    rows = [("paced 5 s, zlib", run(args, 5.0, True, body)),
            ("flat out, zlib", run(args, 0.0, True, body)),
            ("flat out, msgpack", run(args, 0.0, False, body))]
    print(f"broker throughput: {args.osses} simulated OSSes x 8 OSTs, {args.workers} publisher "
          f"processes, {args.seconds:g} s, 127.0.0.1, {os.cpu_count()} cores shared")
    print(f"{'run':<18} {'received':>9} {'msgs/s':>9} {'servers':>8} {'B/msg':>7} {'broker CPU%':>11}")
    for name, r in rows:
        print(f"{name:<18} {r['received']:>9} {r['rate']:>9.0f} {r['hosts']:>8} {r['bytes']:>7.0f} "
              f"{r['cpu']:>11.1f}")
    paced = rows[0][1]
    need = args.osses / 5.0
    print(f"paced: received/expected = {paced['received']}/{paced['expected']} "
          f"({paced['received'] / max(1, paced['expected']):.3f})")
    print(f"headroom: flat-out msgs/s / needed at 5 s ({need:.0f}/s) = "
          f"{max(rows[1][1]['rate'], rows[2][1]['rate']) / need:.0f}x")


if __name__ == "__main__":
    main()
