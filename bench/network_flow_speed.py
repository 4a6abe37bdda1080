"""Cost of the flow-level network model: the paper scenario with ``none`` vs ``flow``.

Runs the 24 h ``paper-32ost`` scenario with its three baseline policies (2 worker
processes) once with the scenario's own network model (``none``: equal OST shares) and
once with the flow-level LNet model (``flow``: joint max-min over links and OSTs),
and prints wall times, their ratio (the issue's target: <= ~2x) and each policy's mean
I/O bandwidth under both models.

Usage: .venv/bin/python bench/network_flow_speed.py [--duration S] [--jobs N]
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

from lustre_alloc.simulator.report import summarise
from lustre_alloc.simulator.runner import run_scenario
from lustre_alloc.simulator.scenario import load_scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    base = load_scenario("paper-32ost").with_overrides(duration_s=args.duration)
    walls, bw = {}, {}
    for model in ("none", "flow"):
        sc = replace(base, network=model, network_params={})
        t0 = time.perf_counter()
        results = run_scenario(sc, jobs=args.jobs)
        walls[model] = time.perf_counter() - t0
        bw[model] = {r.policy: summarise(r)["mean_io_bandwidth_mib_s"] for r in results}
    print(f"paper-32ost, {base.duration_s / 3600:g} h, {', '.join(base.policies)}, jobs={args.jobs}")
    for model in walls:
        print(f"  network={model:<5} wall {walls[model]:6.1f} s   mean I/O MiB/s: "
              + ", ".join(f"{p} {v}" for p, v in bw[model].items()))
    print(f"flow / none wall ratio: {walls['flow'] / walls['none']:.2f} (target <= ~2)")


if __name__ == "__main__":
    main()
