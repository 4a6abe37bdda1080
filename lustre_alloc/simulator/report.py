"""Summaries, CSV/JSON files and the paper-style figures of a simulator run.

Files written to the output folder (field meanings: docs/simulator.md, "Output files"):

* ``summary.json``: ``provenance`` (tool version, command line, scenario path and sha256, seed,
  duration, data files), ``balanced_max_mean`` (the threshold of the ``*_hours_to_balance``
  fields) and one object per policy.
* ``summary.csv``: the same per-policy numbers, one row per policy, one number per cell.
* ``summary_apps.csv``: one row per (policy, application): mean I/O bandwidth, MiB/s.
* ``summary_notes.csv``: one row per (policy, note): creates the policy decided by a
  non-default path (QOS falling back to round-robin, MCMF placing from a prediction...).
* ``hourly_<policy>.csv``: per hour: max/mean OST used, CV, Jain's index, mean and
  max/mean OSS CPU (hourly mean of the per-step values), used TiB.
* ``fig_ost_max_mean.png`` (Fig. 1/11), ``fig_oss_cpu_max_mean.png`` (Fig. 2/12),
  ``fig_capacity_box_<policy>.png`` (Fig. 3/14), ``fig_job_io_time.png`` (the user's
  metric: the distribution of job I/O times per policy, an ECDF).
"""
from __future__ import annotations

import csv
import hashlib
import json
import platform
import shlex
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from lustre_alloc.common.version import __version__
from lustre_alloc.simulator.engine import RunResult
from lustre_alloc.simulator.metrics import (BALANCED_MAX_MEAN, coefficient_of_variation, hours_to_balance,
                               jain_index, max_mean_ratio, normalised_capacity,
                               per_step_to_hourly_mean, percentile_or_none)

TIB = float(1 << 40)
MIB = float(1 << 20)


def user_jobs(result: RunResult) -> list:
    """The users' jobs of a run (background replay left out), each a :class:`lustre_alloc.simulator.job_io.JobIo`."""
    return [j for j in result.jobs.values() if not j.background]


def phase_times_s(result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """I/O time and alone lower bound of every I/O phase of every user job, seconds
    (phases: :class:`lustre_alloc.simulator.job_io.JobIo`)."""
    ph = [(last - first, alone) for j in user_jobs(result) for first, last, alone in j.phases]
    a = np.array(ph, dtype=float).reshape(-1, 2)
    return a[:, 0], a[:, 1]


def user_metrics(result: RunResult) -> dict:
    """The user's metric. Per job: I/O time (first I/O to last byte) and
    slowdown against a lower bound of the same job alone on the idle cluster
    (:class:`lustre_alloc.simulator.job_io.JobIo`); the same per I/O phase (a generator's job runs all
    day, its checkpoints and iterations are its phases); per file: write and read time
    (first byte issued to last byte landed). Jobs with transfers stalled or in flight at
    the end are counted, not timed."""
    jobs = [(jid, j) for jid, j in result.jobs.items() if not j.background]
    done = [(jid, j) for jid, j in jobs if not j.unfinished]
    t = np.array([j.io_time_s for _, j in done], dtype=float)
    slow = np.array([j.slowdown for _, j in done], dtype=float)
    pt, palone = phase_times_s(result)
    pslow = np.where(palone > 0, pt / np.where(palone > 0, palone, 1.0), 1.0)

    def r(x, nd=3):
        return None if x is None else round(float(x), nd)
    worst = max(done, key=lambda x: x[1].io_time_s) if done else None
    worst_phase = (None, None, -1.0)
    for jid, j in done:
        for first, last, _ in j.phases:
            if last - first > worst_phase[2]:
                worst_phase = (jid, first, last - first)
    return {
        "jobs": len(jobs), "jobs_unfinished": len(jobs) - len(done),
        "jobs_unmanaged": sum(1 for _, j in jobs if not j.managed),
        "job_io_time_s_mean": r(t.mean()) if t.size else None,
        "job_io_time_s_p99": r(percentile_or_none(t, 99)),
        "slowest_job": None if worst is None else worst[0],
        "slowest_job_io_time_s": None if worst is None else r(worst[1].io_time_s),
        "job_slowdown_mean": r(slow.mean()) if slow.size else None,
        "job_slowdown_p99": r(percentile_or_none(slow, 99)),
        "phases": int(pt.size),
        "phase_io_time_s_mean": r(pt.mean()) if pt.size else None,
        "phase_io_time_s_p50": r(percentile_or_none(pt, 50)),
        "phase_io_time_s_p99": r(percentile_or_none(pt, 99)),
        "phase_slowdown_mean": r(pslow.mean()) if pslow.size else None,
        "phase_slowdown_p99": r(percentile_or_none(pslow, 99)),
        "slowest_phase_job": worst_phase[0],
        "slowest_phase_start_s": r(worst_phase[1], 1),
        "slowest_phase_io_time_s": r(worst_phase[2]) if worst_phase[0] is not None else None,
        "file_write_s_p50": r(percentile_or_none(result.file_write_s, 50), 4),
        "file_write_s_p99": r(percentile_or_none(result.file_write_s, 99), 4),
        "file_read_s_p50": r(percentile_or_none(result.file_read_s, 50), 4),
        "file_read_s_p99": r(percentile_or_none(result.file_read_s, 99), 4),
    }


def summarise(result: RunResult) -> dict:
    """The per-policy summary row (units in the keys)."""
    used = result.ost_used_hourly
    ost_ratio = max_mean_ratio(used)
    cpu_hourly = per_step_to_hourly_mean(result.oss_cpu_max_mean, result.step_s)
    apps = {name: round(a.mean_bandwidth_bytes_s / MIB, 1) for name, a in sorted(result.apps.items())}
    moved = sum(a.bytes_written + a.bytes_read for a in result.apps.values())
    io_time = sum(a.io_time_s for a in result.apps.values())
    alloc = result.alloc_ns / 1e3 if len(result.alloc_ns) else np.zeros(1)
    return {
        "policy": result.policy,
        "ost_max_mean_start": round(float(ost_ratio[0]), 3),
        "ost_max_mean_end": round(float(ost_ratio[-1]), 3),
        "ost_hours_to_balance": hours_to_balance(ost_ratio),
        "ost_first_hour_balanced": _first_hour_at_most(ost_ratio, BALANCED_MAX_MEAN),
        "oss_cpu_max_mean_mean": round(float(result.oss_cpu_max_mean.mean()), 3),
        "oss_cpu_hours_to_balance": hours_to_balance(np.concatenate([[np.inf], cpu_hourly])),
        "ost_cv_end": round(float(coefficient_of_variation(used[-1])), 4),
        "ost_jain_end": round(float(jain_index(used[-1])), 4),
        "mean_io_bandwidth_mib_s": round(moved / io_time / MIB, 1) if io_time > 0 else 0.0,
        "app_mean_io_bandwidth_mib_s": apps,
        "alloc_us_mean": round(float(alloc.mean()), 2),
        "alloc_us_p99": round(float(np.percentile(alloc, 99)), 2),
        "creates": int(result.counters.get("creates", 0)),
        "failed_creates": int(sum(v for k, v in result.counters.items() if k.startswith("create_failed"))),
        "steer_actions": int(result.counters.get("steer_applied", 0)),
        "used_tib_end": round(float(np.nansum(used[-1])) / TIB, 3),
        "creates_by_note": dict(sorted(result.notes.items())),
        "wall_s": round(result.wall_s, 2),
        **user_metrics(result),
    }


HEADROOM_MIN_GAIN = 0.02
"""Headroom captured is reported only where the oracle gains at least this share of
round-robin's time (below it the ratio is noise over noise)."""


def headroom_captured(rr: float | None, policy: float | None, oracle: float | None) -> float | None:
    """``(RR - policy) / (RR - oracle)`` of a time (lower is better): 1 = all of the
    reference's gain over round-robin, 0 = none, < 0 = worse than round-robin; None when a
    value is missing or the oracle gains less than :data:`HEADROOM_MIN_GAIN` of RR's time."""
    if rr is None or policy is None or oracle is None or rr <= 0:
        return None
    gain = rr - oracle
    if gain < HEADROOM_MIN_GAIN * rr:
        return None
    return round((rr - policy) / gain, 3)


MACHINE_FIELDS = ("wall_s", "alloc_us_mean", "alloc_us_p99")
"""Summary fields that measure the machine, not the run (left out when two runs' summaries
are compared)."""


def run_figures(results) -> list[dict]:
    """:func:`summarise_all` of ``results`` without :data:`MACHINE_FIELDS`: what must be
    equal wherever the same runs ran."""
    return [{k: v for k, v in s.items() if k not in MACHINE_FIELDS} for s in summarise_all(results)]


def summarise_all(results) -> list[dict]:
    """:func:`summarise` of each run; when the runs include ``round_robin`` and ``oracle``,
    each row gains ``headroom_phase_mean`` and ``headroom_phase_p99`` (job-phase I/O time,
    :func:`headroom_captured`)."""
    rows = [summarise(r) for r in results]
    by = {s["policy"]: s for s in rows}
    rr, orc = by.get("round_robin"), by.get("oracle")
    if rr is not None and orc is not None:
        for s in rows:
            for key, metric in (("headroom_phase_mean", "phase_io_time_s_mean"),
                                ("headroom_phase_p99", "phase_io_time_s_p99")):
                s[key] = headroom_captured(rr[metric], s[metric], orc[metric])
    return rows


def _first_hour_at_most(ratio_by_hour: np.ndarray, threshold: float) -> float | None:
    """First hour whose max/mean is ≤ ``threshold`` (it may rise again later), or None."""
    at = np.nonzero(np.asarray(ratio_by_hour) <= threshold)[0]
    return float(at[0]) if len(at) else None


def hourly_rows(result: RunResult) -> list[dict]:
    """One row per hour boundary (hour 0 = initial state)."""
    used = result.ost_used_hourly
    ratio = max_mean_ratio(used)
    cv = coefficient_of_variation(used)
    jain = jain_index(used)
    cpu_ratio = per_step_to_hourly_mean(result.oss_cpu_max_mean, result.step_s)
    cpu_mean = per_step_to_hourly_mean(result.oss_cpu_mean, result.step_s)
    rows = []
    for h in range(len(used)):
        c = h - 1  # CPU of the hour ending at boundary h
        rows.append({"hour": h, "ost_used_max_mean": round(float(ratio[h]), 4),
                     "ost_used_cv": round(float(cv[h]), 5), "ost_used_jain": round(float(jain[h]), 5),
                     "used_tib": round(float(np.nansum(used[h])) / TIB, 4),
                     "oss_cpu_max_mean": round(float(cpu_ratio[c]), 4) if 0 <= c < len(cpu_ratio) else "",
                     "oss_cpu_mean_pct": round(float(cpu_mean[c]), 3) if 0 <= c < len(cpu_mean) else ""})
    return rows


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def provenance(scenario, command_line: Sequence[str]) -> dict:
    """What produced a run, for ``summary.json``: enough to repeat it and to tell two runs apart.

    ``scenario`` is a :class:`lustre_alloc.simulator.scenario.Scenario` (after command-line overrides);
    ``command_line`` the argv as typed (program name first).
    """
    data = {}
    fill = scenario.cluster.initial_fill
    for key in ("path", "ost_map"):
        f = getattr(fill, key, None)
        if f:
            data[f"cluster.initial_fill.{key}"] = {"path": str(f), "sha256": sha256_of(Path(f))}
    for i, w in enumerate(scenario.workloads):
        if w.kind == "trace" or (w.kind == "darshan" and Path(w.source).is_file()):
            f = Path(w.source)
        elif w.kind == "darshan":  # a log shipped with PyDarshan, by name
            from lustre_alloc.traces.darshan_import import resolve_log
            f = resolve_log(w.source)
        else:
            continue
        data[f"workload[{i}].{w.kind}"] = {"path": str(f), "sha256": sha256_of(f)}
    return {
        "tool": "lustre-alloc-sim",
        "version": __version__,
        "command_line": shlex.join(command_line),
        "scenario_name": scenario.name,
        "scenario_path": str(Path(scenario.path).resolve()),
        "scenario_sha256": sha256_of(Path(scenario.path)),
        "seed": scenario.seed,
        "duration_s": scenario.duration_s,
        "policies": list(scenario.policies),
        "data_files": data,
        "python": platform.python_version(),
        "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _write_csv(path: Path, rows: list[dict], fields: Sequence[str]) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(fields))
        w.writeheader()
        w.writerows(rows)
    return path


def write_outputs(results: Sequence[RunResult], out: Path, figures: bool = True,
                  provenance: dict | None = None, seeds: list[dict] | None = None) -> list[Path]:
    """Write summaries, hourly CSVs and (optionally) the figures; returns the paths.

    ``provenance`` (see :func:`provenance`) goes into ``summary.json`` as is, and so do the
    aggregates over several seeds (:func:`lustre_alloc.simulator.seeds.aggregate`) as ``seeds``.
    """
    out.mkdir(parents=True, exist_ok=True)
    written = []
    summaries = summarise_all(results)
    p = out / "summary.json"
    p.write_text(json.dumps({"scenario": results[0].scenario if results else "",
                             "provenance": provenance or {},
                             "balanced_max_mean": BALANCED_MAX_MEAN,
                             "policies": summaries,
                             **({"seeds": seeds} if seeds else {})}, indent=2))
    written.append(p)
    # Tidy CSVs: one number per cell; the per-application and per-note breakdowns are rows of
    # their own files rather than JSON inside a cell.
    nested = ("app_mean_io_bandwidth_mib_s", "creates_by_note")
    flat = [{k: v for k, v in s.items() if k not in nested} for s in summaries]
    written.append(_write_csv(out / "summary.csv", flat, list(flat[0]) if flat else ["policy"]))
    apps = [{"policy": s["policy"], "application": app, "mean_io_bandwidth_mib_s": bw}
            for s in summaries for app, bw in s["app_mean_io_bandwidth_mib_s"].items()]
    written.append(_write_csv(out / "summary_apps.csv", apps,
                              ["policy", "application", "mean_io_bandwidth_mib_s"]))
    notes = [{"policy": s["policy"], "note": note, "creates": n}
             for s in summaries for note, n in s["creates_by_note"].items()]
    written.append(_write_csv(out / "summary_notes.csv", notes, ["policy", "note", "creates"]))
    for r in results:
        rows = hourly_rows(r)
        written.append(_write_csv(out / f"hourly_{r.policy}.csv", rows, list(rows[0])))
    if figures:
        written += _figures(results, out)
    return written


def _figures(results: Sequence[RunResult], out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(7, 4))
    # Distinct markers and dashes: identical series (QOS falling back to RR) stay visible.
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("x", "-.")]
    for i, r in enumerate(results):
        marker, ls = styles[i % len(styles)]
        ax.plot(r.hours, max_mean_ratio(r.ost_used_hourly), marker=marker, ls=ls, ms=4,
                label=r.policy)
    ax.axhline(BALANCED_MAX_MEAN, color="grey", lw=0.8, ls="--",
               label=f"balanced: max/mean ≤ {BALANCED_MAX_MEAN}")
    ax.set(xlabel="Time (hours)", ylabel="Max/Mean OST used space",
           title=f"{results[0].scenario}: OST load balance (cf. paper Fig. 1/11)")
    ax.legend()
    fig.tight_layout()
    paths.append(out / "fig_ost_max_mean.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        t_h = np.arange(len(r.oss_cpu_max_mean)) * r.step_s / 3600.0
        stride = max(1, len(t_h) // 4000)  # plot at most ~4000 points per policy
        ax.plot(t_h[::stride], r.oss_cpu_max_mean[::stride], lw=0.6, label=r.policy)
    ax.axhline(BALANCED_MAX_MEAN, color="grey", lw=0.8, ls="--",
               label=f"balanced: max/mean ≤ {BALANCED_MAX_MEAN}")
    ax.set(xlabel="Time (hours)", ylabel="Max/Mean OSS CPU",
           title=f"{results[0].scenario}: OSS CPU balance per step (cf. paper Fig. 2/12)")
    ax.legend()
    fig.tight_layout()
    paths.append(out / "fig_oss_cpu_max_mean.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(results):
        t = np.sort(phase_times_s(r)[0])
        t = t[t > 0]
        if t.size:
            marker, ls = styles[i % len(styles)]
            ax.step(t, np.arange(1, t.size + 1) / t.size, where="post", ls=ls, label=r.policy)
    ax.set(xlabel="I/O time of a job phase, first I/O to last byte (s)",
           ylabel="fraction of job I/O phases",
           title=f"{results[0].scenario}: job I/O time distribution per policy", xscale="log")
    ax.legend()
    fig.tight_layout()
    paths.append(out / "fig_job_io_time.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    for r in results:
        norm = normalised_capacity(r.ost_free_hourly[1:])
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.boxplot([h[~np.isnan(h)] for h in norm], positions=np.arange(1, len(norm) + 1), widths=0.6,
                   flierprops={"markersize": 2})
        ax.set(xlabel="Time (hours)", ylabel="OST free space / median",
               title=f"{r.scenario}: normalised OST capacity, {r.policy} (cf. paper Fig. 3/14)")
        fig.tight_layout()
        paths.append(out / f"fig_capacity_box_{r.policy}.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths
