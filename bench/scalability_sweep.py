"""The full scalability sweep (Paul et al. 2017, Fig. 16/17) and its wall time.

Runs :mod:`lustre_alloc.simulator.scalability` over the paper's five cluster sizes (160 to 3600
OSTs) and every registered study policy, prints the study table, the paper's numbers
beside ours and the wall time against the issue's target (<= 15 minutes on 2 cores),
and writes the CSV/JSON and both figures.

Usage: .venv/bin/python bench/scalability_sweep.py [--jobs 2] [--duration 600] [--out DIR]
       [--hetero] [--before TREE]

``--hetero`` runs the study with the measured heterogeneity; ``--before TREE`` runs the same
uniform sweep with the code in TREE and prints now/before (bench/before.py).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from lustre_alloc.simulator.scalability import DEFAULT_DURATION_S, add_arguments, run_cli

TARGET_S = 15 * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    ap.add_argument("--before", type=Path, default=None, metavar="TREE",
                    help="a checkout of the earlier code: run the same (uniform) sweep with it "
                         "and print the ratio (bench/before.py)")
    ap.set_defaults(duration=DEFAULT_DURATION_S)
    args = ap.parse_args()
    t0 = time.perf_counter()
    run_cli(args)
    wall = time.perf_counter() - t0
    print(f"full sweep: {wall:.0f} s wall (target <= {TARGET_S} s; ratio {wall / TARGET_S:.2f} of target)")
    if args.before:
        if args.hetero:
            raise SystemExit("--before compares the uniform sweep (the earlier code has no --hetero)")
        from before import ratio_line, wall_in_tree
        from lustre_alloc.simulator.scalability import default_policies, parse_sizes
        snippet = (
            "import time\nfrom lustre_alloc.simulator.scalability import run_study\n"
            f"t0 = time.perf_counter(); run_study({parse_sizes(args.sizes)!r}, "
            f"{args.policy or default_policies()!r}, duration_s={args.duration!r}, jobs={args.jobs}, "
            f"network={args.network!r})\nprint('WALL', time.perf_counter() - t0)\n")
        before = wall_in_tree(args.before, snippet)
        print(ratio_line(f"sweep vs {args.before}", wall, before))


if __name__ == "__main__":
    main()
