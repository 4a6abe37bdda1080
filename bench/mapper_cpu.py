"""The mapper request thread's CPU time per request, next to a bare ZeroMQ echo loop's.

What: in one process, a real :class:`~mapper.service.server.MapperService` on a static
emulated cluster (32 = 8x4, 800 = 100x8, 3600 = 450x8 OSTs) is driven over
``tcp://127.0.0.1`` by ``--sockets`` DEALER sockets (closed loop: one request outstanding
per socket) from one driver thread, with pre-encoded requests in the same mix as
``bench/mapper_latency.py`` (1000 applications, 4 stripes of 1 MiB, expected bytes cycling
through ``PATTERN``). Measured: the CPU time of the service's request thread (the whole
thread, from its ``pthread_getcpuclockid`` clock: poll, receive, decode, round, metrics,
reply) and the part spent inside ``_serve_queued`` (``time.thread_time()`` deltas taken in
the thread), each divided by the requests answered. The same driver then runs against a
bare ROUTER echo loop in a thread of the same process (the floor: receive, reply a
reply-sized body, no work), and the ratio mapper/echo is printed.

Why: on the 2-core bench machine the clients and the mapper share the CPUs, so the round
trips/s ``bench/mapper_latency.py`` reports are decided by the mapper's CPU per request
and swing with whatever else runs. CPU time of one thread per request does not: it is
this repository's noise-robust measure of the request path (issue 19: round_robin must
approach the echo floor). It prints; it never asserts.

    PYTHONPATH=. .venv/bin/python bench/mapper_cpu.py [--osts 32,800,3600]
        [--policies round_robin,lustre_qos,mcmf] [--sockets 16] [--duration 2] [--repeat 3]
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import msgpack
import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mapper.service import wire  # noqa: E402
from mapper.service.config import load_config  # noqa: E402
from mapper.service.server import MapperService  # noqa: E402

SHAPES = {32: (8, 4), 800: (100, 8), 3600: (450, 8)}
APPS = 1000
PATTERN = (1 << 28, 1 << 28, 1 << 30, 1 << 26)
WARMUP_S = 1.0


def thread_cpu(ident: int) -> float:
    """CPU seconds of the thread ``ident`` so far (Linux per-thread clock)."""
    return time.clock_gettime(time.pthread_getcpuclockid(ident))


def request_bodies(worker: int, workers: int) -> list[bytes]:
    """Pre-encoded requests of one socket: its share of the applications, each cycling
    through PATTERN (as bench/mapper_latency.py's clients send them)."""
    apps = [f"app{a}" for a in range(worker, APPS, workers)]
    rid = worker << 40
    out = []
    for i in range(len(apps) * len(PATTERN)):
        out.append(wire.encode_request(rid + i, apps[i % len(apps)], 4, 1 << 20,
                                       PATTERN[(i // len(apps)) % len(PATTERN)]))
    return out


class Driver:
    """``n`` DEALER sockets in one thread, each with one request outstanding."""

    def __init__(self, ctx: zmq.Context, endpoint: str, n: int):
        self.socks = []
        for _ in range(n):
            s = ctx.socket(zmq.DEALER)
            s.linger = 0
            s.connect(endpoint)
            self.socks.append(s)
        self.bodies = [request_bodies(w, n) for w in range(n)]
        self.next = [0] * n
        self.answered = 0
        self.tally: collections.Counter = collections.Counter()
        self.decode = False

    def run(self, seconds: float) -> int:
        """Closed loop for ``seconds``; returns the replies received (in-flight requests
        are drained afterwards, not counted)."""
        poller = zmq.Poller()
        index = {}
        for w, s in enumerate(self.socks):
            poller.register(s, zmq.POLLIN)
            index[s] = w
            self._send(w)
        answered = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for s, _ in poller.poll(1000):
                frames = s.recv_multipart()
                answered += 1
                if self.decode:
                    self._count(frames[-1])
                self._send(index[s])
        for s in self.socks:             # drain: every socket has exactly one in flight
            if s.poll(5000):
                s.recv_multipart()
        self.answered += answered
        return answered

    def _send(self, w: int) -> None:
        bodies = self.bodies[w]
        i = self.next[w]
        self.next[w] = (i + 1) % len(bodies)
        self.socks[w].send_multipart([b"", bodies[i]])

    def _count(self, body: bytes) -> None:
        r = msgpack.unpackb(body, raw=False)
        if r.get("ok"):
            self.tally[r["policy"] + (f"/{r['fallback']}" if r.get("fallback") else "")] += 1
        else:
            self.tally[f"errno {r['errno']}"] += 1

    def close(self) -> None:
        for s in self.socks:
            s.close(0)


def measure(endpoint: str, ident: int, sockets: int, duration: float, repeat: int,
            inner: Callable[[], float] | None, ctx: zmq.Context) -> dict:
    """Warm up, then ``repeat`` runs of ``duration`` s; per run the thread's CPU us per
    request (and the ``inner`` clock's, when given). Medians over the runs."""
    d = Driver(ctx, endpoint, sockets)
    try:
        d.decode = True
        d.run(WARMUP_S)
        d.decode = False
        per, per_inner, rates = [], [], []
        for _ in range(repeat):
            c0, i0, t0 = thread_cpu(ident), inner() if inner else 0.0, time.monotonic()
            n = d.run(duration)
            c1, i1, t1 = thread_cpu(ident), inner() if inner else 0.0, time.monotonic()
            per.append(1e6 * (c1 - c0) / max(1, n))
            per_inner.append(1e6 * (i1 - i0) / max(1, n))
            rates.append(n / (t1 - t0))
        return {"us": statistics.median(per), "us_all": per,
                "inner_us": statistics.median(per_inner) if inner else None,
                "rate": statistics.median(rates), "tally": dict(d.tally)}
    finally:
        d.close()


def echo(ctx: zmq.Context, sockets: int, duration: float, repeat: int) -> dict:
    """The floor: a ROUTER echo loop (bench/mapper_latency.py's) in a thread of this process."""
    router = ctx.socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    reply = wire.encode_placement(1, (1, 2, 3, 4), 1 << 20, "round_robin", "")
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            if router.poll(50):
                while True:
                    try:
                        frames = router.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    router.send_multipart([frames[0], b"", reply])

    t = threading.Thread(target=loop, name="echo", daemon=True)
    t.start()
    try:
        return measure(f"tcp://127.0.0.1:{port}", t.ident or 0, sockets, duration, repeat,
                       None, ctx)
    finally:
        stop.set()
        t.join(5)
        router.close(0)


def mapper(ctx: zmq.Context, osts: int, policy: str, sockets: int, duration: float,
           repeat: int) -> dict:
    oss, per = SHAPES[osts]
    cfg = load_config(None, {"bind": "tcp://127.0.0.1:*", "log_level": "warning",
                             "static_cluster": f"{oss}x{per}", "policy": policy,
                             # one peer (127.0.0.1) sends everything: lift its rate limit
                             # (admit() still runs) so no reply is a cheap EBUSY
                             "peer_requests_per_s": 1e9, "peer_request_burst": 1 << 30})
    svc = MapperService(cfg)
    serve = svc._serve_queued
    spent = [0.0]

    def timed() -> None:
        t0 = time.thread_time()
        try:
            serve()
        finally:
            spent[0] += time.thread_time() - t0

    svc._serve_queued = timed          # type: ignore[method-assign]
    svc.start()
    try:
        ident = svc._thread.ident if svc._thread is not None else 0
        return measure(svc.endpoint, ident or 0, sockets, duration, repeat,
                       lambda: spent[0], ctx)
    finally:
        svc.stop()


def fmt_tally(t: dict) -> str:
    total = sum(t.values()) or 1
    return ", ".join(f"{k} {100 * v / total:.0f}%"
                     for k, v in sorted(t.items(), key=lambda kv: -kv[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--osts", default="32,800,3600")
    ap.add_argument("--policies", default="round_robin,lustre_qos,mcmf")
    ap.add_argument("--sockets", type=int, default=16, help="DEALER sockets (16)")
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per run (2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case; medians (3)")
    a = ap.parse_args()
    ctx = zmq.Context()
    print(f"python {sys.version.split()[0]}, pyzmq {zmq.__version__}, libzmq "
          f"{zmq.zmq_version()}; {a.sockets} DEALER sockets, {APPS} applications; "
          f"{a.repeat} x {a.duration:.1f} s per case (medians)\n")
    floor = echo(ctx, a.sockets, a.duration, a.repeat)
    print(f"echo floor (ROUTER echo thread): {floor['us']:6.1f} us CPU/request  "
          f"({', '.join(f'{x:.1f}' for x in floor['us_all'])})  {floor['rate']:7.0f} req/s\n")
    hdr = (f"{'OSTs':>5} {'policy':<12} {'thread us':>9} {'/echo':>6} {'serve us':>8} "
           f"{'req/s':>7}  runs (thread us)  replies")
    print(hdr)
    print("-" * len(hdr))
    for osts in [int(x) for x in a.osts.split(",")]:
        for policy in a.policies.split(","):
            r = mapper(ctx, osts, policy, a.sockets, a.duration, a.repeat)
            print(f"{osts:5d} {policy:<12} {r['us']:9.1f} {r['us'] / floor['us']:6.2f} "
                  f"{r['inner_us']:8.1f} {r['rate']:7.0f}  "
                  f"{'/'.join(f'{x:.1f}' for x in r['us_all']):<16}  {fmt_tally(r['tally'])}",
                  flush=True)
    ctx.term()


if __name__ == "__main__":
    main()
