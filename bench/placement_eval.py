"""Placement evaluation: jobs' I/O time under mcmf variants vs Lustre's allocators.

One command per scenario (docs/placement.md, "Job I/O time"); prints a Markdown table
and writes ``<out>/<scenario>.json``::

    python bench/placement_eval.py paper-32ost --duration 14400
    python bench/placement_eval.py scale-800 --duration 600
    python bench/placement_eval.py SCENARIO --variant 'rate=mcmf_flow:{"cost_model": "rate"}'

``SCENARIO`` is a bundled scenario name or TOML path, or ``scale-<OSTs>`` (uniform) or
``scale-<OSTs>-hetero`` (the LMT-measured OST spread) for the scalability study's
scenario of that size (:func:`simulator.scalability.scale_scenario_toml`,
8 OSTs per OSS). Scenario parameters are never changed here; ``--duration`` only cuts
the run short.

Per variant: the user's metric as the simulator's report computes it
(:func:`simulator.report.user_metrics`): job I/O time (first I/O to last byte) mean, and
the same per I/O phase (a generator's job runs all day; its checkpoints and iterations
are its phases): mean, p99 and the slowest phase; mean I/O bandwidth (all bytes
moved over summed transfer time, the simulator's figure); OST used max/mean at hour 4
(or at the end of shorter runs); OST-hours below the ENOSPC watermark at the hourly
samples and bytes lost to ENOSPC. The simulator runs the mapper's own policies.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mapper.policies.gate import GatedPolicy
from mapper.policies.mcmf import McmfPolicy
from mapper.policies.registry import make_policy
from simulator.engine import Simulation
from simulator.oracle import ORACLE, Oracle
from simulator.sweep import run_tasks
from simulator.metrics import max_mean_ratio
from simulator.report import user_metrics

DEFAULT_VARIANTS = (
    ("round_robin", "round_robin", {}),
    ("lustre_qos", "lustre_qos", {}),
    ("mcmf", "mcmf", {}),
    ("mcmf_flow", "mcmf_flow", {}),
    ("oracle", "oracle", {}),
)


def _scenario(name: str, duration: float | None):
    from simulator.scenario import load_scenario
    if name.startswith("scale-"):
        from simulator.scalability import SIZES, scale_scenario_toml
        parts = name.split("-")
        osts = int(parts[1])
        osses = dict(SIZES).get(osts, osts // 8)
        d = tempfile.mkdtemp()
        p = Path(d) / f"{name}.toml"
        p.write_text(scale_scenario_toml(osts, osses, duration_s=duration or 600.0,
                                         hetero=parts[-1] == "hetero"))
        return load_scenario(p)
    sc = load_scenario(name)
    if duration:
        from dataclasses import replace
        sc = replace(sc, duration_s=float(duration))
    return sc


def _build(seed: int, policy: str, params: dict):
    if policy == ORACLE:
        return Oracle(seed=seed)            # the perfect-information reference
    params = dict(params)
    fallback = params.pop("fallback", "lustre_qos")
    gate = {k: params.pop(k) for k in ("mds_cpu_limit_percent",) if k in params}
    pol = make_policy(policy, seed=seed, **params)
    if not getattr(pol, "needs_gate", False):
        return pol
    return GatedPolicy(pol, make_policy(fallback, seed=seed), **gate)


def run_variant(scenario: str, duration: float | None, label: str, policy: str,
                params: dict) -> dict:
    """One variant's run; a dict of the table's figures."""
    from simulator.cluster import KIB, MIB
    from simulator.network.model import make_network
    from simulator.runner import prepare
    from simulator.workload import scenario_records
    sc = _scenario(scenario, duration)
    cluster = prepare(sc)
    sim = Simulation(sc, cluster, _build(sc.seed, policy, params), scenario_records(sc),
                     make_network(sc.network, **sc.network_params))
    t0 = time.perf_counter()
    r = sim.run()
    inner = getattr(sim.policy, "primary", sim.policy)
    extra = {"policy_stats": dict(getattr(inner, "stats", {})),
             "app_accuracy": ({k: [round(v, 1) for v in hn] for k, hn in inner.gate.accuracy.items()}
                              if isinstance(inner, McmfPolicy) else {})}
    um = user_metrics(r)
    mine = {k: j for k, j in r.jobs.items() if not j.background}
    moved = sum(a.bytes_written + a.bytes_read for a in r.apps.values())
    io_time = sum(a.io_time_s for a in r.apps.values())
    h = min(4, len(r.hours) - 1)
    used_h = r.ost_used_hourly[h] if h >= 1 else sim.used
    low = np.maximum(1, (r.ost_capacity_bytes // KIB).astype(np.int64) >> 20) * MIB
    below = int((r.ost_free_hourly[1:] < low[None, :]).sum())
    below += int(((r.ost_capacity_bytes - sim.used) < low).sum())
    return {
        "variant": label, "policy": policy, "params": params,
        "jobs": um["jobs"], "jobs_unfinished": um["jobs_unfinished"],
        "job_io_mean_s": um["job_io_time_s_mean"] or 0.0,
        "job_io_p99_s": um["job_io_time_s_p99"] or 0.0,
        "job_io_max_s": um["slowest_job_io_time_s"] or 0.0,
        "slowdown_mean": um["job_slowdown_mean"],
        "phases": um["phases"], "phase_io_mean_s": um["phase_io_time_s_mean"] or 0.0,
        "phase_io_p99_s": um["phase_io_time_s_p99"] or 0.0,
        "phase_io_p50_s": um["phase_io_time_s_p50"] or 0.0,
        "phase_io_max_s": um["slowest_phase_io_time_s"] or 0.0,
        "phase_slowdown_mean": um["phase_slowdown_mean"],
        "file_write_p50_s": um["file_write_s_p50"], "file_write_p99_s": um["file_write_s_p99"],
        "file_read_p50_s": um["file_read_s_p50"],
        "file_write_mean_s": float(r.file_write_s.mean()) if len(r.file_write_s) else 0.0,
        "unfinished_transfers": int(r.counters.get("transfers_unfinished", 0)),
        "bandwidth_mib_s": moved / io_time / MIB if io_time > 0 else 0.0,
        "ost_max_mean_h4": float(max_mean_ratio(used_h)), "hour_of_max_mean": h if h >= 1 else None,
        "ost_max_mean_end": float(max_mean_ratio(sim.used)),
        "oss_cpu_max_mean": float(r.oss_cpu_max_mean.mean()),
        "ost_samples_below_watermark": below,
        "bytes_lost_enospc": float(r.counters.get("bytes_lost_enospc", 0.0)),
        "creates": int(r.counters.get("creates", 0)),
        "failed_creates": int(sum(v for k, v in r.counters.items() if k.startswith("create_failed"))),
        "notes": dict(r.notes), "wall_s": time.perf_counter() - t0,
        "job_io_s": {k: round(j.io_time_s, 1) for k, j in sorted(mine.items())}, **extra,
    }


def parse_variant(text: str) -> tuple[str, str, dict]:
    """``label=policy:{json params}`` or ``label=policy`` or ``policy``."""
    label, _, rest = text.partition("=")
    if not rest:
        rest = label
    policy, _, js = rest.partition(":")
    try:
        params = json.loads(js) if js else {}
    except json.JSONDecodeError as e:
        raise SystemExit(f"--variant {text!r}: parameters are not JSON: {e}")
    return label, policy, params


def table(rows: list[dict], base: str = "round_robin") -> list[str]:
    """Markdown table; changes relative to the ``base`` variant."""
    ref = next((r for r in rows if r["variant"] == base), None)
    out = ["| variant | jobs | job I/O mean s | vs RR | phases | phase mean s | vs RR "
           "| phase p50 s | phase p99 s | vs RR | slowest phase s | MiB/s | vs RR | OST max/mean h4 "
           "| end | OSS CPU max/mean | below watermark | failed creates |",
           "|" + "---|" * 18]
    for r in rows:
        def rel(key):
            if ref is None or not ref[key]:
                return "-"
            return f"{100 * (r[key] / ref[key] - 1):+.1f}%"
        p50 = f"{r['phase_io_p50_s']:.1f}" if "phase_io_p50_s" in r else "-"
        out.append(
            f"| {r['variant']} | {r['jobs']} | {r['job_io_mean_s']:.1f} | {rel('job_io_mean_s')} "
            f"| {r['phases']} | {r['phase_io_mean_s']:.1f} | {rel('phase_io_mean_s')} "
            f"| {p50} | {r['phase_io_p99_s']:.1f} "
            f"| {rel('phase_io_p99_s')} | {r['phase_io_max_s']:.1f} "
            f"| {r['bandwidth_mib_s']:.1f} | {rel('bandwidth_mib_s')} "
            f"| {r['ost_max_mean_h4']:.3f} | {r['ost_max_mean_end']:.3f} "
            f"| {r['oss_cpu_max_mean']:.3f} | {r['ost_samples_below_watermark']} "
            f"| {r['failed_creates']} |")
    return out


def _variant_task(task: tuple, report=None) -> dict:
    """One variant as a sweep task (:mod:`simulator.sweep`)."""
    return run_variant(*task)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: the scenario's)")
    ap.add_argument("--variant", action="append", default=None,
                    help="label=policy:{json params}; repeatable (default: RR, QOS, mcmf, mcmf_flow)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bench/results/placement"))
    ap.add_argument("--render", action="store_true",
                    help="print the table of <out>/<scenario>.json without running")
    args = ap.parse_args(argv)
    if args.render:
        rows = json.loads((args.out / f"{Path(args.scenario).stem}.json").read_text())
        print("\n".join(table(rows)))
        return 0
    variants = [parse_variant(v) for v in args.variant] if args.variant else list(DEFAULT_VARIANTS)
    t0 = time.perf_counter()
    rows = run_tasks(_variant_task, [(args.scenario, args.duration, lab, pol, par)
                                     for lab, pol, par in variants],
                     [lab for lab, _, _ in variants], jobs=max(1, args.jobs))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    (args.out / f"{stem}.json").write_text(json.dumps(rows, indent=1, default=str))
    dur = f", {args.duration:g} s" if args.duration else ""
    print(f"{args.scenario}{dur} (wall {time.perf_counter() - t0:.0f} s)")
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
