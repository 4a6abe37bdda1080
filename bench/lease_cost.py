"""What a lease costs with ``mcmf`` against ``round_robin``, while mcmf hands out
round-robin's lists (its regime switch, on a cluster whose OSTs are alike), same run.

For each OST count (static emulated clusters, 32 = 8x4 and 3600 = 450x8) and policy, a
mapper subprocess serves one client that asks for leases of ``--layouts`` layouts (the
shim's default class of 4 stripes) back to back and returns each (protocol v2
``release``, as the shim does at exit), for ``--requests`` leases after 50 unmeasured
ones. Printed: the median and p90 round trip of a lease (ms), and mcmf's median over
round_robin's in the same run (target: within 1.5x at 3600 OSTs). Policies alternate over
``--rounds`` rounds, each with a fresh mapper; the medians are over rounds. This script
prints; it never asserts timings.

    .venv/bin/python bench/lease_cost.py [--osts 32,3600] [--layouts 16] [--requests 300]
        [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.livestack.stack import free_port  # noqa: E402
from lustre_alloc.mapper.service.client import MapperClient  # noqa: E402

SHAPES = {32: "8x4", 800: "100x8", 3600: "450x8"}
POLICIES = ("round_robin", "mcmf")
WARMUP = 50



def one_run(osts: int, policy: str, layouts: int, requests: int) -> list[float]:
    """Round trips of ``requests`` leases against a fresh mapper, ms."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lustre_alloc.mapper.service.cli", "--bind", endpoint, "--static-cluster",
         SHAPES[osts], "--policy", policy, "--log-level", "error"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        out: list[float] = []
        with MapperClient(endpoint, timeout_s=30) as c:
            c.ping()
            for i in range(WARMUP + requests):
                t0 = time.perf_counter()
                lease = c.lease(layouts, f"job{i % 8}", 4)
                took = (time.perf_counter() - t0) * 1e3
                c.release([(lease.id, 0)])
                if i >= WARMUP:
                    out.append(took)
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--osts", default="32,3600")
    ap.add_argument("--layouts", type=int, default=16, help="layouts per lease (16)")
    ap.add_argument("--requests", type=int, default=300, help="measured leases per run")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(f"host: {os.cpu_count()} CPUs; leases of {a.layouts} layouts x 4 stripes, "
          f"{a.requests} per run, {a.rounds} rounds\n")
    print(f"{'OSTs':>5} {'policy':<12} {'p50 ms':>8} {'p90 ms':>8} {'/round_robin':>13}")
    for osts in (int(x) for x in a.osts.split(",")):
        p50: dict[str, list[float]] = {p: [] for p in POLICIES}
        p90: dict[str, list[float]] = {p: [] for p in POLICIES}
        for _ in range(a.rounds):
            for policy in POLICIES:
                lat = one_run(osts, policy, a.layouts, a.requests)
                p50[policy].append(float(np.percentile(lat, 50)))
                p90[policy].append(float(np.percentile(lat, 90)))
        base = statistics.median(p50["round_robin"])
        for policy in POLICIES:
            m = statistics.median(p50[policy])
            print(f"{osts:5d} {policy:<12} {m:8.3f} {statistics.median(p90[policy]):8.3f} "
                  f"{m / base:13.2f}", flush=True)


if __name__ == "__main__":
    main()
