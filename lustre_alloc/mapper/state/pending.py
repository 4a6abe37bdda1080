"""What the mapper placed that the statistics do not show yet, per OST, in place.

Between two statistics samples the mapper would otherwise decide every round from the
same numbers and pile stripes on the OSTs that looked best at the last sample, so it
counts what it handed out itself (arrays indexed by OST index, like
:class:`~lustre_alloc.mapper.state.arrays.OstTable`):

* ``pending_bytes``: expected bytes of the stripes placed there, minus the growth of the
  OST's used space seen since (data that landed is in ``kbytesavail`` now). Expected
  bytes that never come (a smaller file than announced) would stay forever, so the
  estimate also decays with a half-life.
* ``pending_stripes``: stripes placed since the OST's last statistics sample. A new
  sample's brw_stats write time is a mean over its interval, so it shows a stripe placed
  at ``tau`` in the interval ``(t0, t1]`` only for the part ``(t1 - tau) / (t1 - t0)`` of
  it. What it does not show, ``(tau - t0) / (t1 - t0)`` of a stripe, stays as
  ``carried_stripes`` until the next sample, whose interval the stripe spans whole. (It
  used to reset at the first sample: a burst placed just before a sample then vanished
  from the mapper's view at once, and the next rounds piled onto the same OSTs.) Without
  sample times (a static view) they decay with the same half-life.
* ``reserved_stripes``: stripes of lists made ahead of their request (predicted or
  planned) and not handed out yet: they count as queued writes so other rounds do not
  pick the same OSTs meanwhile.

Handing a list out costs O(stripe count); decay and absorption are vectorized.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.state.arrays import OstArrays
from lustre_alloc.mapper.state.arrays import OstTable

DECAY_STEP = 1.0 - 1e-4
"""Decay is applied once its factor drops below this (the request path then costs O(1)
instead of a pass over every OST; the estimate lags its exact value by < 0.01 %)."""
BYTES_FLOOR = 1e-3
"""Pending values below this (bytes or stripes) are dropped as decayed away."""


class PendingOverlay:
    """Pending bytes/stripes and reservations per OST index.

    Args:
        half_life_s: decay half-life of the pending estimates, seconds (> 0).
    """

    def __init__(self, half_life_s: float = 300.0, capacity: int = 64):
        if half_life_s <= 0:
            raise ValueError(f"pending half-life must be > 0 s, got {half_life_s}")
        self.half_life_s = half_life_s
        self.time_s = -math.inf
        self.capacity = 0
        for name in ("bytes", "stripes", "reserved", "seen_used_kib", "placed_time_sum",
                     "carried"):
            setattr(self, name, np.zeros(0))
        self.seen_sample_s = np.zeros(0)
        self.carried_sample_s = np.zeros(0)
        self.now_s = math.nan
        """The time of the last :meth:`decay` call, s: when a list handed out was placed."""
        self._absorbed: tuple | None = None
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        for name, fill in (("bytes", 0.0), ("stripes", 0.0), ("reserved", 0.0),
                           ("seen_used_kib", 0.0), ("seen_sample_s", math.nan),
                           ("placed_time_sum", 0.0), ("carried", 0.0),
                           ("carried_sample_s", math.nan)):
            a = np.full(capacity, fill)
            old = getattr(self, name)
            a[:len(old)] = old
            setattr(self, name, a)
        self.capacity = capacity

    def _fit(self, top: int) -> None:
        if top >= self.capacity:
            cap = max(self.capacity, 64)
            while cap <= top:
                cap *= 2
            self._grow(cap)

    # ------------------------------------------------------------------ time
    def decay(self, now: float) -> None:
        """Age the estimates to ``now`` (seconds; a clock going back only resets)."""
        self.now_s = now
        if self.time_s == -math.inf or now < self.time_s:
            self.time_s = now
            return
        factor = 0.5 ** ((now - self.time_s) / self.half_life_s)
        if factor > DECAY_STEP:
            return      # under 0.01 %: applied once enough time has gathered (O(1) now)
        self.time_s = now
        for a in (self.bytes, self.stripes, self.carried):
            live = a > 0
            if live.any():
                a[live] *= factor
                a[live & (a < BYTES_FLOOR)] = 0.0

    def absorb(self, table: OstTable, version: tuple | None = None) -> None:
        """Remove what the statistics now show: used-space growth from pending bytes,
        and pending stripes of OSTs sampled since their stripes were placed.

        ``version`` identifies the state ``table`` holds (None: unknown); absorbing the
        same state twice changes nothing (lists added since recorded what they saw), so
        a repeated version returns at once."""
        if version is not None and version == self._absorbed:
            return
        self._absorbed = version
        n = min(self.capacity, table.capacity)
        for a in (self.bytes, self.stripes, self.carried):
            gone = np.flatnonzero(a[:n] > 0)
            gone = gone[~table.present[gone]]
            a[gone] = 0.0
            a[n:][a[n:] > 0] = 0.0
        rows = np.flatnonzero(self.bytes[:n] > 0)
        if len(rows):
            used = (table.kbytes_total[rows] - table.kbytes_avail[rows]).astype(float)
            before = self.seen_used_kib[rows]
            self.seen_used_kib[rows] = used
            grew = used > before
            left = self.bytes[rows] - (used - before) * 1024.0
            self.bytes[rows] = np.where(grew, np.where(left > 0, left, 0.0), self.bytes[rows])
        rows = np.flatnonzero(self.carried[:n] > 0)
        if len(rows):
            t = table.sample_time_s[rows]
            newer = ~np.isnan(t) & (t != self.carried_sample_s[rows])
            self.carried[rows[newer]] = 0.0         # a whole interval since: shown
        rows = np.flatnonzero(self.stripes[:n] > 0)
        if len(rows):
            t = table.sample_time_s[rows]
            seen = self.seen_sample_s[rows]
            newer = ~np.isnan(t) & ((seen != t) | np.isnan(seen))
            rows, t, t0 = rows[newer], t[newer], seen[newer]
            count = self.stripes[rows]
            span = t - t0
            # Unshown part of the interval's stripes: sum((tau - t0) / (t1 - t0)).
            unshown = np.where(np.isfinite(span) & (span > 0),
                               (self.placed_time_sum[rows] - count * t0) / np.where(span > 0, span, 1.0),
                               0.0)
            self.carried[rows] = np.clip(np.nan_to_num(unshown), 0.0, count)
            self.carried_sample_s[rows] = t
            self.stripes[rows] = 0.0
            self.placed_time_sum[rows] = 0.0

    # ------------------------------------------------------------------ hand-outs
    def add(self, osts: Sequence[int], bytes_per_stripe: float, table: OstTable) -> None:
        """Count a list handed out: ``bytes_per_stripe`` bytes and one stripe per OST."""
        if not osts:
            return
        self._fit(max(osts))
        b, s = self.bytes, self.stripes
        for i in osts:
            if b[i] <= 0:
                self.seen_used_kib[i] = float(table.kbytes_total[i] - table.kbytes_avail[i])
            self.seen_sample_s[i] = table.sample_time_s[i]
        placed = self.now_s if math.isfinite(self.now_s) else 0.0
        for i in osts:
            b[i] += bytes_per_stripe
            s[i] += 1.0
            self.placed_time_sum[i] += placed

    def remove(self, osts: Sequence[int], bytes_per_stripe: float) -> None:
        """Take back a list counted by :meth:`add` that was never used (a returned or
        expired lease): its bytes and stripe off each OST, never below zero (the samples
        may have absorbed part of it already)."""
        top = min(self.capacity, max(osts, default=-1) + 1)
        b, s, placed = self.bytes, self.stripes, self.placed_time_sum
        for i in osts:
            if i < top:
                b[i] = max(0.0, b[i] - bytes_per_stripe)
                left = max(0.0, s[i] - 1.0)
                placed[i] = placed[i] * left / s[i] if s[i] > 0 else 0.0   # keeps the mean time
                s[i] = left

    def reserve(self, osts: Sequence[int], sign: float) -> None:
        """Reserve (``sign`` +1) or release (-1) one stripe on each OST of a kept list."""
        if not osts:
            return
        self._fit(max(osts))
        r = self.reserved
        for i in osts:
            v = r[i] + sign
            r[i] = v if v > 1e-9 else 0.0

    def reserve_many(self, lists: Sequence[Sequence[int]], sign: float) -> None:
        """:meth:`reserve` for many lists at once (a planning round's), vectorized:
        the service holds its lock meanwhile, and 500 lists one by one took 2.5 ms."""
        if not lists:
            return
        flat = np.fromiter((i for osts in lists for i in osts), dtype=np.int64)
        if not len(flat):
            return
        self._fit(int(flat.max()))
        r = self.reserved
        np.add.at(r, flat, sign)
        touched = np.unique(flat)
        r[touched] = np.where(r[touched] > 1e-9, r[touched], 0.0)

    # ------------------------------------------------------------------ reading
    def overlay(self, base: OstArrays) -> OstArrays:
        """``base`` (candidate arrays with nothing pending) plus this estimate:
        pending bytes, and the queue raised by pending and reserved stripes."""
        idx = base.index
        inside = idx < self.capacity
        if not inside.all():
            idx = np.where(inside, idx, 0)
        pending = np.where(inside, self.bytes[idx], 0.0)
        stripes = np.where(inside, self.stripes[idx] + self.carried[idx], 0.0)
        reserved = np.where(inside, self.reserved[idx], 0.0)
        if not (pending.any() or stripes.any() or reserved.any()):
            return base
        queue = base.queue + stripes
        queue = queue + reserved
        return replace(base, pending_bytes=base.pending_bytes + pending,
                       queue=np.maximum(queue, 0.0))

    @staticmethod
    def _as_dict(a: np.ndarray) -> dict[int, float]:
        nz = np.flatnonzero(a)
        return dict(zip(nz.tolist(), a[nz].tolist()))

    def bytes_by_ost(self) -> dict[int, float]:
        """OST index -> pending bytes (nonzero only)."""
        return self._as_dict(self.bytes)

    def stripes_by_ost(self) -> dict[int, float]:
        """OST index -> pending stripes, the part carried past a sample included
        (nonzero only)."""
        return self._as_dict(self.stripes + self.carried)

    def reserved_by_ost(self) -> dict[int, float]:
        """OST index -> reserved stripes (nonzero only)."""
        return self._as_dict(self.reserved)
