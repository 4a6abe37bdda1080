"""How close the simulator is to a real file system: the 162 measured ``hacc_io_write`` jobs
on Cori cscratch1 (TOKIO, Lockwood et al. SC18), each replayed as recorded under Lustre's
round-robin (:mod:`lustre_alloc.simulator.validation`), the simulated bandwidth beside the measured.

One parameter is fitted, the OST write bandwidth, on the fitting half of the jobs (a seeded
split, ``--seed``); the table reports the fitting half and the held-out half separately: the
median absolute percentage error of the job's bandwidth, the rank correlation (Spearman)
of simulated and measured bandwidth, and, as the baseline, the rank correlation of the file
system's write load alone (LMT's mean over the job's window, the job's own bytes included)
and of the others' load (the same without the job's bytes). Writes
``<out>/hacc_jobs.csv`` (one row per job) and ``<out>/hacc_scatter.png`` (simulated against
measured, one point per job, the two halves apart). Then the per-file check: PyDarshan's
Lustre logs (sample-goodost: 48 files of 1 GiB; sample-badost: 2048 files of 256 MiB with a
straggler OST) replayed once on Edison scratch1 as the bundled Edison worlds build it, the
distribution of simulated per-file write times beside the logged ones
(:func:`lustre_alloc.simulator.validation.compare_distributions`). docs/simulator.md, "How close to a real
file system", shows the output.

    .venv/bin/python bench/validate_hacc.py [--jobs 2] [--seed 2018] [--out results/validation]
        [--limit N] [--figure docs/figures/hacc-validation.png]
"""
from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.simulator.sweep import run_tasks  # noqa: E402
from lustre_alloc.simulator.validation import (CORI_OST_WRITE_MIB_S, Replay,  # noqa: E402
                                  compare_distributions, fit_bandwidth, logged_write_times,
                                  constant_mdape, read_jobs, replay, simulated_write_times,
                                  split_halves, summarize)

DARSHAN_CASES = (("sample-goodost.darshan", False), ("sample-badost.darshan", True))
"""The per-file check's logs, and whether the replay slows OST 14 (the straggler the log
measured)."""

DATA = ROOT / "lustre_alloc_data/nersc-pytokio/hacc_io_jobs_summary.csv.gz"


def _replay_task(task, report=None) -> Replay:
    job, workdir, bandwidth, policy = task
    return replay(job, Path(workdir), bandwidth, policy)


def _replays(jobs, workdir: Path, bandwidth: float, parallel: int, tag: str,
             policy: str) -> list[Replay]:
    tasks = [(j, str(workdir / f"{tag}-{j.jobid}"), bandwidth, policy) for j in jobs]
    return run_tasks(_replay_task, tasks, [j.jobid for j in jobs], jobs=parallel)


def _row(name: str, s: dict) -> str:
    return (f"| {name} | {s['jobs']} | {s['mdape']:.1%} | {s['spearman_simulated']:+.2f} | "
            f"{s['spearman_fs_write_load']:+.2f} | {s['spearman_background']:+.2f} | "
            f"{s['explained_log_var']:+.2f} | {s['unfinished']} |")


def _scatter(fit: list[Replay], held: list[Replay], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for rs, label, marker in ((fit, "fitting half", "o"), (held, "held-out half", "^")):
        ax.scatter([r.job.bandwidth_mib_s / 1024 for r in rs],
                   [r.simulated_mib_s / 1024 for r in rs], label=label, marker=marker, s=18)
    lo = min(r.job.bandwidth_mib_s for r in fit + held) / 1024 * 0.8
    hi = max(max(r.job.bandwidth_mib_s, r.simulated_mib_s) for r in fit + held) / 1024 * 1.2
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured bandwidth, GiB/s (Darshan, slowest rank)")
    ax.set_ylabel("simulated bandwidth, GiB/s (round-robin replay)")
    ax.set_title("162 hacc_io_write jobs on Cori cscratch1")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DATA), help="TOKIO job summaries (csv or csv.gz)")
    ap.add_argument("--seed", type=int, default=2018, help="the split's seed (2018)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (2)")
    ap.add_argument("--out", default=str(ROOT / "results" / "validation"))
    ap.add_argument("--limit", type=int, default=0, help="replay only the first N jobs")
    ap.add_argument("--policy", default="round_robin",
                    help="the allocator the replay runs: round_robin (default) or lustre_qos "
                         "(Lustre's QOS restated: weighted by free space past qos_threshold_rr)")
    ap.add_argument("--figure", help="also write the scatter plot here "
                                     "(docs/figures/hacc-validation.png in the docs)")
    args = ap.parse_args(argv)
    jobs, skipped = read_jobs(args.data)
    if args.limit:
        jobs = jobs[:args.limit]
    print(f"{len(jobs)} jobs replayed; rows skipped for a missing or bad field: "
          f"{sum(skipped.values())} {skipped or ''}")
    fit_jobs, held_jobs = split_halves(jobs, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="validate-hacc-") as tmp:
        work = Path(tmp)
        first = _replays(fit_jobs, work, CORI_OST_WRITE_MIB_S, args.jobs, "start", args.policy)
        bandwidth = fit_bandwidth(first, CORI_OST_WRITE_MIB_S)
        print(f"OST write bandwidth: {CORI_OST_WRITE_MIB_S:.0f} MiB/s to start "
              f"(700 GB/s over 248 OSTs), fitted on the fitting half: {bandwidth:.0f} MiB/s")
        fit = _replays(fit_jobs, work, bandwidth, args.jobs, "fit", args.policy)
        held = _replays(held_jobs, work, bandwidth, args.jobs, "held", args.policy)
    print()
    print("| half | jobs | bandwidth MdAPE | Spearman simulated | Spearman fs write load "
          "| Spearman others' load | log-variance explained | unfinished |")
    print("|---|---|---|---|---|---|---|---|")
    print(_row("fitting", summarize(fit)))
    print(_row("held-out", summarize(held)))
    print(_row("all", summarize(fit + held)))
    print()
    print("The trivial baseline (every job predicted at the fitting half's median measured "
          "bandwidth): MdAPE fitting "
          f"{constant_mdape(fit_jobs, fit_jobs):.1%}, held-out "
          f"{constant_mdape(fit_jobs, held_jobs):.1%}, all "
          f"{constant_mdape(fit_jobs, fit_jobs + held_jobs):.1%}")
    with (out / "hacc_jobs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["jobid", "half", "measured_mib_s", "simulated_mib_s", "measured_io_s",
                    "simulated_io_s", "fs_write_load_bytes_s", "overloaded_osts",
                    "unfinished"])
        for half, rs in (("fit", fit), ("held-out", held)):
            for r in rs:
                w.writerow([r.job.jobid, half, f"{r.job.bandwidth_mib_s:.0f}",
                            f"{r.simulated_mib_s:.0f}", f"{r.job.io_time_s:.2f}",
                            f"{r.simulated_s:.2f}", f"{r.job.fs_write_load:.0f}",
                            r.job.overloaded_osts, int(r.unfinished)])
    _scatter(fit, held, out / "hacc_scatter.png")
    if args.figure:
        _scatter(fit, held, Path(args.figure))
    print(f"\nper job: {out / 'hacc_jobs.csv'}; scatter: {out / 'hacc_scatter.png'}")
    print()
    print("| log | files | write time p10 / p50 / p90 / max s, logged | simulated "
          "| max/median logged | simulated | KS distance |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="validate-darshan-") as tmp:
        for log, straggler in DARSHAN_CASES:
            c = compare_distributions(logged_write_times(log),
                                      simulated_write_times(log, Path(tmp) / log, straggler))
            q = {who: " / ".join(f"{c[f'{who}_{k}']:.2f}" for k in ("p10", "p50", "p90", "max"))
                 for who in ("logged", "simulated")}
            print(f"| {log}{' (OST 14 slow)' if straggler else ''} | {c['files_logged']} | "
                  f"{q['logged']} | {q['simulated']} | {c['logged_max_over_median']:.1f} | "
                  f"{c['simulated_max_over_median']:.1f} | {c['ks']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
