"""What the simulator's measured error means for the placement tables: the headline worlds
re-run with every OST's bandwidth moved across the error band the validation measured
(``bench/validate_hacc.py``: the held-out jobs' signed bandwidth error, 10th and 90th
percentiles), and the conclusions checked in each: mcmf against Lustre's round-robin (I/O
phase mean and p99), the share of the oracle's gain mcmf captures, and on the uniform world
mcmf equal to round-robin.

A simulated bandwidth ``e`` above the measured one means the real OSTs are slower than the
model by ``1 / (1 + e)``: each band edge scales the OSTs' write and read bandwidth by that
factor (the straggler's and the failover's ratios stay as the scenario gives them). Scenario
files are not changed; the scale is applied to the built cluster.

    .venv/bin/python bench/validation_band.py [--worlds straggler-ost,failover-half,paper-32ost]
        [--seeds 3] [--duration 14400] [--jobs 2] [--errors results/validation/hacc_jobs.csv]
"""
from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.simulator.seeds import interval  # noqa: E402
from lustre_alloc.simulator.sweep import run_tasks  # noqa: E402

POLICIES = ("round_robin", "mcmf", "oracle")


def band(errors_csv: Path) -> tuple[float, float]:
    """The held-out jobs' signed bandwidth error, 10th and 90th percentiles."""
    with errors_csv.open() as f:
        rows = [r for r in csv.DictReader(f) if r["half"] == "held-out"]
    err = [float(r["simulated_mib_s"]) / float(r["measured_mib_s"]) - 1.0 for r in rows]
    lo, hi = np.percentile(err, [10, 90])
    return float(lo), float(hi)


def _run(task, report=None) -> dict:
    world, scale, policy, seed_offset, duration = task
    from lustre_alloc.simulator.report import user_metrics
    from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy
    from lustre_alloc.simulator.scenario import load_scenario
    sc = load_scenario(world).with_seed_offset(seed_offset)
    if duration:
        sc = replace(sc, duration_s=float(duration))
    cluster = prepare(sc)
    read = cluster.read_bandwidth_bytes_s
    cluster = replace(cluster, bandwidth_bytes_s=cluster.bandwidth_bytes_s * scale,
                      read_bandwidth_bytes_s=None if read is None else read * scale)
    um = user_metrics(build_simulation(sc, cluster, scenario_policy(sc, policy)).run())
    return {"world": world, "scale": scale, "policy": policy, "seed": seed_offset,
            "phase_mean_s": um["phase_io_time_s_mean"] or 0.0,
            "phase_p99_s": um["phase_io_time_s_p99"] or 0.0}


def _pm(values: list[float], digits: int = 2) -> str:
    iv = interval(values)
    if iv["mean"] is None:
        return "-"
    return (f"{iv['mean']:.{digits}f} ± {iv['ci95']:.{digits}f}" if iv["ci95"] is not None
            else f"{iv['mean']:.{digits}f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", default="straggler-ost,failover-half,paper-32ost")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=14400.0,
                    help="seconds of each world (the first hours; 0: the whole world)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--errors", default=str(ROOT / "results/validation/hacc_jobs.csv"))
    args = ap.parse_args(argv)
    lo, hi = band(Path(args.errors))
    scales = (1.0 / (1.0 + lo), 1.0, 1.0 / (1.0 + hi))
    print(f"held-out bandwidth error p10 {lo:+.1%}, p90 {hi:+.1%}: OST bandwidth x "
          f"{scales[0]:.3f}, x 1, x {scales[2]:.3f}")
    worlds = args.worlds.split(",")
    tasks = [(w, s, p, k, args.duration) for w in worlds for s in scales for p in POLICIES
             for k in range(args.seeds)]
    rows = run_tasks(_run, tasks, [f"{t[0]}:{t[1]:.2f}:{t[2]}#{t[3]}" for t in tasks],
                     jobs=args.jobs)
    print()
    print("| world | OST bandwidth | mcmf / RR phase mean | mcmf / RR phase p99 "
          "| headroom captured, mean | headroom captured, p99 |")
    print("|---|---|---|---|---|---|")
    for w in worlds:
        for s in scales:
            got = {p: sorted((r for r in rows if (r["world"], r["scale"], r["policy"])
                              == (w, s, p)), key=lambda r: r["seed"]) for p in POLICIES}
            cells = []
            for metric in ("phase_mean_s", "phase_p99_s"):
                cells.append(_pm([m[metric] / b[metric] for m, b in
                                  zip(got["mcmf"], got["round_robin"]) if b[metric]]))
            for metric in ("phase_mean_s", "phase_p99_s"):
                shares = []
                for rr, m, o in zip(got["round_robin"], got["mcmf"], got["oracle"]):
                    gain = rr[metric] - o[metric]
                    if gain > 0.01 * rr[metric]:
                        shares.append((rr[metric] - m[metric]) / gain)
                cells.append(_pm(shares) if shares else "- (no headroom)")
            print(f"| {w} | x {s:.3f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
