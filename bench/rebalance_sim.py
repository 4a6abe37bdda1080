"""Measure rebalancing in the simulator: balance, jobs' I/O time, bytes moved.

Runs a scenario and its rebalancing variant under one policy and prints, per run: OST
max/mean used space at hours 4, 8, 12, 24 and its maximum over hours 4-24; the jobs'
mean I/O time per transfer (seconds, every application's transfers, migrations
excluded) and its change against the run without rebalancing; bytes moved; moves
done/planned; writes held by a migration; the rebalance plans' log.

Simulated results are deterministic (fixed seeds); only the wall time varies.
Usage: ``python bench/rebalance_sim.py [--base paper-32ost] [--with paper-32ost-rebalance]
[--policy mcmf] [--log]``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from lustre_alloc.simulator.runner import prepare, run_policy  # noqa: E402
from lustre_alloc.simulator.scenario import load_scenario  # noqa: E402

GIB = 1 << 30


def mean_io_time_s(result) -> float:
    """Summed transfer time / transfers over every application (migrations excluded)."""
    t = sum(a.io_time_s for a in result.apps.values())
    n = sum(a.transfers for a in result.apps.values())
    return t / n if n else 0.0


def nan_max_mean(used_hourly: np.ndarray) -> np.ndarray:
    """Max/mean per hour over the OSTs present (absent ones are NaN before an expansion)."""
    return np.nanmax(used_hourly, axis=1) / np.nanmean(used_hourly, axis=1)


def new_ost_fill(res, initial_osts: int) -> np.ndarray:
    """Per hour: mean fill of the OSTs added by an expansion / mean fill of all present
    OSTs (1.0 = the new OSTs reached the mean). NaN before they exist."""
    fill = res.ost_used_hourly / res.ost_capacity_bytes[None, :]
    with np.errstate(invalid="ignore"):
        return np.nanmean(fill[:, initial_osts:], axis=1) / np.nanmean(fill, axis=1)


def measure(name: str, policy: str) -> dict:
    sc = load_scenario(name).with_overrides(policies=(policy,))
    cl = prepare(sc)
    res = run_policy(sc, cl, policy)
    ratio = nan_max_mean(res.ost_used_hourly)
    c = res.counters
    return {"scenario": name, "policy": policy, "ratio": ratio,
            "max_h4_24": float(ratio[4:].max()), "io_s": mean_io_time_s(res),
            "moved_gib": c.get("rebalance_bytes_moved", 0.0) / GIB,
            "moves": (c.get("rebalance_moves_done", 0), c.get("rebalance_moves_planned", 0)),
            "held": c.get("rebalance_writes_held", 0), "log": res.rebalance_log,
            "wall_s": res.wall_s, "counters": c,
            "new_fill": new_ost_fill(res, cl.ost_count) if res.ost_used_hourly.shape[1] > cl.ost_count
            else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="paper-32ost")
    ap.add_argument("--with", dest="variant", action="append")
    ap.add_argument("--policy", default="mcmf")
    ap.add_argument("--log", action="store_true", help="print every plan")
    args = ap.parse_args(argv)
    variants = args.variant or ["paper-32ost-rebalance"]
    base = measure(args.base, args.policy)
    rows = [base] + [measure(v, args.policy) for v in variants]
    print("| scenario | policy | max/mean h4 | h8 | h12 | h24 | max h4-24 | mean I/O s | vs base "
          "| GiB moved | moves done/planned | writes held |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q = r["ratio"]
        d = (r["io_s"] / base["io_s"] - 1) * 100 if base["io_s"] else 0.0
        print(f"| {r['scenario']} | {r['policy']} | {q[4]:.3f} | {q[8]:.3f} | {q[12]:.3f} | "
              f"{q[-1]:.3f} | {r['max_h4_24']:.3f} | {r['io_s']:.3f} | {d:+.1f}% | "
              f"{r['moved_gib']:.0f} | {r['moves'][0]}/{r['moves'][1]} | {r['held']} |")
    if any(r["new_fill"] is not None for r in rows):
        print("\nnew OSTs' mean fill / mean fill of all OSTs, by hour:")
        print("| scenario | " + " | ".join(f"h{h}" for h in (6, 7, 8, 10, 12, 18, 24)) + " |")
        print("|---|" + "---|" * 7)
        for r in rows:
            nf = r["new_fill"]
            if nf is not None:
                print(f"| {r['scenario']} | " + " | ".join(f"{nf[h]:.3f}" for h in (6, 7, 8, 10, 12, 18, 24)) + " |")
    if args.log:
        for r in rows[1:]:
            print(f"\n{r['scenario']} plans:")
            for e in r["log"]:
                print("  ", e)
            print("  counters:", {k: v for k, v in r["counters"].items() if "rebal" in k})
    return 0


if __name__ == "__main__":
    sys.exit(main())
