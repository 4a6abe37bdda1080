"""The migration service in the simulator, both sides of the trade, ``--seeds`` seeds,
each figure a mean +- 95% interval over the seeds. Deterministic per seed.

``readback`` (default): ``readback-slow-ost`` (Lustre's QOS, the same under the mapper's
steering, the oracle) and ``readback-slow-ost-evacuate`` (steering with the migration
service at its defaults, and at ``--share`` values): the read-back jobs' I/O phases (mean,
p99), read transfers unfinished at the end of the day, the writers' phases (mean, p99),
GiB moved and moves done.

``expansion``: ``expansion-25pct-files`` (no migration), ``-files-rebalance`` (the reviewed
plan) and ``-files-migrate`` (the service balancing fill), under Lustre's QOS: OST used
max/mean at hours 7, 12, 18 and 24, the first hour after the expansion at or under 1.05,
the jobs' mean I/O time per transfer, TiB moved.

Usage: ``python bench/migrate_eval.py [readback|expansion] [--seeds 5] [--jobs 2]
[--share 0.5] [--out docs/rebalance/<study>.json] [--render]``.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from lustre_alloc.simulator.rebalance.service_event import MigrateEvent  # noqa: E402
from lustre_alloc.simulator.runner import prepare, run_policy  # noqa: E402
from lustre_alloc.simulator.scenario import load_scenario  # noqa: E402
from lustre_alloc.simulator.seeds import interval  # noqa: E402
from lustre_alloc.simulator.sweep import run_tasks  # noqa: E402

GIB = 1 << 30
BASE, EVAC = "readback-slow-ost", "readback-slow-ost-evacuate"
METRICS = ("read_phase_mean_s", "read_phase_p99_s", "read_transfers_unfinished",
           "write_phase_mean_s", "write_phase_p99_s", "gib_moved", "moves_done")


def _phases(result, reads: bool) -> tuple[list[float], int]:
    done, open_ = [], 0
    for jid, job in result.jobs.items():
        if job.background or jid.endswith(".read") != reads:
            continue
        done += [last - first for first, last, _ in job.phases]
        open_ += job.unfinished
    return done, open_


def summarise(result) -> dict[str, float]:
    """The row's metrics of one run (module doc)."""
    rd, rd_open = _phases(result, True)
    wr, _ = _phases(result, False)
    c = result.counters
    return {"read_phase_mean_s": float(np.mean(rd)) if rd else None,
            "read_phase_p99_s": float(np.percentile(rd, 99)) if rd else None,
            "read_transfers_unfinished": float(rd_open),
            "write_phase_mean_s": float(np.mean(wr)) if wr else None,
            "write_phase_p99_s": float(np.percentile(wr, 99)) if wr else None,
            "gib_moved": c.get("evacuation_bytes_moved", 0.0) / GIB,
            "moves_done": float(c.get("evacuation_moves_done", 0))}


EXPANSION = ("expansion-25pct-files", "expansion-25pct-files-rebalance",
             "expansion-25pct-files-migrate")
EXP_METRICS = ("max_mean_h7", "max_mean_h12", "max_mean_h18", "max_mean_h24",
               "hours_to_1_05", "mean_io_s", "tib_moved")
EXPANSION_AT_H = 6


def summarise_expansion(result) -> dict[str, float]:
    """Max/mean used per hour over the OSTs present, hours to <= 1.05 after the expansion
    (None: not within the run), mean I/O time per transfer (migrations excluded), TiB moved."""
    u = result.ost_used_hourly
    mm = np.nanmax(u, axis=1) / np.nanmean(u, axis=1)
    after = [h for h in range(EXPANSION_AT_H + 1, len(mm)) if mm[h] <= 1.05]
    t = sum(a.io_time_s for a in result.apps.values())
    n = sum(a.transfers for a in result.apps.values())
    c = result.counters
    moved = c.get("evacuation_bytes_moved", 0.0) + c.get("rebalance_bytes_moved", 0.0)
    return {"max_mean_h7": float(mm[7]), "max_mean_h12": float(mm[12]),
            "max_mean_h18": float(mm[18]), "max_mean_h24": float(mm[min(24, len(mm) - 1)]),
            "hours_to_1_05": float(after[0] - EXPANSION_AT_H) if after else None,
            "mean_io_s": t / n if n else 0.0, "tib_moved": moved / (1 << 40)}


def _one(task, report=None) -> dict[str, float]:
    world, policy, seed, share = task
    sc = load_scenario(world).with_seed_offset(seed)
    if share is not None:
        events = tuple(replace(e, budget=replace(e.budget, ost_share=share))
                       if isinstance(e, MigrateEvent) else e for e in sc.rebalance)
        sc = replace(sc, rebalance=events)
    result = run_policy(sc, prepare(sc), policy)
    return summarise_expansion(result) if world in EXPANSION else summarise(result)


def _run(variants: list[tuple], seeds: int, jobs: int, metrics: tuple) -> list[dict]:
    tasks = [(w, p, k, s) for _, w, p, s in variants for k in range(seeds)]
    got = run_tasks(_one, tasks, [f"{t[0]}/{t[1]}#{t[2]}" for t in tasks], jobs=jobs)
    out = []
    for i, (label, world, policy, share) in enumerate(variants):
        runs = got[i * seeds:(i + 1) * seeds]
        row = {"variant": label, "world": world, "policy": policy, "seeds": seeds,
               **{m: interval([r[m] for r in runs]) for m in metrics}, "per_seed": runs}
        if "hours_to_1_05" in metrics:
            row["reached"] = sum(r["hours_to_1_05"] is not None for r in runs)
        out.append(row)
    return out


def rows(seeds: int, shares: list[float], jobs: int) -> list[dict]:
    variants = [("lustre_qos", BASE, "lustre_qos", None),
                ("qos_steer (steering, no evacuation)", BASE, "qos_steer", None),
                ("qos_steer + evacuation (defaults: ost_share 0.1)", EVAC, "qos_steer", None)]
    variants += [(f"qos_steer + evacuation, ost_share {s:g}", EVAC, "qos_steer", s)
                 for s in shares]
    variants.append(("oracle (placement only)", BASE, "oracle", None))
    return _run(variants, seeds, jobs, METRICS)


def expansion_rows(seeds: int, shares: list[float], jobs: int) -> list[dict]:
    variants = [("none", EXPANSION[0], "lustre_qos", None),
                ("reviewed plan (rebalance event, budget 0.5)", EXPANSION[1], "lustre_qos", None),
                ("migration service, balance_fill, ost_share 0.5", EXPANSION[2], "lustre_qos",
                 None)]
    variants += [(f"migration service, balance_fill, ost_share {s:g}", EXPANSION[2],
                  "lustre_qos", s) for s in shares]
    return _run(variants, seeds, jobs, EXP_METRICS)


def _fmt(iv: dict, nd: int = 1) -> str:
    if iv["mean"] is None:
        return "-"
    return f"{iv['mean']:.{nd}f}" + (f" ± {iv['ci95']:.{nd}f}" if iv["ci95"] is not None else "")


def table(out: list[dict]) -> list[str]:
    lines = ["| variant | read-back phase mean s | p99 s | read transfers unfinished | "
             "write phase mean s | p99 s | GiB moved | moves |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out:
        lines.append(f"| {r['variant']} | {_fmt(r['read_phase_mean_s'])} | "
                     f"{_fmt(r['read_phase_p99_s'])} | {_fmt(r['read_transfers_unfinished'])} | "
                     f"{_fmt(r['write_phase_mean_s'])} | {_fmt(r['write_phase_p99_s'])} | "
                     f"{_fmt(r['gib_moved'])} | {_fmt(r['moves_done'], 0)} |")
    return lines


def expansion_table(out: list[dict]) -> list[str]:
    lines = ["| variant | max/mean h7 | h12 | h18 | h24 | seeds at <= 1.05 (hours after) | "
             "job mean I/O s per transfer | TiB moved |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out:
        reached = f"{r['reached']}/{r['seeds']}" + (
            f" ({_fmt(r['hours_to_1_05'])})" if r["reached"] else "")
        lines.append(f"| {r['variant']} | {_fmt(r['max_mean_h7'], 3)} | "
                     f"{_fmt(r['max_mean_h12'], 3)} | {_fmt(r['max_mean_h18'], 3)} | "
                     f"{_fmt(r['max_mean_h24'], 3)} | {reached} | {_fmt(r['mean_io_s'], 2)} | "
                     f"{_fmt(r['tib_moved'])} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study", nargs="?", default="readback", choices=("readback", "expansion"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--share", type=float, action="append", default=[],
                    help="also run the evacuation at this ost_share (repeatable)")
    ap.add_argument("--out", type=Path, default=None, help="save the rows as JSON")
    ap.add_argument("--render", action="store_true", help="print the table of --out, no run")
    args = ap.parse_args(argv)
    render = expansion_table if args.study == "expansion" else table
    if args.render:
        print("\n".join(render(json.loads(args.out.read_text()))))
        return 0
    out = (expansion_rows if args.study == "expansion" else rows)(args.seeds, args.share,
                                                                   args.jobs)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
    print("\n".join(render(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
