"""The transfers in flight and their rates: the simulator's hot loop state.

Rates are constant between changes of the set of active transfers, so the book keeps the
remaining bytes in a numpy array (``_rem``) aligned with the transfer list, with the
per-(transfer, OST) entries flattened for ``np.bincount``; any change marks it ``dirty``
and the next step rebuilds the arrays and asks the network model for the rates. The
transfer objects are authoritative only after :meth:`TransferBook.sync`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from lustre_alloc.simulator.inflight import SimTransfer
from lustre_alloc.simulator.network.model import NetworkModel
from lustre_alloc.simulator.network.transfers import Storage, TransferSet


@dataclass
class Step:
    """What one step moved, per simulated OST position (bytes, shape (N,)), the streams
    that shared each OST (int (N,)), and which transfers finished: ``(transfer, finish
    time s)``."""
    written: np.ndarray
    landed: np.ndarray
    read: np.ndarray
    ost_bytes: np.ndarray
    ost_ops: np.ndarray
    sharing: np.ndarray
    finished: list[tuple[SimTransfer, float]]


class TransferBook:
    """The transfers in flight.

    Args:
        n_osts: simulated OST positions.
        network: the network model that gives the rates.
        capped: honour each transfer's ``cap_bytes_s`` (migrations under a budget).
    """

    def __init__(self, n_osts: int, network: NetworkModel, capped: bool = False):
        self.n = n_osts
        self.network = network
        self.capped = capped
        self.transfers: list[SimTransfer] = []
        self.dirty = True
        self._rem: np.ndarray | None = None
        self.on_leave: Callable[[SimTransfer, float], None] | None = None
        """Called with a transfer that left the book (finished or cancelled) and the
        fraction of its bytes it moved (the job_stats readings settle it)."""

    def __len__(self) -> int:
        return len(self.transfers)

    def add(self, tr: SimTransfer) -> None:
        """Start ``tr`` (its rate is computed at the next step)."""
        self.transfers.append(tr)
        self.dirty = True

    def sync(self) -> None:
        """Write the remaining bytes held in ``_rem`` back into the transfer objects.

        ``_rem`` is aligned with the first ``len(_rem)`` transfers (later ones were
        appended since the last rebuild and hold their own ``remaining``). Afterwards
        the objects are authoritative until the next rebuild.
        """
        if self._rem is not None:
            for tr, rem in zip(self.transfers, self._rem):
                tr.remaining = float(rem)
            self._rem = None
            self.dirty = True

    def remaining(self) -> list[tuple[SimTransfer, float]]:
        """Every transfer in flight with the bytes it still has to move."""
        rem = self._rem
        return [(tr, float(rem[i]) if rem is not None and i < len(rem) else tr.remaining)
                for i, tr in enumerate(self.transfers)]

    def cancel(self, match: Callable[[SimTransfer], bool]) -> list[tuple[SimTransfer, float]]:
        """Remove the transfers ``match`` selects; each with the fraction of its bytes
        that had moved."""
        self.sync()
        gone, keep = [], []
        for tr in self.transfers:
            if match(tr):
                gone.append((tr, (tr.nbytes - tr.remaining) / tr.nbytes))
                if self.on_leave is not None:
                    self.on_leave(*gone[-1])
            else:
                keep.append(tr)
        if gone:
            self.transfers = keep
            self.dirty = True
        return gone

    def rebuild(self, storage: Storage) -> None:
        """Flatten the transfers into entry arrays and ask the network for the rates."""
        self.sync()
        trs = self.transfers
        f = len(trs)
        if f == 0:
            self._rem = np.zeros(0)
            self._rate = np.zeros(0)
            self._entry_flow = np.zeros(0, dtype=np.int64)
            self._entry_ost = np.zeros(0, dtype=np.int64)
            self._entry_frac = np.zeros(0)
            self._entry_write = np.zeros(0, dtype=bool)
            self._entry_lands = self._entry_write
            self._ops_per_byte = np.zeros(0)
            self.dirty = False
            return
        lens = [len(t.osts) for t in trs]
        self._entry_flow = np.repeat(np.arange(f), lens)
        self._entry_ost = np.concatenate([t.osts for t in trs])
        self._entry_frac = np.concatenate([t.per_ost / t.nbytes for t in trs])
        self._entry_write = np.repeat(np.array([t.write for t in trs]), lens)
        self._entry_lands = (self._entry_write if all(t.lands for t in trs)
                             else np.repeat(np.array([t.write and t.lands for t in trs]), lens))
        self._rem = np.array([t.remaining for t in trs])
        self._ops_per_byte = np.array([t.ops / t.nbytes for t in trs])
        ts = TransferSet(self._entry_flow, self._entry_ost, self._entry_frac, f,
                         np.array([t.write for t in trs]), np.array([t.client for t in trs]),
                         self._ops_per_byte)
        self._rate = self.network.rates(ts, storage)
        if self.capped:
            # Migration transfers never take more than their budget (their unused share
            # is not handed to others: the equal-share model never redistributes).
            self._rate = np.minimum(self._rate, np.array([t.cap_bytes_s for t in trs]))
        self.dirty = False

    def advance(self, now: float, dt: float, storage: Storage) -> Step | None:
        """Move every transfer forward by ``dt`` seconds; None when nothing is in flight."""
        if self.dirty:
            self.rebuild(storage)
        n = self.n
        if not len(self._rem):
            return None
        progress = np.minimum(self._rate * dt, self._rem)
        self._rem -= progress
        entry_bytes = progress[self._entry_flow] * self._entry_frac
        written = np.bincount(self._entry_ost, entry_bytes * self._entry_write, minlength=n)
        landed = (written if self._entry_lands is self._entry_write else
                  np.bincount(self._entry_ost, entry_bytes * self._entry_lands, minlength=n))
        read = np.bincount(self._entry_ost, entry_bytes * ~self._entry_write, minlength=n)
        ost_bytes = np.bincount(self._entry_ost, entry_bytes, minlength=n)
        ost_ops = np.bincount(self._entry_ost, entry_bytes * self._ops_per_byte[self._entry_flow],
                              minlength=n)
        sharing = np.bincount(self._entry_ost, minlength=n)
        finished: list[tuple[SimTransfer, float]] = []
        done = np.nonzero(self._rem <= 1e-6 * np.maximum(1.0, self._rem + progress))[0]
        if len(done):
            keep_mask = np.ones(len(self.transfers), dtype=bool)
            for i in done:
                rate = self._rate[i]
                finished.append((self.transfers[i], now + (progress[i] / rate if rate > 0 else dt)))
                keep_mask[i] = False
                if self.on_leave is not None:
                    self.on_leave(self.transfers[i], 1.0)
            self.transfers = [t for t, k in zip(self.transfers, keep_mask) if k]
            self._rem = self._rem[keep_mask]
            self.dirty = True
        return Step(written, landed, read, ost_bytes, ost_ops, sharing, finished)
