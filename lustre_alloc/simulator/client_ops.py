"""What the clients do in a simulated run: each trace record becomes a write (creating the
file at its first write), a read or a delete, and each becomes transfers on the file's
OSTs, RAID0 (Lustre's striping); background records load one OST and land no bytes. The
site's purge deletes old files when the file system is full.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable

import numpy as np

from lustre_alloc.simulator.inflight import SimFile, SimTransfer
from lustre_alloc.simulator.models import raid0_bytes_per_ost
from lustre_alloc.simulator.scenario import Scenario
from lustre_alloc.simulator.transfer_book import TransferBook
from lustre_alloc.traces.format import TraceRecord

INITIAL_JOB = "lustre-alloc:initial"
"""Job id of the files that stand for the used space at t=0 (never written, read or purged)."""


def bytes_per_slot(f: SimFile, size: int) -> np.ndarray:
    """Bytes each stripe slot of ``f`` holds when the file is ``size`` bytes: RAID0 over its
    OSTs, or, for a composite file, RAID0 within each component over the part of the file
    inside the component's extent (bytes past a component's end go to the next
    component's OSTs, as ``lov_comp_md_v1`` extents place them), stripe-size chunks
    numbered by their file offset as LOV maps them. Shape (slots,), int64."""
    if not f.comps:
        return raid0_bytes_per_ost(size, f.stripe_size, len(f.osts))
    out = np.zeros(len(f.osts), dtype=np.int64)
    for start, end, slot, k in f.comps:
        if size > start:
            out[slot:slot + k] = (raid0_bytes_per_ost(min(size, end), f.stripe_size, k)
                                  - raid0_bytes_per_ost(start, f.stripe_size, k))
    return out


class ClientOps:
    """The files of a run and the records that act on them.

    Args:
        scenario: the scenario (its purge rule).
        used, capacity, present: per OST position, bytes used (changed in place), bytes of
            capacity, and whether the OST exists (read through ``present()``).
        pos_of_index: OST index -> simulated position.
        book: the transfers in flight (a delete cancels its file's).
        create: the MDS's create of a record's file (None when refused).
        start: starts a transfer (:meth:`lustre_alloc.simulator.engine.Simulation.add_transfer`).
        counters: the run's counters.
    """

    def __init__(self, scenario: Scenario, used: np.ndarray, capacity: np.ndarray,
                 present: Callable[[], np.ndarray], pos_of_index: dict[int, int],
                 book: TransferBook, create: Callable[[TraceRecord, float], SimFile | None],
                 start: Callable[[SimTransfer], None], counters: Counter):
        self.sc = scenario
        self.used = used
        self.capacity = capacity
        self.present = present
        self.pos_of_index = pos_of_index
        self.book = book
        self.create = create
        self.start = start
        self.counters = counters
        self.rebal: Any = None
        """The rebalancer (:mod:`lustre_alloc.simulator.rebalance.plan_event`), when the scenario has one."""
        self.files: dict[str, SimFile] = {}
        self.file_times: list[list[float]] = []
        self.meta_this_step = 0
        """Reads and deletes this step (MDS metadata operations besides creates)."""

    def record(self, rec: TraceRecord, now: float) -> None:
        """Replay one trace record at ``now``: background load, a write (creating the
        file first), a read or a delete."""
        if rec.op == "write" and rec.ost is not None:
            # Background traffic (an LMT replay): loads the OST, lands no bytes.
            pos = self.pos_of_index.get(rec.ost)
            self.start(SimTransfer(True, rec.jobid, None, np.array([pos]),
                                   np.array([float(rec.bytes)]), float(rec.bytes),
                                   float(rec.bytes), rec.ops, now, lands=False))
            return
        if rec.op == "write":
            self._write(rec, now)
        elif rec.op == "read":
            self._read(rec, now)
        else:
            self.meta_this_step += 1
            self.delete(rec.file_id)

    def _write(self, rec: TraceRecord, now: float) -> None:
        f = self.files.get(rec.file_id)
        if f is None:
            f = self.create(rec, now)
            if f is None:
                self.counters["bytes_not_written"] += rec.bytes
                return
            self.files[rec.file_id] = f
        elif self.rebal is not None:
            self.rebal.break_lease(rec.file_id)      # lfs migrate --non-block: it stops
            if self.rebal.migrating(rec.file_id):
                self.rebal.hold(rec.file_id, rec, now)   # blocking lfs migrate: writer waits
                return
        if rec.bytes == 0:
            return
        f.recent_bytes += rec.bytes
        before = bytes_per_slot(f, f.size)
        f.size += rec.bytes
        delta = (bytes_per_slot(f, f.size) - before).astype(float)
        nz = np.nonzero(delta)[0]
        osts, per = f.osts[nz], delta[nz]
        if f.comps and len(np.unique(osts)) < len(osts):
            # two components on one OST: one stream to it, landed in its first slot
            osts, first, inverse = np.unique(osts, return_index=True, return_inverse=True)
            per, nz = np.bincount(inverse, per), nz[first]
        f.last_write_s = now
        f.transfers += 1
        self.start(SimTransfer(True, rec.jobid, f, osts, per, float(rec.bytes),
                               float(rec.bytes), rec.ops, now, stripe_pos=nz))

    def _read(self, rec: TraceRecord, now: float) -> None:
        self.meta_this_step += 1
        if rec.file_id:
            f = self.files.get(rec.file_id)
            if f is None or f.size == 0:
                self.counters["reads_of_missing_files"] += 1
                return
            f.recent_bytes += rec.bytes
            share = f.landed if f.landed.sum() > 0 else np.ones(len(f.osts))
            nz = np.nonzero(share)[0]
            per = share[nz] / share[nz].sum() * rec.bytes
            self.start(SimTransfer(False, rec.jobid, None, f.osts[nz], per, float(rec.bytes),
                                   float(rec.bytes), rec.ops, now, rfile=f))
        else:
            pos = self.pos_of_index.get(rec.ost)
            self.start(SimTransfer(False, rec.jobid, None, np.array([pos]),
                                   np.array([float(rec.bytes)]), float(rec.bytes),
                                   float(rec.bytes), rec.ops, now))

    def delete(self, file_id: str) -> bool:
        """Delete a file: cancel its transfers (what landed stays counted until freed) and
        free its objects; False when there is no such file."""
        if self.rebal is not None:
            self.rebal.on_delete(file_id)
        f = self.files.pop(file_id, None)
        if f is None:
            self.counters["deletes_of_missing_files"] += 1
            return False
        if f.transfers:
            for tr, done in self.book.cancel(lambda tr: tr.file is f):
                f.landed[tr.stripe_pos] += tr.per_ost * done
                self.counters["transfers_cancelled"] += 1
        np.subtract.at(self.used, f.osts, f.landed)
        np.maximum(self.used, 0.0, out=self.used)
        self.counters["files_deleted"] += 1
        self.file_times.append(f.times)
        return True

    def purge(self, now: float) -> None:
        """The site's purge: above ``when_used_above`` of the capacity, delete the files
        idle for ``age_s`` or more."""
        p = self.sc.purge
        present = self.present()
        cap = self.capacity.sum() if present.all() else self.capacity[present].sum()
        if self.used.sum() / cap <= p.when_used_above:
            return
        old = [fid for fid, f in self.files.items()
               if f.transfers == 0 and now - f.last_write_s >= p.age_s
               and f.job != INITIAL_JOB]
        for fid in old:
            before = self.used.sum()
            self.delete(fid)
            self.counters["files_purged"] += 1
            self.counters["bytes_purged"] += before - self.used.sum()

    def adopt_initial_fill(self, files_gib: float, stripe_size: int) -> int:
        """The used space at t=0 as files (:attr:`lustre_alloc.simulator.scenario.InitialFill.files_gib`),
        one OST each, under job :data:`INITIAL_JOB`; how many."""
        size = files_gib * (1 << 30)
        n = 0
        for p in np.nonzero(self.present())[0].tolist():
            left = float(self.used[p])
            k = 0
            while left > 0:
                b = min(size, left)
                self.files[f"initial/OST{p:04x}/{k}"] = SimFile(
                    job=INITIAL_JOB, osts=np.array([p]), stripe_size=stripe_size, size=int(b),
                    landed=np.array([b]), last_write_s=-math.inf)
                left -= b
                k += 1
                n += 1
        return n

    def times(self) -> np.ndarray:
        """Per file (deleted or not): first write, last write landed, first read, last read
        landed, s, shape (files, 4)."""
        self.file_times.extend(f.times for f in self.files.values())
        return np.array(self.file_times, dtype=float).reshape(-1, 4)
