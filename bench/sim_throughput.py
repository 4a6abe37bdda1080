"""Simulator speed: events/s and wall time of the bundled 24 h scenarios.

Prints one row per (scenario, policy): records replayed, creates, simulated seconds,
wall seconds, records/s and simulated-seconds per wall-second, then the wall time of a
whole `lustre-alloc-sim run` of the paper scenario with all baseline policies (the
issue's target: <= 2 minutes on 2 cores) and the ratio of each policy's wall time to
round-robin's, measured in the same run.

Usage: .venv/bin/python bench/sim_throughput.py [--duration S] [--jobs N] [--before TREE]

``--before TREE`` times the same whole run with the code in TREE (e.g. main before a change)
and prints now/before (bench/before.py).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lustre_alloc.simulator.runner import prepare, run_policy, run_scenario
from lustre_alloc.simulator.scenario import load_scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=None, help="override duration, seconds")
    ap.add_argument("--jobs", type=int, default=2, help="parallel policies for the whole-run timing")
    ap.add_argument("--whole-only", action="store_true",
                    help="skip the per-policy table: only the whole paper-32ost run (and --before)")
    ap.add_argument("--before", type=Path, default=None, metavar="TREE",
                    help="a checkout of the earlier code: time the same whole run with it and "
                         "print the ratio (bench/before.py)")
    args = ap.parse_args()
    console = Console(width=140)
    table = Table(title="simulator throughput (one process per row)")
    for col in ("scenario", "policy", "records", "creates", "sim s", "wall s", "records/s",
                "sim s / wall s", "wall vs round_robin"):
        table.add_column(col, justify="right")
    for name in () if args.whole_only else ("paper-32ost", "nersc-edison-real"):
        sc = load_scenario(name).with_overrides(duration_s=args.duration)
        t0 = time.perf_counter()
        cluster = prepare(sc)
        prep = time.perf_counter() - t0
        base = None
        for policy in sc.policies:
            r = run_policy(sc, cluster, policy)
            base = base or r.wall_s
            table.add_row(name, policy, str(r.records), str(r.counters["creates"]),
                          f"{sc.duration_s:.0f}", f"{r.wall_s:.2f}", f"{r.records / r.wall_s:,.0f}",
                          f"{sc.duration_s / r.wall_s:,.0f}", f"{r.wall_s / base:.2f}x")
        console.print(f"{name}: scenario validation (reads every record once) {prep:.2f} s")
    if not args.whole_only:
        console.print(table)
    sc = load_scenario("paper-32ost").with_overrides(duration_s=args.duration)
    t0 = time.perf_counter()
    run_scenario(sc, jobs=args.jobs)
    wall = time.perf_counter() - t0
    console.print(f"paper-32ost, {sc.duration_s / 3600:g} h, policies {', '.join(sc.policies)}, "
                  f"jobs={args.jobs}: {wall:.1f} s wall (target <= 120 s; ratio {wall / 120:.2f} of target)")
    if args.before:
        from before import ratio_line, wall_in_tree
        snippet = (
            "import time\nfrom lustre_alloc.simulator.runner import run_scenario\n"
            "from lustre_alloc.simulator.scenario import load_scenario\n"
            f"sc = load_scenario('paper-32ost').with_overrides(duration_s={args.duration!r})\n"
            f"t0 = time.perf_counter(); run_scenario(sc, jobs={args.jobs})\n"
            "print('WALL', time.perf_counter() - t0)\n")
        before = wall_in_tree(args.before, snippet)
        console.print(ratio_line(f"paper-32ost whole run vs {args.before}", wall, before))


if __name__ == "__main__":
    main()
