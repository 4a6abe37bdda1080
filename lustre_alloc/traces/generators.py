"""Synthetic traces of the paper's three workloads: IOR, HACC-IO and TPA.

Paul et al. 2017, Section IV-A3 drive their simulator with 24 h of three applications
running together: the IOR benchmark (~20,000 file events/s, a continuous stream of
file-per-process writes), the HACC I/O kernel (~12,000 events/s, periodic checkpoint
bursts) and a transaction processing application (TPA, ~15,000 events/s, from the UMass
storage trace repository's OLTP traces). The original traces are not published, so
these generators rebuild each application's *shape* from public facts and reach the
published rate in POSIX operations per second: one :class:`~lustre_alloc.traces.format.TraceRecord`
aggregates many operations of one file (its ``ops`` column), so a 24 h trace of each
application stays at or below ~60,000 records.

Every generator has the signature::

    fn(duration_s: float, seed: int, jobid: str | None = None, **params)
        -> Iterator[TraceRecord]

yields time-ordered records with ``0 <= timestamp_s < duration_s`` (rounded to the
microsecond the trace writer keeps, so a written trace reads back equal), is deterministic
for a given seed (``numpy.random.default_rng(seed)``), names every file
``<jobid>/...`` so merged traces never collide, and deletes what the application
deletes. Each parameter's docstring line gives its source: the paper, the IOR or
HACC-IO documentation, the NERSC pytokio data file, or "our choice, because ...".

Default volumes (32 OSTs of 8 TiB, the paper's simulated system): in 24 h IOR writes
~13 TiB (and reads it back), HACC-IO ~25 TiB in 24 checkpoints of 1.04 TiB keeping the
last 3, TPA 0.5 TiB of database files plus ~1.5 TiB of small page writes: ~40 TiB in all.
"""
from __future__ import annotations

import csv
import gzip
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from lustre_alloc_data import DataFileError, resource_path
from lustre_alloc.common.lustre import STRIPE_SIZE_UNIT_BYTES
from lustre_alloc.traces.format import TraceRecord

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

PAPER_OST_COUNT = 32
"""OSTs in the paper's simulated system (Section IV-A3: 8 OSSes x 4 OSTs)."""

DEFAULT_HACC_CSV_REF = "pkg:lustre_alloc_data/nersc-pytokio/hacc_io_jobs_summary.csv.gz"
"""The pytokio HACC-IO job summary shipped in the package ``lustre_alloc_data`` (see its SOURCES.md)."""


def default_hacc_csv() -> Path:
    """Filesystem path of :data:`DEFAULT_HACC_CSV_REF` (raises HaccDataError if not installed)."""
    try:
        return resource_path(DEFAULT_HACC_CSV_REF)
    except DataFileError as e:
        raise HaccDataError(f"{e}; pass hacc_csv=<path>") from None


class GeneratorParameterError(ValueError):
    """A generator parameter is out of range; the message names the parameter."""


class HaccDataError(RuntimeError):
    """The HACC-IO job summary csv is missing or lacks a needed column."""


def _check(cond: bool, name: str, reason: str) -> None:
    if not cond:
        raise GeneratorParameterError(f"{name}: {reason}")


def _job(jobid: str | None, app: str, seed: int) -> str:
    return jobid if jobid else f"{app}.{seed}"


# ---------------------------------------------------------------------------------------
# IOR
# ---------------------------------------------------------------------------------------

def ior(duration_s: float, seed: int, jobid: str | None = None, *,
        ops_rate: float = 20_000.0,
        num_procs: int = 64,
        block_size: int = 1 * GiB,
        transfer_size: int = 16 * KiB,
        read_back: bool = True,
        keep_files: bool = False,
        stripe_count: int = 1,
        stripe_size: int = 1 * MiB,
        start_skew_s: float = 2.0) -> Iterator[TraceRecord]:
    """IOR, file per process (``ior -F -w -r -i N``): write, read back, delete, repeat.

    Each iteration: every process writes ``block_size`` bytes to its own new file (one
    record per file, ``ops = block_size / transfer_size``), then reads it back
    (``-r``), then IOR removes the files (it does unless ``-k``). The iteration period
    is derived so that the operation rate is ``ops_rate``: ``period = ops per iteration
    / ops_rate``, rounded so a whole number of iterations fits ``duration_s``. Within
    an iteration the write phase starts at 0, the read phase at half the period, the
    delete at 90 % of it; each process starts its phase up to ``start_skew_s`` late.
    Records per iteration: ``num_procs * (2 + read_back)``; with the defaults 206
    iterations and 39,552 records in 24 h.

    Args:
        duration_s: trace length, seconds.
        seed: random seed (process start skew).
        jobid: job identity; default ``ior.<seed>``.
        ops_rate: POSIX operations/s; paper IV-A3: IOR "generates around 20000 events
            per second".
        num_procs: MPI processes = files per iteration (``-F``); our choice, because 64
            files per iteration over 32 OSTs gives two per OST under round robin and
            keeps a 24 h trace under 40,000 records.
        block_size: bytes per process per iteration (IOR ``-b``; IOR's default is 1 MiB,
            we use 1 GiB, our choice, so each iteration is a real load: 64 GiB).
        transfer_size: bytes per POSIX write/read (IOR ``-t``; IOR's default is 256 KiB;
            we use 16 KiB, our choice, because at 20,000 ops/s a larger transfer would
            write hundreds of TiB a day and overfill the paper's 32-OST system).
        read_back: also read the file back (IOR ``-r``); IOR documentation: ``-w -r``
            is the usual write-then-read test. Our choice: True.
        keep_files: do not delete at the end of an iteration (IOR ``-k``); IOR
            documentation: files are removed unless ``-k``. Default False.
        stripe_count: Lustre stripe count of each file; our choice, 1, Lustre's default
            and the usual setting for file-per-process IOR (the shipped Darshan log
            ``sample-goodost.darshan`` of ``ior -F`` has stripe count 1 on every file).
        stripe_size: Lustre stripe size, bytes; Lustre's default 1 MiB.
        start_skew_s: max delay of a process's phase start, seconds; our choice, MPI
            ranks do not start a phase in the same millisecond.
    """
    _check(duration_s > 0, "duration_s", f"must be > 0, got {duration_s}")
    _check(ops_rate > 0, "ops_rate", f"must be > 0, got {ops_rate}")
    _check(num_procs >= 1, "num_procs", f"must be >= 1, got {num_procs}")
    _check(transfer_size >= 1, "transfer_size", f"must be >= 1, got {transfer_size}")
    _check(block_size >= transfer_size, "block_size",
           f"must be >= transfer_size {transfer_size}, got {block_size}")
    _check(stripe_size % STRIPE_SIZE_UNIT_BYTES == 0 and stripe_size > 0, "stripe_size",
           f"must be a positive multiple of 64 KiB, got {stripe_size}")
    _check(start_skew_s >= 0, "start_skew_s", f"must be >= 0, got {start_skew_s}")
    job = _job(jobid, "ior", seed)
    rng = np.random.default_rng(seed)
    ops_per_file = math.ceil(block_size / transfer_size)
    ops_per_iter = num_procs * ops_per_file * (2 if read_back else 1)
    n_iter = max(1, round(duration_s * ops_rate / ops_per_iter))
    period = duration_s / n_iter
    skew = min(start_skew_s, period / 20)
    read_at, delete_at = 0.5 * period, 0.9 * period
    for it in range(n_iter):
        t0 = it * period
        files = [f"{job}/it{it:05d}/f{p:06d}" for p in range(num_procs)]
        phase: list[TraceRecord] = []
        for p in range(num_procs):
            t = round(t0 + float(rng.uniform(0, skew)), 6)
            phase.append(TraceRecord(t, "write", job, files[p], block_size,
                                     stripe_count, stripe_size, None, ops_per_file))
        yield from sorted(phase)
        if read_back:
            phase = [TraceRecord(round(t0 + read_at + float(rng.uniform(0, skew)), 6), "read", job,
                                 files[p], block_size, 0, 0, None, ops_per_file)
                     for p in range(num_procs)]
            yield from sorted(phase)
        if not keep_files:
            phase = [TraceRecord(round(t0 + delete_at + float(rng.uniform(0, skew)), 6), "delete",
                                 job, files[p], 0, 0, 0, None, 1)
                     for p in range(num_procs)]
            yield from sorted(phase)


# ---------------------------------------------------------------------------------------
# HACC-IO
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HaccJob:
    """One real HACC-IO run on NERSC Cori (a row of the pytokio job summary).

    Units: bytes, seconds. ``ost_count`` is the OSTs of the file system it ran on.
    """
    jobid: str
    nprocs: int
    bytes_written: int
    files: int
    walltime_s: float
    ost_count: int


def load_hacc_jobs(path: str | Path | None = None) -> list[HaccJob]:
    """Read the pytokio HACC-IO job summary (``hacc_io_jobs_summary.csv.gz``).

    One row per job, e.g. (selected columns of 130)::

        _jobid=6242003, darshan_nprocs=4096, darshan_biggest_write_api_bytes=8899172302848,
        darshan_biggest_write_api_files=4096, darshan_walltime=40, fshealth_ost_count=248.0

    The 162 rows are ``hacc_io_write`` runs on Cori's cscratch1 (248 OSTs), each
    writing 8,899,172,302,848 bytes (8.09 TiB, ``darshan_biggest_write_api_bytes``) to
    4096 files from 4096 processes in 25 to 169 s of wall time.

    Args:
        path: the csv (gzip if ``.gz``); default :func:`default_hacc_csv`.

    Raises:
        HaccDataError: the file is missing, or a needed column is missing/unparsable
            (the message names the file and, for a bad value, the line).
    """
    path = Path(path) if path is not None else default_hacc_csv()
    if not path.is_file():
        raise HaccDataError(
            f"{path}: HACC-IO job summary not found (expected the NERSC pytokio file "
            f"hacc_io_jobs_summary.csv.gz; pass hacc_csv=<path>)")
    opener = gzip.open if path.suffix == ".gz" else open
    needed = ("_jobid", "darshan_nprocs", "darshan_biggest_write_api_bytes",
              "darshan_biggest_write_api_files", "darshan_walltime", "fshealth_ost_count")
    jobs: list[HaccJob] = []
    with opener(path, "rt", encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in needed if c not in (reader.fieldnames or ())]
        if missing:
            raise HaccDataError(f"{path}: missing column(s) {', '.join(missing)}")
        for row in reader:
            try:
                jobs.append(HaccJob(
                    jobid=row["_jobid"],
                    nprocs=int(float(row["darshan_nprocs"])),
                    bytes_written=int(float(row["darshan_biggest_write_api_bytes"])),
                    files=int(float(row["darshan_biggest_write_api_files"])),
                    walltime_s=float(row["darshan_walltime"]),
                    ost_count=int(float(row["fshealth_ost_count"]))))
            except ValueError as exc:
                raise HaccDataError(f"{path}:{reader.line_num}: {exc}") from None
    if not jobs:
        raise HaccDataError(f"{path}: no jobs")
    return jobs


def hacc(duration_s: float, seed: int, jobid: str | None = None, *,
         ops_rate: float = 12_000.0,
         checkpoint_interval_s: float = 3600.0,
         first_checkpoint_s: float = 600.0,
         size_scale: float = PAPER_OST_COUNT / 248,
         ranks_per_file: int = 8,
         records_per_file: int = 2,
         keep_last: int = 3,
         stripe_count: int = 1,
         stripe_size: int = 1 * MiB,
         hacc_csv: str | Path | None = None) -> Iterator[TraceRecord]:
    """HACC-IO checkpoints: a burst of file-per-group writes every interval, old ones deleted.

    Checkpoint ``k`` starts at ``first_checkpoint_s + k * checkpoint_interval_s``. Its
    size and length come from a real HACC-IO run drawn (with the seed) from the NERSC
    job summary (:func:`load_hacc_jobs`): ``bytes = darshan_biggest_write_api_bytes *
    size_scale`` spread over ``nprocs / ranks_per_file`` new files, each written in
    ``records_per_file`` records spread evenly over the run's ``darshan_walltime``
    (scaling the bytes with the OST count keeps the bytes per OST, so the real wall
    time still fits). After a checkpoint ends, the one ``keep_last`` before it is
    deleted. The operations of the whole trace total ``ops_rate * duration_s``, shared
    equally by the checkpoints and their records. With the defaults: 24 checkpoints of
    1.04 TiB (512 files) in 24 h, 35,328 records (24,576 writes, 10,752 deletes).

    Args:
        duration_s: trace length, seconds.
        seed: random seed (which real job each checkpoint copies).
        jobid: job identity; default ``hacc.<seed>``.
        ops_rate: POSIX operations/s; paper IV-A3: HACC I/O "generating around 12000
            file events per second".
        checkpoint_interval_s: seconds between checkpoint starts; our choice, hourly,
            a common checkpoint period for a day-long simulation run.
        first_checkpoint_s: time of the first checkpoint; our choice, the simulation
            computes for 10 minutes before it first writes.
        size_scale: multiplier on the real checkpoint bytes; default 32/248: the real
            runs used Cori's 248 OSTs (``fshealth_ost_count``), the paper's system has
            32, so the bytes per OST stay the same (1.04 TiB per checkpoint).
        ranks_per_file: processes sharing one file; HACC-IO writes file per process
            (``darshan_biggest_write_api_files`` = ``nprocs`` = 4096); grouping 8 ranks
            per file is our choice, to keep 24 h under 40,000 records (512 files).
        records_per_file: records each file's checkpoint is split into, over the burst;
            our choice, 2, so a burst has a duration in the trace.
        keep_last: checkpoints kept on disk; our choice, 3, the usual keep-a-few
            rotation of checkpointing codes (~3 TiB live at most).
        stripe_count: Lustre stripe count per file; our choice, 1 (file per process).
        stripe_size: Lustre stripe size, bytes; Lustre's default 1 MiB.
        hacc_csv: path of the pytokio job summary; default :func:`default_hacc_csv`.

    Raises:
        HaccDataError: the job summary is missing or malformed.
    """
    _check(duration_s > 0, "duration_s", f"must be > 0, got {duration_s}")
    _check(ops_rate > 0, "ops_rate", f"must be > 0, got {ops_rate}")
    _check(checkpoint_interval_s >= 10, "checkpoint_interval_s",
           f"must be >= 10 s (a burst and its deletes fit in it), got {checkpoint_interval_s}")
    _check(first_checkpoint_s >= 0, "first_checkpoint_s",
           f"must be >= 0, got {first_checkpoint_s}")
    _check(size_scale > 0, "size_scale", f"must be > 0, got {size_scale}")
    _check(ranks_per_file >= 1, "ranks_per_file", f"must be >= 1, got {ranks_per_file}")
    _check(records_per_file >= 1, "records_per_file", f"must be >= 1, got {records_per_file}")
    _check(keep_last >= 1, "keep_last", f"must be >= 1, got {keep_last}")
    _check(stripe_size % STRIPE_SIZE_UNIT_BYTES == 0 and stripe_size > 0, "stripe_size",
           f"must be a positive multiple of 64 KiB, got {stripe_size}")
    jobs = load_hacc_jobs(hacc_csv)
    job = _job(jobid, "hacc", seed)
    rng = np.random.default_rng(seed)
    first = min(first_checkpoint_s, duration_s / 2)
    n_ckpt = max(1, math.ceil((duration_s - first) / checkpoint_interval_s))
    total_ops = round(ops_rate * duration_s)
    kept: list[list[str]] = []  # files of the checkpoints on disk, oldest first
    for k in range(n_ckpt):
        t0 = first + k * checkpoint_interval_s
        real = jobs[int(rng.integers(len(jobs)))]
        n_files = max(1, real.nprocs // ranks_per_file)
        ckpt_bytes = int(real.bytes_written * size_scale)
        # the burst cannot outlast half the interval or the trace
        burst = min(real.walltime_s, 0.5 * checkpoint_interval_s, 0.5 * (duration_s - t0))
        ops_ckpt = total_ops // n_ckpt + (1 if k < total_ops % n_ckpt else 0)
        n_rec = n_files * records_per_file
        files = [f"{job}/ckpt{k:05d}/f{j:05d}" for j in range(n_files)]
        batch: list[TraceRecord] = []
        for j, name in enumerate(files):
            offset = float(rng.uniform(0, burst / records_per_file))
            for r in range(records_per_file):
                idx = j * records_per_file + r
                nbytes = ckpt_bytes // n_rec + (1 if idx < ckpt_bytes % n_rec else 0)
                nops = max(1, ops_ckpt // n_rec + (1 if idx < ops_ckpt % n_rec else 0))
                t = round(t0 + offset + r * burst / records_per_file, 6)
                batch.append(TraceRecord(t, "write", job, name, nbytes,
                                         stripe_count, stripe_size, None, nops))
        kept.append(files)
        if len(kept) > keep_last:
            # once this checkpoint is complete, the oldest kept one is removed; the
            # burst ends by t0 + interval/2, so the deletes precede the next burst
            t_del = max(r.timestamp_s for r in batch) + 1.0
            batch.extend(TraceRecord(round(t_del + i * 1e-4, 6), "delete", job, f,
                                     0, 0, 0, None, 1)
                         for i, f in enumerate(kept.pop(0))
                         if round(t_del + i * 1e-4, 6) < duration_s)
        yield from sorted(batch)


# ---------------------------------------------------------------------------------------
# TPA
# ---------------------------------------------------------------------------------------

def tpa(duration_s: float, seed: int, jobid: str | None = None, *,
        ops_rate: float = 15_000.0,
        num_files: int = 32,
        db_file_size: int = 16 * GiB,
        load_transfer_size: int = 1 * MiB,
        window_s: float = 120.0,
        read_fraction: float = 0.8,
        page_sizes: tuple[int, ...] = (4 * KiB, 8 * KiB),
        zipf_s: float = 1.0,
        stripe_count: int = 4,
        stripe_size: int = 1 * MiB) -> Iterator[TraceRecord]:
    """TPA: a fixed set of database files, then small random reads and writes.

    At t=0 the database is loaded: each of ``num_files`` files is created with one
    write of ``db_file_size`` bytes (``ops = db_file_size / load_transfer_size``).
    After that, each ``window_s`` window carries ``ops_rate * window_s`` page-sized
    operations (minus the load's operations, spread over the trace), spread over the
    files by a Zipf popularity (a few hot tables) and split into reads and in-place
    page writes; per file per window one read record and one write record aggregate
    them (``bytes`` = the sum of the page sizes). With the defaults: 32 x 16 GiB of
    database, 720 windows, ~46,000 records in 24 h, ~1.5 TiB of page writes.

    Args:
        duration_s: trace length, seconds.
        seed: random seed (file popularity order, per-window operation counts, times).
        jobid: job identity; default ``tpa.<seed>``.
        ops_rate: POSIX operations/s; paper IV-A3: the TPA trace "generates about
            15000 file events per second".
        num_files: database files; our choice, 32, one per OST of the paper's system.
        db_file_size: bytes per database file at load; our choice, 16 GiB (0.5 TiB in
            all), a mid-sized OLTP database.
        load_transfer_size: bytes per write of the initial load; our choice, 1 MiB, the
            Lustre stripe size.
        window_s: aggregation window, seconds; our choice, 2 minutes, so 24 h stays
            under 50,000 records.
        read_fraction: fraction of operations that are reads; our choice, 0.8: the
            paper's TPA trace comes from the UMass storage repository's OLTP traces of
            financial institutions, which are small random I/O; we take the
            read-dominated one.
        page_sizes: bytes of one operation, drawn uniformly; our choice, 4 and 8 KiB,
            common database page sizes (the OLTP traces' requests are KiB-sized).
        zipf_s: exponent of the file popularity ``1 / rank**zipf_s``; our choice, 1.0.
        stripe_count: Lustre stripe count of each database file; our choice, 4, so the
            trace exercises striped creates too.
        stripe_size: Lustre stripe size, bytes; Lustre's default 1 MiB.
    """
    _check(duration_s > 0, "duration_s", f"must be > 0, got {duration_s}")
    _check(ops_rate > 0, "ops_rate", f"must be > 0, got {ops_rate}")
    _check(num_files >= 1, "num_files", f"must be >= 1, got {num_files}")
    _check(db_file_size >= 0, "db_file_size", f"must be >= 0, got {db_file_size}")
    _check(load_transfer_size >= 1, "load_transfer_size",
           f"must be >= 1, got {load_transfer_size}")
    _check(window_s > 0, "window_s", f"must be > 0, got {window_s}")
    _check(0.0 <= read_fraction <= 1.0, "read_fraction",
           f"must be in [0, 1], got {read_fraction}")
    _check(len(page_sizes) >= 1 and all(p >= 1 for p in page_sizes), "page_sizes",
           f"must be positive sizes, got {page_sizes}")
    _check(stripe_size % STRIPE_SIZE_UNIT_BYTES == 0 and stripe_size > 0, "stripe_size",
           f"must be a positive multiple of 64 KiB, got {stripe_size}")
    job = _job(jobid, "tpa", seed)
    rng = np.random.default_rng(seed)
    files = [f"{job}/db/{i:04d}" for i in range(num_files)]
    load_ops = max(1, math.ceil(db_file_size / load_transfer_size))
    for i, name in enumerate(files):
        yield TraceRecord(round(i * 1e-3, 6), "write", job, name, db_file_size,
                          stripe_count, stripe_size, None, load_ops)
    popularity = 1.0 / np.arange(1, num_files + 1) ** zipf_s
    popularity = popularity[rng.permutation(num_files)]
    popularity /= popularity.sum()
    sizes = np.asarray(page_sizes, dtype=np.int64)
    start = num_files * 1e-3 + 1e-3
    n_win = max(1, math.ceil((duration_s - start) / window_s))
    total_ops = max(0, round(ops_rate * duration_s) - num_files * load_ops)
    for w in range(n_win):
        w0 = start + w * window_s
        width = min(window_s, duration_s - w0) - 1e-6  # rounding stays below duration_s
        win_ops = total_ops // n_win + (1 if w < total_ops % n_win else 0)
        per_file = rng.multinomial(win_ops, popularity)
        reads = rng.binomial(per_file, read_fraction)
        batch: list[TraceRecord] = []
        for i in np.flatnonzero(per_file):
            t = round(w0 + float(rng.uniform(0, width)), 6)
            for op, n in (("read", int(reads[i])), ("write", int(per_file[i] - reads[i]))):
                if n == 0:
                    continue
                counts = rng.multinomial(n, np.full(len(sizes), 1.0 / len(sizes)))
                nbytes = int(counts @ sizes)
                if op == "read":
                    batch.append(TraceRecord(t, "read", job, files[i], nbytes, 0, 0, None, n))
                else:
                    batch.append(TraceRecord(t, "write", job, files[i], nbytes,
                                             stripe_count, stripe_size, None, n))
        yield from sorted(batch)


Generator = Callable[..., Iterator[TraceRecord]]

GENERATORS: dict[str, Generator] = {"ior": ior, "hacc": hacc, "tpa": tpa}
"""Generator by workload name (the CLI's ``generate {ior,hacc,tpa}``)."""
