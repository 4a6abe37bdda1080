"""``lustre-alloc-sim``: replay traces in the simulator and compare allocation policies.

Commands::

    lustre-alloc-sim run SCENARIO [--policy P ...] [--out DIR] [--duration S] [--jobs N]
    lustre-alloc-sim validate SCENARIO
    lustre-alloc-sim list
    lustre-alloc-sim scale [--sizes 160,480,800,1024,3600] [--policy P ...] [--duration S]
                           [--jobs N] [--out DIR]     (the paper's Fig. 16/17 study)

SCENARIO is a TOML file or the name of a bundled scenario (``lustre-alloc-sim list``).
Errors are one line on stderr (exit 1 for a bad scenario, 2 for bad usage).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mapper.policies.registry import POLICIES
from simulator.report import summarise, write_outputs
from simulator.runner import prepare, run_scenario
from simulator.scenario import SCENARIO_DIR, ScenarioError, load_scenario


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lustre-alloc-sim", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run a scenario under its policies and print the comparison")
    run.add_argument("scenario", help="scenario TOML file or bundled scenario name")
    run.add_argument("--policy", action="append", metavar="POLICY",
                     help=f"policy to run (repeatable; default: the scenario's). One of: "
                          f"{', '.join(sorted(POLICIES))}")
    run.add_argument("--out", type=Path, default=None,
                     help="output folder for CSV/JSON/PNG (default: results/<scenario>)")
    run.add_argument("--duration", type=float, default=None, help="override duration, seconds")
    run.add_argument("--jobs", type=int, default=min(3, os.cpu_count() or 1),
                     help="policies run in parallel processes (default: min(3, cores))")
    run.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    val = sub.add_parser("validate", help="check a scenario and its workloads without running")
    val.add_argument("scenario")
    sub.add_parser("list", help="list the bundled scenarios")
    from simulator.scalability import add_arguments
    add_arguments(sub.add_parser("scale", help="scalability study: 160-3600 OSTs, every policy "
                                               "(paper Fig. 16/17)"))
    return ap


def _table(summaries: list[dict], title: str) -> Table:
    t = Table(title=title)
    cols = [("policy", "policy"), ("OST max/mean start→end", None),
            ("OST h→balance", "ost_hours_to_balance"), ("OST Jain end", "ost_jain_end"),
            ("OSS CPU max/mean (mean)", "oss_cpu_max_mean_mean"),
            ("mean I/O MiB/s", "mean_io_bandwidth_mib_s"), ("alloc µs mean/p99", None),
            ("creates (failed)", None), ("job phase I/O s mean/p99", None),
            ("slowest phase s", None),
            ("policy notes", None)]
    for name, _ in cols:
        t.add_column(name, justify="right" if name != "policy" else "left")
    for s in summaries:
        h = s["ost_hours_to_balance"]
        t.add_row(s["policy"], f"{s['ost_max_mean_start']:.2f}→{s['ost_max_mean_end']:.3f}",
                  "never" if h is None else f"{h:g}", f"{s['ost_jain_end']:.4f}",
                  f"{s['oss_cpu_max_mean_mean']:.3f}", f"{s['mean_io_bandwidth_mib_s']:.1f}",
                  f"{s['alloc_us_mean']:.1f}/{s['alloc_us_p99']:.1f}",
                  f"{s['creates']} ({s['failed_creates']})",
                  "-" if s["phase_io_time_s_mean"] is None
                  else f"{s['phase_io_time_s_mean']:.1f}/{s['phase_io_time_s_p99']:.1f}",
                  "-" if s["slowest_phase"] is None else f"{s['slowest_phase']['io_time_s']:.1f}",
                  str(sum(s["fallbacks"].values())))
    return t


def _run(args: argparse.Namespace, console: Console) -> int:
    sc = load_scenario(args.scenario)
    sc = sc.with_overrides(policies=tuple(args.policy) if args.policy else None,
                           duration_s=args.duration)
    out = args.out or Path("results") / sc.name
    console.print(f"[bold]{sc.name}[/]: {sc.description or sc.path}")
    with Progress(TextColumn("{task.description:>12}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        tasks = {p: bar.add_task(p, total=sc.duration_s) for p in sc.policies}
        results = run_scenario(sc, jobs=args.jobs,
                               progress=lambda p, done, total: bar.update(tasks[p], completed=done))
    summaries = [summarise(r) for r in results]
    console.print(_table(summaries, f"{sc.name}: {sc.duration_s / 3600:g} h simulated"))
    paths = write_outputs(results, out, figures=not args.no_figures)
    console.print(f"wrote {len(paths)} files to {out}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``lustre-alloc-sim``; returns the exit code."""
    args = _parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 150)
    try:
        if args.cmd == "list":
            for p in sorted(SCENARIO_DIR.glob("*.toml")):
                first = load_scenario(p)
                console.print(f"{p.stem:<22} {first.description}")
            return 0
        if args.cmd == "validate":
            sc = load_scenario(args.scenario)
            cluster = prepare(sc)
            console.print(f"{sc.name}: OK ({cluster.ost_count} OSTs on {len(cluster.oss_names)} OSSes, "
                          f"{len(sc.workloads)} workloads, policies {', '.join(sc.policies)})")
            return 0
        if args.cmd == "scale":
            from simulator.scalability import run_cli
            return run_cli(args)
        return _run(args, console)
    except ScenarioError as e:
        print(f"lustre-alloc-sim: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
