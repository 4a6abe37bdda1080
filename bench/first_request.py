"""The first request after ``lustre-alloc-mapper`` starts, against a later one, same run.

A create that reaches a mapper the moment it binds (a job started with the service, a
restart under load) must not be the slow one: the shim waits 50 ms for an answer
(``LUSTRE_ALLOC_TIMEOUT_MS``) and backs off after a timeout. The mapper builds what a first
decision needs before it binds (:meth:`lustre_alloc.mapper.service.server.MapperService._prepare`); this
script measures what that buys.

For each OST count (static emulated clusters: 32 = 8x4, 3600 = 450x8), primary policy and
request kind (``lease``: the shim's default, 16 layouts; ``alloc``: one create), each
repetition starts a mapper subprocess and

* ``first``: as soon as the request port accepts a TCP connection, a new client (a new
  ZeroMQ context and socket, as a new process's shim) sends one request and times the
  answer;
* ``later``: after 300 requests, three new clients send one request each, 1.05 s apart
  (so the decision log's rate lets each one's line through, as the first one's); the
  median.

Both include the client's connection handshake and a logged decision, so the ratio
``first / later`` is the cost of starting cold. The rows ``unprepared`` run the same mapper
with ``_prepare`` replaced by a no-op (what the first request paid before it existed).
The rows ``echo floor`` start a bare pyzmq ROUTER the same way: what a new process's first
connection costs with no mapper at all. Printed: the medians over repetitions (ms) and the
median and largest ratio. The target: ratio <= 2 at 3600 OSTs. This script prints; it never asserts timings.

    .venv/bin/python bench/first_request.py [--reps 3] [--osts 32,3600]
        [--policies mcmf,round_robin] [--kinds lease,alloc]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.livestack.stack import free_port  # noqa: E402
from lustre_alloc.mapper.service import wire  # noqa: E402

SHAPES = {32: (8, 4), 800: (100, 8), 3600: (450, 8)}
WARM_REQUESTS = 300
LATER_CLIENTS = 3
LOG_PAUSE_S = 1.05
"""Pause before each later request: the decision log writes 1 line a second
(``decision_log_per_s``) with a burst of 1, so each later request is logged as the first
one is (a logged decision prices the cheapest alternatives: about 1 ms at 3600 OSTs)."""
ECHO = ("import sys, zmq; from lustre_alloc.mapper.service import wire; "
        "from bench.mapper_latency import echo_loop; import threading; "
        "ctx = zmq.Context(); s = ctx.socket(zmq.ROUTER); s.bind(sys.argv[1]); "
        "echo_loop(s, wire.encode_placement(1, (1, 2, 3, 4), 1 << 20, 'mcmf', ''), "
        "threading.Event())")
"""The floor: a fresh pyzmq ROUTER that answers every request with a reply-sized body
(``bench/mapper_latency.py``'s), started like the mapper: its first/later ratio is what a
new process's first connection costs with no mapper work at all."""
MAPPERS = ("prepared", "unprepared", "echo floor")
UNPREPARED = ("import sys; import lustre_alloc.mapper.service.server as s; "
              "s.MapperService._prepare = lambda self: None; "
              "from lustre_alloc.mapper.service.cli import main; sys.exit(main(sys.argv[1:]))")



def wait_bound(port: int, timeout_s: float = 60.0) -> None:
    """Return once 127.0.0.1:``port`` accepts a TCP connection."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return
        except OSError:
            time.sleep(0.002)
    raise RuntimeError(f"mapper did not bind port {port} within {timeout_s} s")


def body(kind: str, request_id: int) -> bytes:
    if kind == "lease":
        return wire.encode_lease_request(request_id, 16, f"job{request_id % 7}", 4,
                                               1 << 20)
    return wire.encode_request(request_id, f"job{request_id % 7}", 4, 1 << 20, 0)


def one_request(endpoint: str, kind: str, request_id: int) -> float:
    """One request from a new client (context and socket); its round trip, ms."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    try:
        sock.connect(endpoint)
        t0 = time.perf_counter()
        sock.send_multipart([b"", body(kind, request_id)])
        if not sock.poll(10_000):
            raise RuntimeError("no answer within 10 s")
        sock.recv_multipart()
        return (time.perf_counter() - t0) * 1e3
    finally:
        sock.close()
        ctx.term()


def warm(endpoint: str, n: int) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.connect(endpoint)
    for i in range(n):
        sock.send_multipart([b"", body("alloc", 1_000_000 + i)])
        if not sock.poll(10_000):
            raise RuntimeError("no answer within 10 s")
        sock.recv_multipart()
    sock.close()
    ctx.term()


def warm_client_side() -> None:
    """One round trip to a local ROUTER in this process, so the first measured request
    does not pay for pyzmq's own first use (its lazy imports, the first context)."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    dealer.send_multipart([b"", b"ping"])
    router.send_multipart(router.recv_multipart())
    dealer.poll(5000)
    dealer.recv_multipart()
    for s in (dealer, router):
        s.close(0)
    ctx.term()


def one_run(osts: int, policy: str, kind: str, mapper: str) -> tuple[float, float]:
    """(first, later) round trips of one run of ``mapper`` (:data:`MAPPERS`), ms."""
    oss, per = SHAPES[osts]
    port = free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    args = ["--bind", endpoint, "--static-cluster", f"{oss}x{per}", "--policy", policy,
            "--log-level", "error"]
    cmd = ([sys.executable, "-m", "lustre_alloc.mapper.service.cli", *args] if mapper == "prepared"
           else [sys.executable, "-c", UNPREPARED, *args] if mapper == "unprepared"
           else [sys.executable, "-c", ECHO, endpoint])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        wait_bound(port)
        first = one_request(endpoint, kind, 1)
        warm(endpoint, WARM_REQUESTS)
        later = []
        for i in range(LATER_CLIENTS):
            time.sleep(LOG_PAUSE_S)
            later.append(one_request(endpoint, kind, 2 + i))
        return first, statistics.median(later)
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="mapper starts per row (3)")
    ap.add_argument("--osts", default="32,3600")
    ap.add_argument("--policies", default="mcmf,round_robin")
    ap.add_argument("--kinds", default="lease,alloc")
    a = ap.parse_args()
    warm_client_side()
    print(f"host: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, "
          f"pyzmq {zmq.__version__}; {a.reps} mapper starts per row\n")
    hdr = (f"{'OSTs':>5} {'policy':<12} {'kind':<6} {'mapper':<11} {'first ms':>9} "
           f"{'later ms':>9} {'ratio':>6} {'max':>6}")
    print(hdr)
    print("-" * len(hdr))
    for osts in [int(x) for x in a.osts.split(",")]:
        for policy in a.policies.split(","):
            for kind in a.kinds.split(","):
                for mapper in MAPPERS:
                    runs = [one_run(osts, policy, kind, mapper) for _ in range(a.reps)]
                    ratios = [f / l for f, l in runs]
                    print(f"{osts:5d} {policy:<12} {kind:<6} {mapper:<11} "
                          f"{statistics.median(f for f, _ in runs):9.2f} "
                          f"{statistics.median(l for _, l in runs):9.2f} "
                          f"{statistics.median(ratios):6.2f} {max(ratios):6.2f}", flush=True)


if __name__ == "__main__":
    main()
