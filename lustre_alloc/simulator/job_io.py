"""What the users see of a simulated run: per job and per application I/O, the job's I/O
phases and the lower bound of its I/O time alone on the idle cluster (the user's
metric).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from lustre_alloc.simulator.inflight import SimFile, SimTransfer
from lustre_alloc.simulator.network.transfers import Storage


def app_name(jobid: str) -> str:
    """The application a job id belongs to: replays ``job#k`` count as ``job``."""
    return jobid.split("#", 1)[0]


@dataclass
class AppIo:
    """Per-application totals. Bytes; seconds of transfer time (sum over transfers)."""
    bytes_written: float = 0.0
    bytes_read: float = 0.0
    io_time_s: float = 0.0
    transfers: int = 0
    creates: int = 0
    failed_creates: int = 0

    @property
    def mean_bandwidth_bytes_s(self) -> float:
        """Bytes moved / summed transfer time (0 when nothing moved)."""
        moved = self.bytes_written + self.bytes_read
        return moved / self.io_time_s if self.io_time_s > 0 else 0.0


PHASE_GAP_S = 60.0
"""A job with nothing in flight for this long starts a new I/O phase (ours: trace jobs of
the generators run all day; their checkpoints and iterations are the phases)."""


@dataclass
class JobIo:
    """One job's I/O (the user's metric). Seconds on the simulation clock.

    Attributes:
        first_io_s: start of its first transfer.
        last_byte_s: end of its last finished transfer.
        alone_s: lower bound of its I/O time alone on the idle cluster (no events, no
            other load): ``max(max over transfers (start - first_io + ideal), max over
            OSTs of its bytes there / that OST's bandwidth)``, ``ideal`` = the
            transfer's slowest stripe (with request latency and OSS limit) at full speed.
        managed: its creates went through the policy (else Lustre's allocator).
        background: replayed background traffic, not a user's job.
        unfinished: transfers still in flight (or stalled) at the end.
        phases: ``(first_io_s, last_byte_s, alone_s)`` of each I/O phase (phases are
            separated by >= :data:`PHASE_GAP_S` with nothing in flight).
    """
    first_io_s: float
    last_byte_s: float = -math.inf
    alone_s: float = 0.0
    managed: bool = True
    background: bool = False
    bytes: float = 0.0
    transfers: int = 0
    unfinished: int = 0
    inflight: int = 0
    phases: list = field(default_factory=list)
    busy_s: np.ndarray | None = None        # per OST: seconds at full bandwidth (job)
    ph_first: float = 0.0
    ph_last: float = -math.inf
    ph_alone: float = 0.0
    ph_busy_s: np.ndarray | None = None     # the same, current phase

    def close_phase(self) -> None:
        """End the current phase (if any byte of it landed)."""
        if self.ph_last > -math.inf:
            alone = max(self.ph_alone, float(self.ph_busy_s.max()))
            self.phases.append((self.ph_first, self.ph_last, alone))
        self.ph_busy_s[:] = 0.0
        self.ph_alone = 0.0
        self.ph_last = -math.inf

    @property
    def io_time_s(self) -> float:
        """First I/O to last byte (0 if nothing finished)."""
        return max(0.0, self.last_byte_s - self.first_io_s)

    @property
    def slowdown(self) -> float:
        """I/O time / alone time (1 = as if alone on the idle cluster)."""
        alone = max(self.alone_s, float(self.busy_s.max()) if self.busy_s is not None else 0.0)
        return self.io_time_s / alone if alone > 0 else 1.0


class JobBook:
    """The jobs' and applications' I/O of one run.

    Args:
        n_osts: simulated OST positions.
        ost_oss: each position's OSS (for the OSS limit of the alone bound).
        unmanaged: jobids whose creates go through Lustre's allocator.
    """

    def __init__(self, n_osts: int, ost_oss: np.ndarray, unmanaged: frozenset[str]):
        self.n = n_osts
        self.ost_oss = ost_oss
        self.unmanaged = unmanaged
        self.jobs: dict[str, JobIo] = {}
        self.apps: dict[str, AppIo] = {}
        self.on_close: Callable[[SimFile], None] | None = None
        """Called once when a file whose size is reported at close (its ``close_at``)
        has all its bytes landed: the application closes it."""

    def app(self, jobid: str) -> AppIo:
        """The application of ``jobid`` (created on first use)."""
        return self.apps.setdefault(app_name(jobid), AppIo())

    def started(self, tr: SimTransfer, base: Storage) -> None:
        """A job's transfer starts: its job (and phase) account for it."""
        job = self.jobs.get(tr.job)
        if job is None:
            job = self.jobs[tr.job] = JobIo(first_io_s=tr.start_s,
                                            managed=tr.job not in self.unmanaged and tr.lands,
                                            background=not tr.lands, busy_s=np.zeros(self.n),
                                            ph_first=tr.start_s, ph_busy_s=np.zeros(self.n))
        elif job.inflight == 0 and tr.start_s - job.ph_last >= PHASE_GAP_S:
            job.close_phase()
            job.ph_first = tr.start_s
        job.inflight += 1
        self._alone_bound(job, tr, base)
        if tr.write and tr.file is not None:
            tr.file.times[0] = min(tr.file.times[0], tr.start_s)
        elif tr.rfile is not None:
            tr.rfile.times[2] = min(tr.rfile.times[2], tr.start_s)

    def _alone_bound(self, job: JobIo, tr: SimTransfer, base: Storage) -> None:
        """Alone on the idle cluster (no events): the slowest stripe at full bandwidth."""
        bw = base.ost_bandwidth_bytes_s if tr.write or base.ost_read_bandwidth_bytes_s is None \
            else base.ost_read_bandwidth_bytes_s
        t = tr.per_ost / bw[tr.osts]
        if base.ost_latency_s is not None:
            t = t + tr.per_ost * (tr.ops / tr.nbytes) * base.ost_latency_s[tr.osts] / 8.0
        # A transfer's OSTs are distinct (a layout never repeats an OST): plain fancy-index
        # adds, much cheaper than np.add.at on these short arrays.
        job.busy_s[tr.osts] += t
        job.ph_busy_s[tr.osts] += t
        ideal = float(t.max())
        if base.oss_cap_bytes_s is not None:
            oss = self.ost_oss[tr.osts]
            ideal = max(ideal, float((np.bincount(oss, tr.per_ost) / np.maximum(
                base.oss_cap_bytes_s[:oss.max() + 1], 1e-9)).max()))
        job.alone_s = max(job.alone_s, tr.start_s - job.first_io_s + ideal)
        job.ph_alone = max(job.ph_alone, tr.start_s - job.ph_first + ideal)

    def finished(self, tr: SimTransfer, finish: float) -> None:
        """A job's transfer finished at ``finish`` (s): its bytes land in its file."""
        app = self.app(tr.job)
        app.io_time_s += finish - tr.start_s
        app.transfers += 1
        job = self.jobs[tr.job]
        job.last_byte_s = max(job.last_byte_s, finish)
        job.ph_last = max(job.ph_last, finish)
        job.inflight -= 1
        job.bytes += tr.nbytes
        job.transfers += 1
        if tr.write:
            app.bytes_written += tr.nbytes
            if tr.file is not None:
                f = tr.file
                f.landed[tr.stripe_pos] += tr.per_ost
                f.transfers -= 1
                f.times[1] = max(f.times[1], finish)
                if f.close_at >= 0 and not f.transfers and f.size >= f.close_at:
                    f.close_at = -1           # reported once
                    if self.on_close is not None:
                        self.on_close(f)
        else:
            app.bytes_read += tr.nbytes
            if tr.rfile is not None:
                tr.rfile.times[3] = max(tr.rfile.times[3], finish)

    def close(self, unfinished: list[SimTransfer]) -> None:
        """The run ended: count each job's transfers still in flight, close open phases."""
        for tr in unfinished:
            self.jobs[tr.job].unfinished += 1
        for job in self.jobs.values():
            if not job.inflight:
                job.close_phase()
