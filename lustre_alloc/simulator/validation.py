"""How close the simulator is to a real file system: replay measured jobs as recorded and
compare the simulated I/O time with the measured one (``bench/validate_hacc.py``,
docs/simulator.md "How close to a real file system").

The measurements are the TOKIO "year in the life" summaries of 162 ``hacc_io_write`` jobs on
NERSC Cori's cscratch1 (Lockwood et al., SC18; ``lustre_alloc_data/nersc-pytokio``): each
row names the job's Darshan totals (processes, files, bytes written, I/O time, bandwidth by
the slowest rank), the file system's LMT totals over the job's window (bytes written and
read by everyone), and its health at the job's start (OST count and fullness, OSSes serving
a failed-over partner's OSTs and their overload factor).

Each job is replayed on its file system as recorded (:func:`job_scenario`):

* ``fshealth_ost_count`` OSTs, one per OSS (Cori's Sonexion 2000: two OSSes per SSU, one
  GridRAID OST each), filled as the record's least, mean and most full OST say
  (:func:`fill_spread`);
* the job: ``darshan_biggest_write_api_files`` files (file per process, stripe count 1,
  Cori cscratch1's default) of equal size summing to ``darshan_biggest_write_api_bytes``,
  all created at t = 0 and placed by Lustre's round-robin (or its QOS allocator, restated);
* ``fshealth_ost_overloaded_ost_count`` OSTs (chosen by a seed fixed per job id: the
  record does not name them) served at ``1 / fshealth_ost_avg_overloaded_overload_factor``
  of their bandwidth (a failed-over OSS serves its partner's OSTs too);
* the concurrent load: what the file system wrote and read in the job's window beyond the
  job's own bytes (``fs_tot_bytes_written - darshan_biggest_write_api_bytes``,
  ``fs_tot_bytes_read``) as background traffic spread evenly over the OSTs and the window.

The one parameter fitted is the OST's write bandwidth (MiB/s): on the fitting half of the
jobs (a seeded split) the median of measured over simulated bandwidth scales it once
(:func:`fit_bandwidth`); the error is reported on the held-out half. A row that lacks a field
the replay needs is skipped and counted (:func:`read_jobs`), never guessed.
"""
from __future__ import annotations

import csv
import gzip
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

MIB = 1 << 20

REQUIRED = ("_jobid", "darshan_agg_perf_by_slowest_posix", "darshan_io_time",
            "darshan_biggest_write_api_bytes", "darshan_biggest_write_api_files",
            "darshan_nprocs", "_datetime_start", "_datetime_end", "fs_tot_bytes_written",
            "fs_tot_bytes_read", "fs_ave_bytes_written_per_sec", "fshealth_ost_count",
            "fshealth_ost_avg_full_pct", "fshealth_ost_least_full_pct",
            "fshealth_ost_most_full_pct", "fshealth_ost_overloaded_ost_count",
            "fshealth_ost_avg_overloaded_overload_factor")
"""The summary columns a replay reads (``hacc_io_jobs_summary.csv.gz``)."""

CORI_OST_WRITE_MIB_S = 2700.0
"""Starting OST write bandwidth before the fit, MiB/s: Cori cscratch1's documented peak
of about 700 GB/s over its 248 OSTs (NERSC, "Cori file systems")."""

BACKGROUND_STEP_S = 5.0
"""Background traffic is replayed in steps of this many seconds (LMT's sampling period)."""


class ValidationDataError(ValueError):
    """The measurement file cannot be read at all (one line naming it)."""


@dataclass(frozen=True)
class MeasuredJob:
    """One measured job (units: bytes, seconds, MiB/s).

    Attributes:
        jobid: the batch job id.
        bandwidth_mib_s: Darshan's ``agg_perf_by_slowest`` (POSIX): bytes over the slowest
            rank's I/O time.
        io_time_s: Darshan's I/O time.
        bytes: bytes the job wrote; files: files it wrote.
        window_s: the job's window in the LMT totals (``_datetime_end - _datetime_start``).
        fs_bytes_written, fs_bytes_read: the file system's totals over the window.
        fs_write_load: the file system's mean write rate over the window, bytes/s (the job
            included): the simplest predictor of the job's bandwidth.
        osts: OST count; full_fraction: mean fullness (0..1); least_full, most_full: the
            least and the most full OST's fullness (0..1).
        overloaded_osts: OSTs served by a failed-over partner; overload_factor: how many
            OSTs such an OSS serves.
    """
    jobid: str
    bandwidth_mib_s: float
    io_time_s: float
    bytes: int
    files: int
    window_s: float
    fs_bytes_written: float
    fs_bytes_read: float
    fs_write_load: float
    osts: int
    full_fraction: float
    least_full: float
    most_full: float
    overloaded_osts: int
    overload_factor: float

    @property
    def background_write_bytes(self) -> float:
        """What others wrote in the window (never below 0: LMT's window may cut the job)."""
        return max(0.0, self.fs_bytes_written - self.bytes)


def _number(row: dict[str, str], key: str) -> float:
    """``row[key]`` as a finite float; ValueError naming ``key`` otherwise."""
    try:
        value = float(row[key])
    except ValueError:
        raise ValueError(key) from None
    if not math.isfinite(value):
        raise ValueError(key)
    return value


def read_jobs(path: str | Path) -> tuple[list[MeasuredJob], dict[str, int]]:
    """The measured jobs of a TOKIO summary file, and the rows skipped per missing field.

    A row whose field in :data:`REQUIRED` is empty, not a number, or out of range (no bytes,
    no files, no OSTs, a non-positive window or bandwidth) is skipped and counted under the
    first such field; nothing is filled in.

    Raises:
        ValidationDataError: the file cannot be opened or has no header.
    """
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, EOFError, csv.Error, UnicodeDecodeError) as e:
        raise ValidationDataError(f"{path}: cannot read the job summaries: {e}") from None
    jobs: list[MeasuredJob] = []
    skipped: dict[str, int] = {}
    for row in rows:
        bad = next((k for k in REQUIRED if not (row.get(k) or "").strip()), None)
        if bad is None:
            try:
                job = MeasuredJob(
                    jobid=row["_jobid"].strip(),
                    bandwidth_mib_s=_number(row, "darshan_agg_perf_by_slowest_posix"),
                    io_time_s=_number(row, "darshan_io_time"),
                    bytes=int(_number(row, "darshan_biggest_write_api_bytes")),
                    files=int(_number(row, "darshan_biggest_write_api_files")),
                    window_s=_number(row, "_datetime_end") - _number(row, "_datetime_start"),
                    fs_bytes_written=_number(row, "fs_tot_bytes_written"),
                    fs_bytes_read=_number(row, "fs_tot_bytes_read"),
                    fs_write_load=_number(row, "fs_ave_bytes_written_per_sec"),
                    osts=int(_number(row, "fshealth_ost_count")),
                    full_fraction=_number(row, "fshealth_ost_avg_full_pct") / 100.0,
                    least_full=_number(row, "fshealth_ost_least_full_pct") / 100.0,
                    most_full=_number(row, "fshealth_ost_most_full_pct") / 100.0,
                    overloaded_osts=int(_number(row, "fshealth_ost_overloaded_ost_count")),
                    overload_factor=_number(row, "fshealth_ost_avg_overloaded_overload_factor"))
            except ValueError as e:
                bad = str(e)
            else:
                bad = next((k for k, ok in (
                    ("darshan_biggest_write_api_bytes", job.bytes > 0),
                    ("darshan_biggest_write_api_files", job.files > 0),
                    ("fshealth_ost_count", job.osts > 0),
                    ("_datetime_end", job.window_s > 0),
                    ("darshan_agg_perf_by_slowest_posix", job.bandwidth_mib_s > 0),
                    ("fshealth_ost_avg_full_pct",
                     0.0 <= job.least_full <= job.full_fraction <= job.most_full < 1.0),
                    ("fshealth_ost_overloaded_ost_count", 0 <= job.overloaded_osts <= job.osts))
                    if not ok), None)
                if bad is None:
                    jobs.append(job)
                    continue
        skipped[bad] = skipped.get(bad, 0) + 1
    return jobs, skipped


def split_halves(jobs: Sequence[MeasuredJob], seed: int) -> tuple[list[MeasuredJob],
                                                                   list[MeasuredJob]]:
    """The fitting half and the held-out half: a seeded permutation, the first half fits."""
    order = np.random.default_rng(seed).permutation(len(jobs))
    half = len(jobs) // 2
    return [jobs[i] for i in order[:half]], [jobs[i] for i in order[half:]]


def overloaded_osts(job: MeasuredJob) -> list[int]:
    """Which OSTs the replay serves overloaded: the record gives only their count, so a
    seed fixed by the job id picks them (the same every run)."""
    rng = np.random.default_rng(zlib.crc32(job.jobid.encode()))
    return sorted(int(i) for i in rng.choice(job.osts, size=job.overloaded_osts, replace=False))


def fill_spread(job: MeasuredJob) -> np.ndarray:
    """Per-OST fullness (0..1) with the record's least, mean and most full: the record gives
    only those three, so the OSTs lie on the monotone curve ``lo + (hi - lo) x^k`` over
    ``x`` in [0, 1] whose mean is the recorded one (``k = (hi - lo) / (mean - lo) - 1``),
    shuffled by a seed fixed by the job id. Every OST alike when the three are equal."""
    lo, mean, hi = job.least_full, job.full_fraction, job.most_full
    if hi - lo < 1e-9 or not lo < mean < hi:
        return np.full(job.osts, mean)
    k = (hi - lo) / (mean - lo) - 1.0
    x = np.linspace(0.0, 1.0, job.osts)
    fill = lo + (hi - lo) * x ** k
    fill += mean - fill.mean()              # the discrete curve's mean, exactly the record's
    rng = np.random.default_rng(zlib.crc32(job.jobid.encode()) ^ 0x5EED)
    return np.clip(rng.permutation(fill), 0.0, 0.999)


def job_scenario(job: MeasuredJob, workdir: Path, ost_write_mib_s: float,
                 policy: str = "round_robin") -> Path:
    """Write the scenario replaying ``job`` (module docstring) under ``workdir``; its path.

    The run lasts the measured window plus ten times the measured I/O time (a simulated
    job slower than that is reported unfinished, not cut)."""
    workdir.mkdir(parents=True, exist_ok=True)
    size = job.bytes // job.files
    trace = workdir / "job.csv"
    with trace.open("w") as f:
        f.write("# lustre-alloc trace v1\n")
        f.write("timestamp_s,op,job_id,file_id,bytes,stripe_count,stripe_size,ost,ops\n")
        for i in range(job.files):
            f.write(f"0.000,write,hacc.{job.jobid},hacc/{i:06d},{size},1,{MIB},,1\n")
    background = workdir / "background.csv"
    steps = max(1, math.ceil(job.window_s / BACKGROUND_STEP_S))
    w = int(job.background_write_bytes / steps / job.osts)
    r = int(job.fs_bytes_read / steps / job.osts)
    with background.open("w") as f:
        f.write("# lustre-alloc background v1\n")
        f.write("# source: the TOKIO summary's fs_tot_bytes_written beyond the job's own "
                "bytes and fs_tot_bytes_read, spread evenly\n")
        f.write("timestamp_s,ost,read_bytes,write_bytes\n")
        for s in range(steps):
            for ost in range(job.osts):
                f.write(f"{s * BACKGROUND_STEP_S:.1f},{ost},{r},{w}\n")
    duration = job.window_s + 10 * max(job.io_time_s, 1.0)
    slow = overloaded_osts(job)
    lines = [
        f'name = "validate-hacc-{job.jobid}"',
        f'description = "TOKIO hacc_io_write job {job.jobid} on cscratch1, replayed as recorded"',
        f"duration_s = {duration:.1f}", "step_s = 1.0", "seed = 2018",
        f'policies = ["{policy}"]', "",
        "[cluster]", f"oss_count = {job.osts}", "osts_per_oss = 1",
        "ost_size_gib = 65536", f"ost_bandwidth_mib_s = {ost_write_mib_s:.3f}", "",
        "[cluster.initial_fill]", 'mode = "explicit"',
        f"used_fraction = [{', '.join(f'{f:.4f}' for f in fill_spread(job))}]", "",
        "[[workload]]", f'trace = "{trace}"', "",
        "[[workload]]", f'background = "{background}"', ""]
    if slow:
        lines += ["[[event]]", 'kind = "degrade"', "at_s = 0",
                  f"ost = [{', '.join(map(str, slow))}]",
                  f"fraction = {1.0 / max(job.overload_factor, 1.0):.4f}",
                  f"duration_s = {duration:.1f}", "flagged = false", ""]
    path = workdir / "scenario.toml"
    path.write_text("\n".join(lines))
    return path


@dataclass(frozen=True)
class Replay:
    """One job's replay beside its measurement (MiB/s, seconds)."""
    job: MeasuredJob
    simulated_s: float
    simulated_mib_s: float
    unfinished: bool

    @property
    def error(self) -> float:
        """Signed relative error of the simulated bandwidth against the measured one."""
        return self.simulated_mib_s / self.job.bandwidth_mib_s - 1.0


def replay(job: MeasuredJob, workdir: Path, ost_write_mib_s: float,
           policy: str = "round_robin") -> Replay:
    """Run ``job``'s scenario under ``policy`` (Lustre's own allocator, restated:
    ``lustre_qos``; or ``round_robin``) through the simulator's own runner and read the
    job's I/O time (first byte to last, :class:`lustre_alloc.simulator.job_io.JobIo`)."""
    from lustre_alloc.simulator.runner import prepare, run_policy
    from lustre_alloc.simulator.scenario import load_scenario
    scenario = load_scenario(job_scenario(job, workdir, ost_write_mib_s, policy))
    result = run_policy(scenario, prepare(scenario), policy)
    io = result.jobs[f"hacc.{job.jobid}"]
    took = io.last_byte_s - io.first_io_s
    return Replay(job, took, job.bytes / MIB / took if took > 0 else 0.0, io.unfinished > 0)


def fit_bandwidth(replays: Iterable[Replay], ost_write_mib_s: float) -> float:
    """The OST write bandwidth that makes the fitting half's median bandwidth ratio 1: the
    starting value times the median of measured over simulated bandwidth."""
    ratios = [r.job.bandwidth_mib_s / r.simulated_mib_s for r in replays
              if r.simulated_mib_s > 0 and not r.unfinished]
    if not ratios:
        raise ValueError("no finished replay to fit the bandwidth on")
    return ost_write_mib_s * float(np.median(ratios))


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (scipy.stats.spearmanr), nan with fewer than 3 pairs."""
    if len(a) < 3:
        return float("nan")
    from scipy.stats import spearmanr
    return float(spearmanr(a, b).statistic)


def summarize(replays: Sequence[Replay]) -> dict[str, float]:
    """Median absolute percentage error of the bandwidth, the rank correlation of simulated
    and measured bandwidth, the baselines' (the file system's write load alone, the others' load alone) and the share
of the log-bandwidth variance the simulation explains (:func:`explained_log_variance`)."""
    measured = [r.job.bandwidth_mib_s for r in replays]
    return {
        "jobs": len(replays),
        "mdape": float(np.median([abs(r.error) for r in replays])) if replays else float("nan"),
        "spearman_simulated": spearman([r.simulated_mib_s for r in replays], measured),
        "spearman_fs_write_load": spearman([r.job.fs_write_load for r in replays], measured),
        "spearman_background": spearman([r.job.background_write_bytes / r.job.window_s
                                         for r in replays], measured),
        "explained_log_var": explained_log_variance(replays),
        "unfinished": sum(r.unfinished for r in replays),
    }


def constant_mdape(fit_jobs: Sequence, jobs: Sequence) -> float:
    """The trivial baseline beside the simulator: every job predicted to have the median
    measured bandwidth of ``fit_jobs`` (one number, fitted on the same half as the
    simulator's one parameter); the median absolute percentage error of that over
    ``jobs``. A simulator whose MdAPE is no better than this shows no skill beyond its
    fitted scale."""
    if not fit_jobs or not jobs:
        return float("nan")
    constant = float(np.median([j.bandwidth_mib_s for j in fit_jobs]))
    return float(np.median([abs(constant - j.bandwidth_mib_s) / j.bandwidth_mib_s
                            for j in jobs]))


def explained_log_variance(replays: Sequence[Replay]) -> float:
    """Share of the variance of log measured bandwidth across jobs that the simulated
    bandwidth accounts for: ``1 - var(log m - log s) / var(log m)`` (1: every difference
    between jobs reproduced; 0: no better than one number for all; below 0: worse)."""
    pairs = [(r.job.bandwidth_mib_s, r.simulated_mib_s) for r in replays
             if r.simulated_mib_s > 0]
    if len(pairs) < 3:
        return float("nan")
    m, s = np.log(np.array(pairs)).T
    return float(1.0 - np.var(m - s) / np.var(m)) if np.var(m) > 0 else float("nan")


# ---------------------------------------------------------------------- per file: Darshan
EDISON_OST_MIB_S = 700.0
"""Edison scratch1's OST bandwidth, MiB/s, as the bundled Edison worlds take it (a Sonexion
1600 OST: about 5.6 GB/s per SSU of 8 OSTs)."""
STRAGGLER_FRACTION = 0.020212
"""OST 14's speed in ``sample-badost.darshan``: 1 / 49.475 of the median OST
(:func:`lustre_alloc.traces.darshan_import.ost_write_time_ratios`), as the straggler-ost world takes it."""


def logged_write_times(log: str) -> np.ndarray:
    """Per file the log wrote, its POSIX write time (``POSIX_F_WRITE_TIME``), s, sorted.

    Raises:
        lustre_alloc.traces.darshan_import.DarshanImportError: the log cannot be read.
    """
    from lustre_alloc.traces.darshan_import import file_write_times
    from lustre_alloc.traces.darshan_import import resolve_log
    return np.sort(np.array([t for t, _ in file_write_times(resolve_log(log)).values()]))


def darshan_scenario(log: str, workdir: Path, straggler: bool) -> Path:
    """The scenario replaying Darshan log ``log`` once on Edison scratch1 as the bundled
    Edison worlds build it (the real ``lfs df`` state and OSS map, :data:`EDISON_OST_MIB_S`),
    under round-robin; with ``straggler``, OST 14 at :data:`STRAGGLER_FRACTION`."""
    workdir.mkdir(parents=True, exist_ok=True)
    lines = [f'name = "validate-{Path(log).stem}"', f'description = "{log} replayed once"',
             "duration_s = 7200", "step_s = 0.5", "seed = 2018", 'policies = ["round_robin"]',
             "", "[cluster]", "osts_per_oss = 1", f"ost_bandwidth_mib_s = {EDISON_OST_MIB_S}",
             "", "[cluster.initial_fill]", 'mode = "lfs_df"',
             'path = "pkg:lustre_alloc_data/nersc-pytokio/sample_ost-fullness.txt.gz"',
             'filesystem = "snx11025"', "snapshot = 0",
             'ost_map = "pkg:lustre_alloc_data/nersc-pytokio/sample_ost-map.txt.gz"', "",
             "[[workload]]", f'darshan = "{log}"', ""]
    if straggler:
        lines += ["[[event]]", 'kind = "degrade"', "at_s = 0", "ost = 14",
                  f"fraction = {STRAGGLER_FRACTION}", "flagged = false", ""]
    path = workdir / "scenario.toml"
    path.write_text("\n".join(lines))
    return path


def simulated_write_times(log: str, workdir: Path, straggler: bool) -> np.ndarray:
    """Per file of the replay, its simulated write time (first byte issued to last byte
    landed, ``RunResult.file_write_s``, :class:`lustre_alloc.simulator.engine.RunResult`), s, sorted."""
    from lustre_alloc.simulator.runner import prepare, run_policy
    from lustre_alloc.simulator.scenario import load_scenario
    scenario = load_scenario(darshan_scenario(log, workdir, straggler))
    return np.sort(run_policy(scenario, prepare(scenario), "round_robin").file_write_s)


def compare_distributions(logged: np.ndarray, simulated: np.ndarray) -> dict[str, float]:
    """Quantiles of both (p10, p50, p90, max, s), the max over the median of each, and the
    two-sample Kolmogorov-Smirnov distance (scipy.stats.ks_2samp)."""
    from scipy.stats import ks_2samp
    out: dict[str, float] = {"files_logged": len(logged), "files_simulated": len(simulated)}
    for name, v in (("logged", logged), ("simulated", simulated)):
        q = np.percentile(v, [10, 50, 90, 100])
        out.update({f"{name}_p10": q[0], f"{name}_p50": q[1], f"{name}_p90": q[2],
                    f"{name}_max": q[3], f"{name}_max_over_median": q[3] / q[1]})
    out["ks"] = float(ks_2samp(logged, simulated).statistic)
    return out


__all__ = ["CORI_OST_WRITE_MIB_S", "EDISON_OST_MIB_S", "STRAGGLER_FRACTION",
           "compare_distributions", "darshan_scenario", "logged_write_times",
           "simulated_write_times", "MeasuredJob", "REQUIRED", "Replay", "ValidationDataError",
           "explained_log_variance", "fill_spread", "fit_bandwidth", "job_scenario", "overloaded_osts", "read_jobs", "replay",
           "split_halves", "spearman", "summarize"]
