"""``lustre-alloc-sim``: replay traces in the simulator and compare allocation policies.

Commands::

    lustre-alloc-sim run SCENARIO [--policy P ...] [--out DIR] [--duration S] [--jobs N]
    lustre-alloc-sim validate SCENARIO
    lustre-alloc-sim list
    lustre-alloc-sim scale [--sizes 160,480,800,1024,3600] [--policy P ...] [--duration S]
                           [--jobs N] [--out DIR]     (the paper's Fig. 16/17 study)

SCENARIO is a TOML file or the name of a bundled scenario (``lustre-alloc-sim list``).
Errors are one line on stderr. Exit codes (:mod:`lustre_alloc.common.cli`): 2 for bad usage, an invalid
scenario or a data file it names that is missing or unreadable; 1 when ``list`` found a bundled
scenario that does not load, or for an unexpected internal error (``LUSTRE_ALLOC_DEBUG=1`` shows
its traceback).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lustre_alloc.common.cli import EXIT_FAILED, EXIT_USAGE, OneLineParser, command_parser, fail
from lustre_alloc_data import DataFileError
from lustre_alloc.mapper.policies.registry import POLICIES, SIMULATION_ONLY
from lustre_alloc.simulator.metrics import BALANCED_MAX_MEAN
from lustre_alloc.simulator.report import provenance, summarise_all, write_outputs
from lustre_alloc.simulator.runner import prepare, run_seeds
from lustre_alloc.simulator.seeds import aggregate
from lustre_alloc.simulator.scenario import SCENARIO_DIR, ScenarioError, load_scenario
from lustre_alloc.traces.darshan_import import DarshanImportError
from lustre_alloc.traces.format import TraceFormatError
from lustre_alloc.traces.generators import GeneratorParameterError, HaccDataError

PROG = "lustre-alloc-sim"

CONFIG_ERRORS = (ScenarioError, DataFileError, HaccDataError, GeneratorParameterError,
                 DarshanImportError, TraceFormatError, FileNotFoundError)
"""A scenario, or a data file it names, that cannot be used: one line, exit 2."""


def _parser() -> argparse.ArgumentParser:
    ap = command_parser(PROG, __doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND",
                           parser_class=OneLineParser)
    run = sub.add_parser("run", help="run a scenario under its policies and print the comparison")
    run.add_argument("scenario", help="scenario TOML file or bundled scenario name")
    run.add_argument("--policy", action="append", metavar="POLICY",
                     help=f"policy to run (repeatable; default: the scenario's). One of: "
                          f"{', '.join(sorted(set(POLICIES) | set(SIMULATION_ONLY)))}")
    run.add_argument("--out", type=Path, default=None,
                     help="output folder for CSV/JSON/PNG (default: results/<scenario>)")
    run.add_argument("--duration", type=float, default=None, help="override duration, seconds")
    run.add_argument("--jobs", type=int, default=min(3, os.cpu_count() or 1),
                     help="local Dask worker processes for the runs (default: min(3, cores); "
                          "1: run here, one after the other)")
    run.add_argument("--seeds", type=int, default=1, metavar="N",
                     help="run under N seeds (the scenario's seed + 0..N-1) and report each "
                          "metric's mean and 95%% interval (default 1)")
    run.add_argument("--scheduler", metavar="ADDRESS", default=None,
                     help="run on this Dask scheduler (e.g. tcp://head:8786, started by "
                          "dask-jobqueue) instead of local workers")
    run.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    val = sub.add_parser("validate", help="check a scenario and its workloads without running")
    val.add_argument("scenario")
    sub.add_parser("list", help="list the bundled scenarios")
    from lustre_alloc.simulator.scalability import add_arguments
    add_arguments(sub.add_parser("scale", help="scalability study: 160-3600 OSTs, every policy "
                                               "(paper Fig. 16/17)"))
    return ap


TABLE_COLUMNS = (
    "policy",
    "OST used max/mean\nstart→end",
    f"OST balanced\n(≤{BALANCED_MAX_MEAN}) from hour",
    "OST Jain\nindex end",
    "OSS CPU max/mean\n(run average)",
    "mean I/O\nMiB/s",
    "allocation µs\nmean/p99",
    "files created\n(refused)",
    "creates by a non-\ndefault path",
)


def legend(summaries: list[dict]) -> str:
    """The lines printed under the results table: what every column measures."""
    t = BALANCED_MAX_MEAN
    lines = [
        "OST used max/mean: used bytes of the fullest OST ÷ mean over all OSTs, at start and "
        "end (1.00 = perfectly even).",
        f"OST balanced from hour: first hour after which OST max/mean stays ≤{t} to the end; "
        f"'never ≤{t}' = still above {t} at the end (first hour it dipped to ≤{t} in brackets).",
        "Jain index: (Σx)²/(n·Σx²) of OST used bytes at the end, 1 = equal. OSS CPU: max/mean "
        "of OSS CPU % each step, averaged over the run.",
        "mean I/O MiB/s: bytes moved ÷ time spent transferring, all applications. "
        "allocation µs: time the policy took to choose each new file's OSTs.",
        "files created (refused): new files placed; in brackets, creates refused because no "
        "OST could take them.",
    ]
    notes = sorted({n for s in summaries for n in s["creates_by_note"]})
    if notes:
        lines.append("non-default path: creates the policy placed otherwise than by its own rule: "
                     + "; ".join(f"'{n}' = {NOTE_MEANINGS.get(n.split()[0], n)}" for n in notes)
                     + " (per note: summary_notes.csv).")
    return "\n".join(lines)


NOTE_MEANINGS = {
    "round-robin": "QOS fell back to round-robin (OST free space within qos_threshold_rr, "
                   "as Lustre does)",
    "predicted": "MCMF placed the file on OSTs reserved for it by the predictor",
    "only": "random found fewer OSTs above its free-space floor than the stripe count",
    "fallback": "the gate answered with the fallback allocator",
}


USER_COLUMNS = ("policy", "jobs\n(unfinished)", "job I/O s\nmean/p99", "job slowdown\nmean/p99",
                "job phase I/O s\nmean/p99/max", "headroom captured\nphase mean/p99",
                "file write s\np50/p99", "file read s\np50/p99")
USER_LEGEND = (
    "job I/O s: first byte issued to last byte landed, per job (unfinished jobs: counted, not "
    "timed); slowdown: that time / a lower bound of the job alone on the idle cluster. A job "
    "phase is a job's I/O split at idle gaps >= 60 s (the generators' day-long jobs: their "
    "checkpoints and iterations). Headroom captured: (RR - policy) / (RR - oracle) of the "
    "phase time; oracle is a perfect-information reference (simulation only, not a proven "
    "bound); '-' where the oracle gains < 2% over RR or is not run. File times: first byte to "
    "last byte of each file's writes / reads.")


def _fmt(*values, nd: int = 1) -> str:
    return "/".join("-" if v is None else f"{v:.{nd}f}" for v in values)


def _user_table(summaries: list[dict], title: str) -> Table:
    """The user's metric, one row per policy."""
    t = Table(title=title, caption=USER_LEGEND, caption_justify="left")
    for name in USER_COLUMNS:
        t.add_column(name, justify="right" if name != "policy" else "left")
    for s in summaries:
        t.add_row(s["policy"], f"{s['jobs']} ({s['jobs_unfinished']})",
                  _fmt(s["job_io_time_s_mean"], s["job_io_time_s_p99"]),
                  _fmt(s["job_slowdown_mean"], s["job_slowdown_p99"], nd=2),
                  _fmt(s["phase_io_time_s_mean"], s["phase_io_time_s_p99"],
                       s["slowest_phase_io_time_s"]),
                  _fmt(s.get("headroom_phase_mean"), s.get("headroom_phase_p99"), nd=2),
                  _fmt(s["file_write_s_p50"], s["file_write_s_p99"], nd=2),
                  _fmt(s["file_read_s_p50"], s["file_read_s_p99"], nd=2))
    return t


def _pm(cell: dict, nd: int = 1) -> str:
    """``mean ± ci95`` of an interval (:func:`lustre_alloc.simulator.seeds.interval`)."""
    if cell["mean"] is None:
        return "-"
    return f"{cell['mean']:.{nd}f}" + ("" if cell["ci95"] is None else f" ± {cell['ci95']:.{nd}f}")


def _vs(cell: dict, nd: int = 1) -> str:
    """The difference from RR of an interval, 'n.s.' when its interval includes zero."""
    d = cell.get("vs_round_robin")
    if d is None or d["mean"] is None:
        return "-"
    text = f"{d['mean']:+.{nd}f}" + ("" if d["ci95"] is None else f" ± {d['ci95']:.{nd}f}")
    return text + (" n.s." if d.get("includes_zero") else "")


SEEDS_LEGEND = ("Each cell: mean over the seeds ± the half-width of its 95% interval (Student's t). "
                "vs RR: the per-seed difference from round_robin (same seed, same cluster and "
                "workload); 'n.s.' = its interval includes zero: these seeds show no difference.")


def seeds_table(rows: list[dict], title: str) -> Table:
    """Several seeds of a scenario (:func:`lustre_alloc.simulator.seeds.aggregate`), one row per policy."""
    t = Table(title=title, caption=SEEDS_LEGEND, caption_justify="left")
    for name in ("policy", "phase I/O s mean", "vs RR", "phase I/O s p99", "vs RR",
                 "mean I/O MiB/s", "vs RR", "unfinished\njobs", "headroom captured\nmean/p99"):
        t.add_column(name, justify="right" if name != "policy" else "left")
    for r in rows:
        vs = (lambda cell: "-") if r["policy"] == "round_robin" else _vs
        t.add_row(r["policy"], _pm(r["phase_io_time_s_mean"]), vs(r["phase_io_time_s_mean"]),
                  _pm(r["phase_io_time_s_p99"]), vs(r["phase_io_time_s_p99"]),
                  _pm(r["mean_io_bandwidth_mib_s"]), vs(r["mean_io_bandwidth_mib_s"]),
                  _pm(r["jobs_unfinished"]),
                  f"{_pm(r['headroom_phase_mean'], 2)} / {_pm(r['headroom_phase_p99'], 2)}")
    return t


def _balanced_cell(s: dict) -> str:
    h = s["ost_hours_to_balance"]
    if h is not None:
        return f"{h:g}"
    first = s.get("ost_first_hour_balanced")
    return f"never ≤{BALANCED_MAX_MEAN}" + ("" if first is None else f" (≤ at h {first:g})")


def _table(summaries: list[dict], title: str) -> Table:
    t = Table(title=title, caption=legend(summaries), caption_justify="left")
    for name in TABLE_COLUMNS:
        t.add_column(name, justify="right" if name != "policy" else "left")
    for s in summaries:
        t.add_row(s["policy"], f"{s['ost_max_mean_start']:.2f}→{s['ost_max_mean_end']:.3f}",
                  _balanced_cell(s), f"{s['ost_jain_end']:.4f}",
                  f"{s['oss_cpu_max_mean_mean']:.3f}", f"{s['mean_io_bandwidth_mib_s']:.1f}",
                  f"{s['alloc_us_mean']:.1f}/{s['alloc_us_p99']:.1f}",
                  f"{s['creates']} ({s['failed_creates']})",
                  str(sum(s["creates_by_note"].values())))
    return t


def _run(args: argparse.Namespace, console: Console, argv: Sequence[str]) -> int:
    sc = load_scenario(args.scenario)
    sc = sc.with_overrides(policies=tuple(args.policy) if args.policy else None,
                           duration_s=args.duration)
    out = args.out or Path("results") / sc.name
    console.print(f"[bold]{sc.name}[/]: {sc.description or sc.path}")
    with Progress(TextColumn("{task.description:>12}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        tasks = {(p if k == 0 else f"{p}#{k}"): bar.add_task(p if k == 0 else f"{p}#{k}",
                                                            total=sc.duration_s)
                 for k in range(args.seeds) for p in sc.policies}
        per_seed = run_seeds(sc, args.seeds, jobs=args.jobs, scheduler=args.scheduler,
                             progress=lambda p, done, total: bar.update(tasks[p], completed=done))
    results = per_seed[0]
    summaries = summarise_all(results)
    console.print(_table(summaries, f"{sc.name}: {sc.duration_s / 3600:g} h simulated"))
    console.print(_user_table(summaries, f"{sc.name}: the users' view (job and file I/O times)"))
    seeds = None
    if args.seeds > 1:
        seeds = aggregate([summarise_all(r) for r in per_seed])
        console.print(seeds_table(seeds, f"{sc.name}: {args.seeds} seeds, mean ± 95% interval"))
    paths = write_outputs(results, out, figures=not args.no_figures,
                          provenance=provenance(sc, [PROG, *argv]), seeds=seeds)
    console.print(f"wrote {len(paths)} files to {out}/")
    return 0


def _list(console: Console) -> int:
    """Every bundled scenario with its description; one that does not load is listed with why."""
    status = 0
    for p in sorted(SCENARIO_DIR.glob("*.toml")):
        try:
            console.print(f"{p.stem:<22} {load_scenario(p).description}", highlight=False,
                          soft_wrap=True)
        except CONFIG_ERRORS as e:
            console.print(f"{p.stem:<22} CANNOT LOAD: {' '.join(str(e).split())}", highlight=False,
                          soft_wrap=True)  # one line per scenario, whatever the path length
            status = EXIT_FAILED
    return status


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``lustre-alloc-sim``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 150)
    try:
        if args.cmd == "list":
            return _list(console)
        if args.cmd == "validate":
            sc = load_scenario(args.scenario)
            cluster = prepare(sc)
            console.print(f"{sc.name}: OK ({cluster.ost_count} OSTs on {len(cluster.oss_names)} OSSes, "
                          f"{len(sc.workloads)} workloads, policies {', '.join(sc.policies)})")
            return 0
        if args.cmd == "scale":
            from lustre_alloc.simulator.scalability import run_cli
            return run_cli(args)
        return _run(args, console, argv)
    except CONFIG_ERRORS as e:
        return fail(PROG, e, EXIT_USAGE)
    except Exception as e:  # noqa: BLE001 - one line instead of a traceback, unless debugging
        if os.environ.get("LUSTRE_ALLOC_DEBUG"):
            raise
        return fail(PROG, f"internal error: {type(e).__name__}: {e} "
                          "(LUSTRE_ALLOC_DEBUG=1 shows the traceback)", EXIT_FAILED)


if __name__ == "__main__":
    sys.exit(main())
