"""Wall time of a seed sweep of every bundled world: serial against a Dask LocalCluster.

Runs every bundled scenario's policies under ``--seeds`` seeds twice in the same session,
once one run after the other in this process (``jobs=1``) and once as tasks on a
:class:`distributed.LocalCluster` of ``--jobs`` worker processes
(:func:`lustre_alloc.simulator.runner.run_seeds`), prints both wall times per world and in total with
their ratio, and checks that both gave the same summaries (machine-dependent fields
aside)::

    .venv/bin/python bench/sweep_timing.py --seeds 5 --duration 3600
"""
from __future__ import annotations

import argparse
import sys
import time

from lustre_alloc.simulator.report import run_figures
from lustre_alloc.simulator.runner import run_seeds
from lustre_alloc.simulator.scenario import SCENARIO_DIR, load_scenario



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds per run")
    ap.add_argument("--jobs", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--world", action="append", default=None,
                    help="a bundled world (repeatable; default: all of them)")
    args = ap.parse_args(argv)
    worlds = args.world or sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))
    total = {"serial": 0.0, "local": 0.0}
    differ = []
    print(f"| world | runs | serial s | LocalCluster ({args.jobs} workers) s | ratio |")
    print("|---|---|---|---|---|")
    for w in worlds:
        sc = load_scenario(w).with_overrides(duration_s=args.duration)
        walls, rows = {}, {}
        for mode, jobs in (("serial", 1), ("local", args.jobs)):
            t0 = time.perf_counter()
            rows[mode] = [run_figures(r) for r in run_seeds(sc, args.seeds, jobs=jobs)]
            walls[mode] = time.perf_counter() - t0
            total[mode] += walls[mode]
        if rows["serial"] != rows["local"]:
            differ.append(w)
        print(f"| {w} | {args.seeds * len(sc.policies)} | {walls['serial']:.1f} "
              f"| {walls['local']:.1f} | {walls['local'] / walls['serial']:.2f} |", flush=True)
    print(f"| all | | {total['serial']:.1f} | {total['local']:.1f} "
          f"| {total['local'] / total['serial']:.2f} |")
    if differ:
        print(f"results differ between serial and LocalCluster: {', '.join(differ)}")
        return 1
    print("serial and LocalCluster results identical for every world")
    return 0


if __name__ == "__main__":
    sys.exit(main())
