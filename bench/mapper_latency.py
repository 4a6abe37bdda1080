"""Allocation latency and throughput of ``lustre-alloc-mapper`` over real sockets.

For each OST count (static emulated clusters: 32 = 8x4, 800 = 100x8, 3600 = 450x8) and each
primary policy, a mapper subprocess serves 1, 4 and 16 client processes that send
requests back to back (closed loop) for ``--duration`` seconds; 1000 applications (job
ids, each with a repeating pattern of request sizes, so MCMF's predictor has something to
learn) are spread over the clients. Printed per run: client-side round-trip p50/p99,
allocations/s, who decided (primary / fallback by reason), the mapper's CPU (% of one
core) and RSS. The pyzmq loopback floor (a ROUTER that echoes a reply of the same size,
same client processes) is measured in the same run and printed beside.

``RSS MB`` is the mapper's RSS + its planner child's unique memory (USS: the libraries the
child maps are shared pages; mcmf only: ``lustre_alloc.mapper.service.plan_worker``);
``CPU %`` is the mapper process's alone (the child's planning is not in it).

Each mapper first serves ``WARMUP_S`` of requests that are not measured (caches, the
predictor and the plan queues reach their steady state). Printed beside each run: its
allocations/s as a share of the floor's (``/floor``) and its p50 minus the floor's.
Targets: mcmf >= 80 % and round_robin >= 90 % of the floor's round trips/s
with 16 clients at 32, 800 and 3600 OSTs, no budget fallbacks, p50 at 1 client <= floor
+ 50 us, p99 <= 1 ms at 3600 OSTs, RSS <= 150 MB. This script prints; it never asserts
timings.

    .venv/bin/python bench/mapper_latency.py [--duration 2] [--osts 32,800,3600]
        [--clients 1,4,16] [--policies mcmf,round_robin]
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.mapper.service import wire  # noqa: E402

SHAPES = {32: (8, 4), 800: (100, 8), 3600: (450, 8)}
APPS = 1000
WARMUP_S = 2.0
PATTERN = (1 << 28, 1 << 28, 1 << 30, 1 << 26)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(endpoint: str, worker: int, workers: int, ready: mp.Queue, go: mp.Event,
           duration: float, echo: bool, out: mp.Queue) -> None:
    """Closed-loop requests for ``duration`` s after ``go``; puts (latencies_us, tally)."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(endpoint)
    apps = [f"app{a}" for a in range(worker, APPS, workers)]
    lat: list[float] = []
    tally: collections.Counter = collections.Counter()
    rid = worker << 40
    i = 0
    ready.put(worker)
    go.wait()
    end = time.time() + duration
    perf = time.perf_counter
    while True:
        now = time.time()
        if now >= end:
            break
        app = apps[i % len(apps)]
        body = wire.encode_request(rid, app, 4, 1 << 20, PATTERN[(i // len(apps)) % 4])
        t0 = perf()
        sock.send_multipart([b"", body])
        if not sock.poll(5000):
            tally["timeout"] += 1
            break
        frames = sock.recv_multipart()
        lat.append((perf() - t0) * 1e6)
        if not echo:
            reply = wire.decode_reply(frames[-1])
            if reply["ok"]:
                tally[reply["policy"] + (f"/{reply['fallback']}" if reply["fallback"] else "")] += 1
            else:
                tally[f"errno {reply['errno']}"] += 1
        rid += 1
        i += 1
    sock.close()
    ctx.term()
    out.put((lat, dict(tally)))


def echo_loop(sock: zmq.Socket, reply: bytes, stop) -> None:
    """The floor's loop (also bench/mapper_cpu.py's): answer every queued request with
    ``reply`` until ``stop`` (an Event) is set; no decoding, no work."""
    while not stop.is_set():
        if sock.poll(50):
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                sock.send_multipart([frames[0], b"", reply])


def echo_server(endpoint: str, ready: mp.Event, stop: mp.Event) -> None:
    """The floor: a ROUTER that answers each request with a reply-sized body, no work."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(endpoint)
    reply = wire.encode_placement(1, (1, 2, 3, 4), 1 << 20, "mcmf", "")
    ready.set()
    echo_loop(sock, reply, stop)
    sock.close()
    ctx.term()


def drive(endpoint: str, clients: int, duration: float, echo: bool,
          proc: psutil.Process | None) -> dict:
    ctx = mp.get_context("spawn")
    q, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=client, args=(endpoint, w, clients, ready, go, duration, echo, q))
               for w in range(clients)]
    for w in workers:
        w.start()
    for _ in workers:
        ready.get(timeout=120)
    go.set()
    cpu0 = proc.cpu_times() if proc else None
    t0 = time.monotonic()
    results = [q.get(timeout=duration + 60) for _ in workers]
    wall = time.monotonic() - t0
    cpu1 = proc.cpu_times() if proc else None
    for w in workers:
        w.join(10)
    lat = np.concatenate([np.asarray(r[0]) for r in results]) if results else np.array([])
    tally: collections.Counter = collections.Counter()
    for r in results:
        tally.update(r[1])
    res = {"n": len(lat), "p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
           "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
           "rate": len(lat) / duration, "tally": dict(tally)}
    if proc is not None:
        busy = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
        res["cpu"] = 100.0 * busy / wall
        res["rss_mb"] = proc.memory_info().rss / 2**20
        # the planner's child process (lustre_alloc.mapper.service.plan_worker) is the mapper's too:
        # its unique memory (USS), since the libraries it maps are shared with the mapper
        res["child_rss_mb"] = sum(c.memory_full_info().uss
                                  for c in proc.children(recursive=True)) / 2**20
    return res


def floor(clients: int, duration: float) -> dict:
    ctx = mp.get_context("spawn")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    ready, stop = ctx.Event(), ctx.Event()
    srv = ctx.Process(target=echo_server, args=(endpoint, ready, stop))
    srv.start()
    ready.wait(10)
    try:
        return drive(endpoint, clients, duration, True, None)
    finally:
        stop.set()
        srv.join(5)


def run_mapper(osts: int, policy: str, clients_list: list[int], duration: float) -> list[dict]:
    oss, per = SHAPES[osts]
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "lustre_alloc.mapper.service.cli", "--bind", endpoint,
                             "--static-cluster", f"{oss}x{per}", "--policy", policy,
                             "--log-level", "warning"], env=env, cwd=ROOT,
                            stderr=subprocess.DEVNULL)
    try:
        from lustre_alloc.mapper.service.client import MapperClient, MapperTimeout
        with MapperClient(endpoint, timeout_s=0.5) as c:
            for _ in range(100):
                try:
                    c.ping()
                    break
                except MapperTimeout:
                    pass
        ps = psutil.Process(proc.pid)
        # Warm-up (not measured): first rounds build caches, the predictor learns the
        # applications' patterns, the planner fills its queues: steady state after it.
        drive(endpoint, max(clients_list), WARMUP_S, False, None)
        out = []
        for n in clients_list:
            r = drive(endpoint, n, duration, False, ps)
            r.update(osts=osts, policy=policy, clients=n)
            out.append(r)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def fmt_tally(t: dict) -> str:
    total = sum(t.values()) or 1
    return ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in sorted(t.items(), key=lambda kv: -kv[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per run (2)")
    ap.add_argument("--osts", default="32,800,3600")
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--policies", default="mcmf,round_robin")
    a = ap.parse_args()
    clients = [int(x) for x in a.clients.split(",")]
    print(f"host: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, pyzmq {zmq.__version__}, "
          f"libzmq {zmq.zmq_version()}; {APPS} applications; {a.duration:.1f} s per run\n")
    floors = {n: floor(n, a.duration) for n in clients}
    print("pyzmq loopback floor (ROUTER echo, no work):")
    for n, f in floors.items():
        print(f"  {n:2d} clients: p50 {f['p50']:7.1f} us  p99 {f['p99']:7.1f} us  "
              f"{f['rate']:9.0f} round trips/s")
    print()
    hdr = (f"{'OSTs':>5} {'policy':<12} {'cl':>3} {'p50 us':>8} {'p99 us':>9} {'alloc/s':>8} "
           f"{'/floor':>6} {'p50-floor':>9} {'CPU %':>6} {'RSS MB':>11}  decided by")
    print(hdr)
    print("-" * len(hdr))
    for osts in [int(x) for x in a.osts.split(",")]:
        for policy in a.policies.split(","):
            for r in run_mapper(osts, policy, clients, a.duration):
                f = floors[r["clients"]]
                print(f"{osts:5d} {policy:<12} {r['clients']:3d} {r['p50']:8.1f} {r['p99']:9.1f} "
                      f"{r['rate']:8.0f} {r['rate'] / f['rate']:6.0%} {r['p50'] - f['p50']:9.1f} "
                      f"{r['cpu']:6.0f} {r['rss_mb']:6.1f}+{r['child_rss_mb']:4.0f}  "
                      f"{fmt_tally(r['tally'])}", flush=True)


if __name__ == "__main__":
    main()
