"""The full scalability sweep (Paul et al. 2017, Fig. 16/17) and its wall time.

Runs :mod:`simulator.scalability` over the paper's five cluster sizes (160 to 3600
OSTs) and every registered study policy, prints the study table, the paper's numbers
beside ours and the wall time against the issue's target (<= 15 minutes on 2 cores),
and writes the CSV/JSON and both figures.

Usage: .venv/bin/python bench/scalability_sweep.py [--jobs 2] [--duration 600] [--out DIR]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from simulator.scalability import DEFAULT_DURATION_S, add_arguments, run_cli

TARGET_S = 15 * 60


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    ap.set_defaults(out=Path("results") / "scalability", duration=DEFAULT_DURATION_S)
    args = ap.parse_args()
    t0 = time.perf_counter()
    run_cli(args)
    wall = time.perf_counter() - t0
    print(f"full sweep: {wall:.0f} s wall (target <= {TARGET_S} s; ratio {wall / TARGET_S:.2f} of target)")


if __name__ == "__main__":
    main()
