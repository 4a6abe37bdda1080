"""The mapper request thread's CPU time per request, next to a bare ZeroMQ echo loop's.

What: in one process, a real :class:`~lustre_alloc.mapper.service.server.MapperService` on a static
emulated cluster (32 = 8x4, 800 = 100x8, 3600 = 450x8 OSTs) is driven over
``tcp://127.0.0.1`` by ``--sockets`` DEALER sockets (closed loop: one request outstanding
per socket) from one driver thread, with pre-encoded requests in the same mix as
``bench/mapper_latency.py`` (1000 applications, 4 stripes of 1 MiB, expected bytes cycling
through ``PATTERN``). Measured: the CPU time of the service's request thread (the whole
thread, from its ``pthread_getcpuclockid`` clock: poll, receive, decode, round, metrics,
reply) and the part spent inside ``_serve_queued`` (``time.thread_time()`` deltas taken in
the thread), each divided by the requests answered. The same driver then runs against a
bare ROUTER echo loop in a thread of the same process (the floor: receive, reply a
reply-sized body, no work), and the ratio lustre_alloc/mapper/echo is printed.

Each case alternates echo and mapper runs (``--repeat`` pairs) and prints medians: the
mapper's and the echo's CPU us per request, their ratio (median of the per-pair ratios),
the part inside ``_serve_queued``, the mapper's requests/s, and who decided (every
16th reply of the measured runs decoded).

Why: on the 2-core bench machine the clients and the mapper share the CPUs, so the round
trips/s ``bench/mapper_latency.py`` reports are decided by the mapper's CPU per request
and swing with whatever else runs. CPU time of one thread per request does not: it is
this repository's noise-robust measure of the request path (round_robin must
approach the echo floor). It prints; it never asserts.

    PYTHONPATH=. .venv/bin/python bench/mapper_cpu.py [--osts 32,800,3600]
        [--policies round_robin,lustre_qos,mcmf] [--sockets 16] [--duration 2] [--repeat 3]
        [--sizes 64]

With ``--sizes N`` the requests are the shim's close reports (``sizes`` messages of N file
sizes); with mcmf the request thread only queues them and the service's planner thread
teaches the chains, so the thread's CPU is the request path's cost, not the learning's
(one chain ``observe`` per size, ``bench/markov_table2.py``).
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

from lustre_alloc.mapper.service import wire  # noqa: E402
from lustre_alloc.mapper.service.config import load_config  # noqa: E402
from lustre_alloc.mapper.service.server import MapperService  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from mapper_latency import echo_loop  # noqa: E402

SHAPES = {32: (8, 4), 800: (100, 8), 3600: (450, 8)}
APPS = 1000
PATTERN = (1 << 28, 1 << 28, 1 << 30, 1 << 26)
WARMUP_S = 1.0


def thread_cpu(ident: int) -> float:
    """CPU seconds of the thread ``ident`` so far (Linux per-thread clock)."""
    return time.clock_gettime(time.pthread_getcpuclockid(ident))


SIZES_PER_MESSAGE = 0
"""``--sizes N``: the requests are ``sizes`` messages of N file sizes each (the shim's close
reports) instead of allocations; 0: allocations."""


def request_bodies(worker: int, workers: int) -> list[bytes]:
    """Pre-encoded requests of one socket: its share of the applications, each cycling
    through PATTERN (as bench/mapper_latency.py's clients send them), or with ``--sizes``
    one ``sizes`` message per application of PATTERN's sizes."""
    apps = [f"app{a}" for a in range(worker, APPS, workers)]
    rid = worker << 40
    out = []
    for i in range(len(apps) * len(PATTERN)):
        if SIZES_PER_MESSAGE:
            out.append(wire.encode_sizes_request(
                rid + i, apps[i % len(apps)],
                [PATTERN[k % len(PATTERN)] for k in range(i, i + SIZES_PER_MESSAGE)]))
            continue
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
                if self.decode and not answered & 15:       # a sample: who decided
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
        if r.get("op") == "sized":
            self.tally[f"sized, learned {r['learned']}"] += 1
        elif r.get("ok"):
            self.tally[r["policy"] + (f"/{r['fallback']}" if r.get("fallback") else "")] += 1
        else:
            self.tally[f"errno {r['errno']}"] += 1

    def close(self) -> None:
        for s in self.socks:
            s.close(0)


class Target:
    """A server thread under measurement and a warmed-up driver for it: :meth:`run`
    returns (request thread CPU us/request, inner clock us/request, requests/s)."""

    def __init__(self, ctx: zmq.Context, endpoint: str, ident: int, sockets: int,
                 inner: Callable[[], float] | None = None):
        self.ident = ident
        self.inner = inner
        self.driver = Driver(ctx, endpoint, sockets)
        self.driver.run(WARMUP_S)
        self.driver.tally.clear()          # "replies": who decided in the measured runs
        self.driver.decode = inner is not None

    def run(self, duration: float) -> tuple[float, float, float]:
        inner = self.inner
        c0, i0, t0 = thread_cpu(self.ident), inner() if inner else 0.0, time.monotonic()
        n = max(1, self.driver.run(duration))
        c1, i1, t1 = thread_cpu(self.ident), inner() if inner else 0.0, time.monotonic()
        return 1e6 * (c1 - c0) / n, 1e6 * (i1 - i0) / n, n / (t1 - t0)

    def close(self) -> None:
        self.driver.close()


class Echo:
    """The floor: a ROUTER echo loop (bench/mapper_latency.py's) in a thread of this process."""

    def __init__(self, ctx: zmq.Context):
        self.router = ctx.socket(zmq.ROUTER)
        self.router.linger = 0
        self.port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.reply = wire.encode_placement(1, (1, 2, 3, 4), 1 << 20, "round_robin", "")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="echo", daemon=True)
        self.thread.start()
        self.endpoint = f"tcp://127.0.0.1:{self.port}"

    def _loop(self) -> None:
        echo_loop(self.router, self.reply, self.stop)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.router.close(0)


def start_mapper(osts: int, policy: str) -> tuple[MapperService, Callable[[], float]]:
    """A started in-thread mapper on the static cluster of ``osts`` OSTs, its
    ``_serve_queued`` wrapped to accumulate the thread's CPU inside it."""
    oss, per = SHAPES[osts]
    cfg = load_config(None, {"bind": "tcp://127.0.0.1:*", "log_level": "warning",
                             "static_cluster": f"{oss}x{per}", "policy": policy,
                             # one peer (127.0.0.1) sends everything: lift its rate limit
                             # (admit() still runs) so no reply is a cheap EBUSY
                             "peer_requests_per_s": 1e9, "peer_request_burst": 1 << 30})
    svc = MapperService(cfg)
    serve = svc._serve_queued
    spent = [0.0]

    def timed(router: zmq.Socket) -> None:
        t0 = time.thread_time()
        try:
            serve(router)
        finally:
            spent[0] += time.thread_time() - t0

    svc._serve_queued = timed          # type: ignore[method-assign]
    svc.start()
    return svc, lambda: spent[0]


def case(ctx: zmq.Context, echo_target: Target, osts: int, policy: str,
         sockets: int, duration: float, repeat: int) -> dict:
    """``repeat`` pairs of runs, echo then mapper, so each ratio compares runs a few
    seconds apart (the machine's load drifts); medians."""
    svc, inner = start_mapper(osts, policy)
    try:
        ident = svc._thread.ident if svc._thread is not None else 0
        target = Target(ctx, svc.endpoint, ident or 0, sockets, inner)
        try:
            runs = []
            for _ in range(repeat):
                e = echo_target.run(duration)
                m = target.run(duration)
                runs.append((m[0], e[0], m[0] / e[0], m[1], m[2]))
            tally = dict(target.driver.tally)
        finally:
            target.close()
    finally:
        svc.stop()
    med = [statistics.median(r[i] for r in runs) for i in range(5)]
    return {"us": med[0], "echo_us": med[1], "ratio": med[2], "inner_us": med[3],
            "rate": med[4], "ratios": [r[2] for r in runs], "tally": tally}


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
    ap.add_argument("--sizes", type=int, default=0,
                    help="send sizes messages of this many file sizes instead of allocations "
                         "(the thread's CPU per message; divide by it for one size)")
    a = ap.parse_args()
    global SIZES_PER_MESSAGE
    SIZES_PER_MESSAGE = a.sizes
    ctx = zmq.Context()
    print(f"python {sys.version.split()[0]}, pyzmq {zmq.__version__}, libzmq "
          f"{zmq.zmq_version()}; {a.sockets} DEALER sockets, {APPS} applications; "
          f"{a.repeat} x {a.duration:.1f} s per case, each beside an echo run (medians)\n")
    echo = Echo(ctx)
    echo_target = Target(ctx, echo.endpoint, echo.thread.ident or 0, a.sockets)
    hdr = (f"{'OSTs':>5} {'policy':<12} {'thread us':>9} {'echo us':>7} {'/echo':>6} "
           f"{'serve us':>8} {'req/s':>7}  ratio per run   replies")
    print(hdr)
    print("-" * len(hdr))
    try:
        for osts in [int(x) for x in a.osts.split(",")]:
            for policy in a.policies.split(","):
                r = case(ctx, echo_target, osts, policy, a.sockets, a.duration, a.repeat)
                print(f"{osts:5d} {policy:<12} {r['us']:9.1f} {r['echo_us']:7.1f} "
                      f"{r['ratio']:6.2f} {r['inner_us']:8.1f} {r['rate']:7.0f}  "
                      f"{'/'.join(f'{x:.2f}' for x in r['ratios']):<14}  "
                      f"{fmt_tally(r['tally'])}", flush=True)
    finally:
        echo_target.close()
        echo.close()
    ctx.term()


if __name__ == "__main__":
    main()
