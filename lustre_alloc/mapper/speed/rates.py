"""Smoothed per-OST write rates from the statistics samples that reach the mapper.

The rate-aware cost (:class:`lustre_alloc.mapper.flow.costs.RateCost`) needs, per OST, how many
bytes per second it delivers to a writer. Two numbers in the snapshot bound it from
below (:class:`lustre_alloc.mapper.state.cluster_state.OstState`):

* ``write_bytes_per_s``: bytes written over the last interval (obdfilter ``stats``
  ``write_bytes``), everything the OST served, unmanaged jobs included. It reaches the
  OST's rate when the OST was busy the whole interval, less otherwise.
* ``write_in_flight * rpc_bytes / write_latency_s``: Little's law (throughput = I/Os in
  the system / their time in it) over the interval's bulk writes, from ``brw_stats`` "disk
  I/Os in flight" and "I/O time". Behind ``q`` other streams an RPC takes ``q + 1`` times
  longer and sees ``q + 1`` I/Os in flight, so a busy OST reads at its rate, not at its
  share of it. Without the in-flight block (osd-zfs may not print it) the count is 1:
  one RPC over its service time, the rate on an idle OST only.

A sample's estimate is the larger of the two. Both are lower bounds of what the OST can
deliver (busy behind others, the RPC and the interval's bytes show only a share), so the
tracker rises at once to a higher estimate and falls only by exponential smoothing over
what is new at each look with brw_stats RPC times (a look with bytes alone, below the
estimate, leaves it: the OST may simply have been asked for little). What is new at a look
(a round, at creates) is every sample the state store folded since
the last look, summed (:class:`lustre_alloc.mapper.state.write_totals.WriteTotals`; live the
collectors sample every 5 s, and one look in minutes would otherwise see only the last
interval). A busy interval does not make a fast OST look
slow, while an OST that really slowed down (idle samples show its own RPC time) drifts
down within ~1/smoothing looks. Its current slowness is in the cost's ``L_j`` anyway. OSTs never sampled get the
median of the others (no evidence it differs), and an OST's first RPC-timed sample below
the median of the OSTs measured before falls from it by the same smoothing; with no evidence at all every OST gets
``default_rate_bytes_s``.

Which counter gives an RPC's time depends on the OSD
(:mod:`lustre_alloc.mapper.state.write_time`): brw_stats on ldiskfs, the OFD's write and
sync service times on ZFS. A ZFS OST takes the bytes into memory and pays for them at its
txg syncs, so its bytes over a look and its quick RPCs are no bounds at all; its estimate
is folded apart (:meth:`OstRateTracker._fold_write_back`).

An OSS's shared limit (its LNet link) is measured the same way when it shows: the bytes
its OSTs wrote per second over its LNet load fraction (:meth:`OstRateTracker.update_oss`).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.state.cluster_state import OstState
from lustre_alloc.mapper.state.write_totals import MIN_TIMED_IOS, WriteTotals

RPC_BYTES = 1 << 20
"""Bytes of the bulk write RPC whose service time brw_stats reports (1 MiB: the
``max_pages_per_rpc = 256`` default of 4 KiB pages; the simulator's model too)."""
MIN_PEERS = 4
"""OSTs with a measurement needed before any is compared with their median (the straggler
rule, the slow-OST tests and the steering controller use it too)."""
DEFAULT_RATE_BYTES_S = 500e6
"""Rate assumed when no OST has been measured yet (a 2017 HDD RAID6 OST: 0.5-1 GB/s)."""


def sample_rate_bytes_s(ost: OstState, rpc_bytes: int = RPC_BYTES) -> float | None:
    """One sample's rate estimate, bytes/s: ``max(write_bytes_per_s, write_in_flight *
    rpc_bytes / write_latency_s)`` (in flight 1 when unknown); None when the sample has
    neither."""
    best = None
    if ost.write_latency_s is not None and math.isfinite(ost.write_latency_s) \
            and ost.write_latency_s > 0:
        flight = ost.write_in_flight
        flight = flight if flight is not None and math.isfinite(flight) and flight >= 1 else 1.0
        best = flight * rpc_bytes / ost.write_latency_s
    w = ost.write_bytes_per_s
    if w is not None and math.isfinite(w) and w > 0:
        best = w if best is None else max(best, w)
    return best


Evidence = tuple[float | None, float | None, float | None, float | None]
"""(sample time s, rate estimate bytes/s, RPC time s, busy seconds) of a look."""


def busy_seconds(span: WriteTotals) -> float:
    """Seconds an OST spent writing over ``span``: the summed brw_stats I/O time over the
    mean I/Os in flight (Little's law: I/Os in flight = I/O time per second busy)."""
    flight = span.mean_in_flight
    return span.io_time_s / max(flight if flight is not None else 1.0, 1.0)


def totals_rate_bytes_s(span: WriteTotals, rpc_bytes: int = RPC_BYTES) -> float | None:
    """:func:`sample_rate_bytes_s` over several samples' sums (``span``, from
    :meth:`WriteTotals.since`): ``max(bytes / span, in_flight * rpc_bytes / latency)`` with
    the ``write_ios``-weighted means; None when the span has neither. A write-back OST's
    spans are folded by :meth:`OstRateTracker.update` instead."""
    best = None
    lat = span.latency_s
    if lat is not None:
        flight = span.mean_in_flight
        best = max(flight if flight is not None else 1.0, 1.0) * rpc_bytes / lat
    w = span.bytes_per_s
    if w is not None and w > 0:
        best = w if best is None else max(best, w)
    return best


WRITE_BACK_ALIKE = 2.0
"""Write-back estimates (ZFS, timed by the OFD) within this factor of their median are
not told apart. Such an estimate is the RPC size over a window's time per RPC, and most of
that time is the fsyncs', which wait for whatever txg sync is under way when they
arrive: which OST's fsync caught a long one is chance. Measured on the Lustre 2.17.0 guest
(docs/lustre-vm.md, "Placement with a slow OST"), three alike OSTs were priced 0.34,
0.44 and 0.80 s a file after the same warm-up (2.35x apart, each within 2x of their
median), and in one round the flow split 24 files 5/1/13/5 (OST1 the slowed one). 2.0 is the factor the
regime already takes as no evidence (:mod:`lustre_alloc.mapper.policies.mcmf.regime`,
``rate_ratio`` and ``slowest_ratio``: one log2 bucket step)."""


def alike_to_median(rates: np.ndarray, factor: float) -> np.ndarray:
    """``rates`` (float (n,), > 0) with every value within ``factor`` of their median
    (``median / factor <= r <= median * factor``) replaced by the median; the rest as
    they are. The median is unchanged (values move toward it without crossing it).

    Raises:
        ValueError: factor < 1.
    """
    if factor < 1:
        raise ValueError(f"alike factor must be >= 1, got {factor}")
    rates = np.asarray(rates, dtype=float)
    if len(rates) < 2:
        return rates.copy()
    median = float(np.median(rates))
    alike = (rates * factor >= median) & (rates <= median * factor)
    return np.where(alike, median, rates)


class OstRateTracker:
    """Exponentially weighted per-OST write rate, bytes/s.

    Args:
        smoothing: weight of a new sample, in (0, 1] (1: no smoothing).
        rpc_bytes: bytes of the RPC brw_stats' I/O time refers to.
        default_rate_bytes_s: rate when nothing was ever measured.
        latency_smoothing: weight of a new sample in the smoothed RPC time, (0, 1]
            (1: the last sample, unsmoothed).
        relax_s: while an OST's samples carry no evidence (no RPC ran, nothing written),
            its rate relaxes toward the median of the measured OSTs with this time
            constant, s: ``r <- m + (r - m) exp(-dt / relax_s)`` (0: kept as it was).
        first_look_median: the very first look's samples fall from their own median by
            smoothing, as later first samples fall from the median of the OSTs measured
            before (False: taken as they are).
        busy_s: None: a look's estimate falls in with weight ``smoothing``. Else with
            ``1 - (1 - smoothing) ** (b / busy_s)``, ``b`` the seconds the OST spent
            writing since the last look (:func:`busy_seconds`): each ``busy_s`` of
            evidence counts as one sample, however the samples were grouped into looks.
        write_back_alike: write-back estimates within this factor of their median
            read as the median in :meth:`rates` (:data:`WRITE_BACK_ALIKE`; None: as
            estimated).
    Raises:
        ValueError: smoothing outside (0, 1], a non-positive rate/RPC size, or
            write_back_alike < 1.
    """

    def __init__(self, smoothing: float = 0.05, rpc_bytes: int = RPC_BYTES,
                 default_rate_bytes_s: float = DEFAULT_RATE_BYTES_S,
                 latency_smoothing: float = 1.0, relax_s: float = 0.0,
                 busy_s: float | None = None, first_look_median: bool = False,
                 write_back_alike: float | None = WRITE_BACK_ALIKE):
        if not 0 < smoothing <= 1:
            raise ValueError(f"rate smoothing must be in (0, 1], got {smoothing}")
        if rpc_bytes <= 0 or default_rate_bytes_s <= 0:
            raise ValueError("rpc_bytes and default_rate_bytes_s must be > 0")
        if write_back_alike is not None and write_back_alike < 1:
            raise ValueError(f"write_back_alike must be >= 1 or None, got {write_back_alike}")
        self.write_back_alike = write_back_alike
        self.smoothing = smoothing
        self.rpc_bytes = rpc_bytes
        self.default_rate_bytes_s = default_rate_bytes_s
        self.rate: dict[int, float] = {}
        self.latency: dict[int, float] = {}
        self.latency_smoothing = latency_smoothing
        self._seen: dict[int, float | None] = {}
        self._totals: dict[int, WriteTotals] = {}   # each OST's totals at the last look
        self.oss_limit: dict[str, float] = {}
        self._oss_seen: dict[str, float | None] = {}
        self.min_lnet_percent = 20.0
        self.relax_s = relax_s
        self.busy_s = busy_s
        self.first_look_median = first_look_median
        self._evidence_s: dict[int, float] = {}     # when each OST last showed evidence
        self._write_back: dict[int, tuple[float, float]] = {}   # decayed (time s, RPCs)
        self._write_back_spans: dict[int, WriteTotals] = {}     # handed from _new_evidence
        self.last_look: dict[int, float] = {}       # each OST's latest estimate, unsmoothed

    def update(self, osts: Sequence[OstState]) -> None:
        """Fold in what is new since the last call: with the store's write totals
        (:class:`~lustre_alloc.mapper.state.write_totals.WriteTotals`), every sample since then as one
        (a round looks at creates; the collectors sample every interval); else the
        latest sample when its time moved. An OST without sample times (a static view) is
        taken as it is every time, unsmoothed."""
        a = self.smoothing
        measured_before = bool(self.rate)
        prior: float | None = None      # their median, computed at the first first sample
        news = [(o, new) for o in osts if (new := self._new_evidence(o)) is not None]
        if not measured_before and self.first_look_median:
            first = [new[1] for _, new in news if new[0] is not None and new[1] is not None]
            if first:
                prior = float(np.median(first))
                measured_before = True
        for o, (t, est, lat, busy) in news:
            span = self._write_back_spans.pop(o.index, None)
            if span is not None:
                self._fold_write_back(o.index, span, t)
                continue
            rpc_timed = lat is not None and math.isfinite(lat) and lat > 0
            if rpc_timed:
                old_l = self.latency.get(o.index)
                b = self.latency_smoothing
                self.latency[o.index] = lat if old_l is None or t is None else (1 - b) * old_l + b * lat
            if est is None:
                self._relax(o.index, t)
                continue
            if t is not None:
                self._evidence_s[o.index] = t
            if rpc_timed:
                # Only a look with RPC times says how fast the OST serves; bytes alone
                # are a lower bound (an OST that wrote little is not slow).
                self.last_look[o.index] = est
            old = self.rate.get(o.index)
            if old is None and t is not None and measured_before:
                if prior is None:       # before any OST new in this call joins self.rate
                    prior = float(np.median(list(self.rate.values())))
                # A first sample is a lower bound like any other: it falls from what the
                # OST was assumed to deliver unmeasured (the median of the OSTs measured
                # before) by smoothing. Taken as is, an OST first seen under a burst (a new
                # OST after an expansion) read as a straggler, left every round and was
                # never measured again.
                old = prior
            if old is not None and t is not None and est < old and not rpc_timed:
                # Bytes alone show what was asked of the OST, not what it can do: an OST
                # that wrote little over a look is not slow. Smoothed down toward them,
                # an alike OST among thousands read 2x below the median (scale-3600).
                # Only a look with RPC times lowers the estimate.
                continue
            if old is None or t is None or est >= old:
                self.rate[o.index] = est          # a lower bound above the estimate: take it
            else:
                w = a if self.busy_s is None or busy is None else 1 - (1 - a) ** (busy / self.busy_s)
                self.rate[o.index] = (1 - w) * old + w * est

    def _new_evidence(self, o: OstState) -> Evidence | None:
        """(sample time, rate estimate, RPC time, busy seconds) of what ``o`` shows that
        this tracker has not folded, None when nothing. Several samples since the last
        look are summed (:meth:`WriteTotals.since`); a single one is taken as it is. Busy
        seconds are None without write totals."""
        totals = o.write_totals
        if totals is None or o.sample_time_s is None:
            t = o.sample_time_s
            if t is not None and self._seen.get(o.index) == t:
                return None
            self._seen[o.index] = t
            return t, sample_rate_bytes_s(o, self.rpc_bytes), o.write_latency_s, None
        last = self._totals.get(o.index)
        if last is not None and last.samples == totals.samples:
            return None
        span = totals.since(last)
        self._totals[o.index] = totals.copy()
        busy = busy_seconds(span)
        if span.write_back:
            self._write_back_spans[o.index] = span
            return o.sample_time_s, None, None, busy
        if span.samples == 1:
            return (o.sample_time_s, sample_rate_bytes_s(o, self.rpc_bytes), o.write_latency_s,
                    busy)
        return o.sample_time_s, totals_rate_bytes_s(span, self.rpc_bytes), span.latency_s, busy

    def _fold_write_back(self, index: int, span: WriteTotals, t: float | None) -> None:
        """A write-back OST's look (:attr:`WriteTotals.write_back`: ZFS, timed by the OFD).
        Its bytes went to memory at once and were paid for at the fsyncs that followed,
        often in a later sample, so neither a span's bytes nor its RPC time alone says how
        fast it writes (the guest's slowed vdev read fastest of four by both, in the span
        its job's bytes went to memory). The estimate is the RPC size over the time per
        RPC of a window that decays by ``1 - smoothing`` a look, time and RPCs summed
        apart: a burst of quick RPCs and the slow fsync after it meet in the window."""
        time_s, rpcs = self._write_back.get(index, (0.0, 0.0))
        keep = 1.0 - self.smoothing
        time_s, rpcs = keep * time_s + span.io_time_s, keep * rpcs + span.ios
        self._write_back[index] = (time_s, rpcs)
        if rpcs < MIN_TIMED_IOS or time_s <= 0:
            return
        est = self.rpc_bytes * rpcs / time_s
        self.rate[index] = self.last_look[index] = est
        self.latency[index] = time_s / rpcs
        if t is not None:
            self._evidence_s[index] = t

    def _relax(self, index: int, t: float | None) -> None:
        """No evidence in this sample: relax the rate toward the measured median."""
        old = self.rate.get(index)
        last = self._evidence_s.get(index)
        if not self.relax_s or old is None or t is None or last is None or len(self.rate) < 2:
            return
        median = float(np.median(list(self.rate.values())))
        self.rate[index] = median + (old - median) * math.exp(-(t - last) / self.relax_s)
        self._evidence_s[index] = t

    def update_oss(self, osts: Sequence[OstState], osses: dict) -> None:
        """Fold in each OSS's link limit where it shows: the bytes/s its OSTs wrote
        over the interval (obdfilter ``write_bytes``) over the OSS's LNet load
        (``lnet_load`` percent of the link, from the collectors), when that load is at
        least ``min_lnet_percent`` (below it the ratio is noise)."""
        written: dict[str, float] = {}
        for o in osts:
            if o.write_bytes_per_s is not None and math.isfinite(o.write_bytes_per_s):
                written[o.oss] = written.get(o.oss, 0.0) + max(o.write_bytes_per_s, 0.0)
        a = self.smoothing
        for name, w in written.items():
            st = osses.get(name)
            if st is None or st.lnet_load < self.min_lnet_percent or w <= 0:
                continue
            t = st.sample_time_s
            if t is not None and self._oss_seen.get(name) == t:
                continue
            self._oss_seen[name] = t
            est = w / (st.lnet_load / 100.0)
            old = self.oss_limit.get(name)
            self.oss_limit[name] = est if old is None or t is None else (1 - a) * old + a * est

    def slow_looks(self, indices: Sequence[int] | np.ndarray, factor: float) -> list[int]:
        """OSTs of ``indices`` whose latest estimate with brw_stats RPC times, unsmoothed,
        read more than ``factor`` times slower than the median smoothed rate of ``indices``
        and than the median of their latest looks (most OSTs slow at once is load; a look
        with bytes only is a lower bound and does not count); empty with fewer than
        :data:`MIN_PEERS` OSTs. The smoothed estimate needs several
        looks to fall that far from where it started (0.3 per look: four looks for a 49x
        straggler to pass 3x); one look beyond the brw_stats bucket noise is evidence now.

        Raises:
            ValueError: factor <= 1.
        """
        spread = _Spread(self, indices)
        return spread.idx[spread.look_slow(factor)].tolist()

    def slow_in_both(self, indices: Sequence[int] | np.ndarray, factor: float) -> list[int]:
        """OSTs of ``indices`` more than ``factor`` times slower than the median smoothed rate
        of ``indices`` by both their smoothed estimate and their latest look with brw_stats
        RPC times (:meth:`slow_looks`): the memory and the latest evidence agree. The
        smoothed estimate alone also falls with bytes-only looks (an OST that wrote
        little), and the look alone is one look; empty with fewer than
        :data:`MIN_PEERS` OSTs.

        Raises:
            ValueError: factor <= 1.
        """
        spread = _Spread(self, indices)
        return spread.idx[spread.both_slow(factor)].tolist()

    def slow_evidence(self, indices: Sequence[int] | np.ndarray, look_factor: float | None,
                      both_factor: float | None) -> tuple[bool, bool]:
        """Whether :meth:`slow_looks` with ``look_factor`` and :meth:`slow_in_both` with
        ``both_factor`` find any OST (False for a factor of None), from one pass over
        ``indices``: what a round's regime reads.

        Raises:
            ValueError: a factor <= 1.
        """
        if look_factor is None and both_factor is None:
            return False, False
        spread = _Spread(self, indices)
        return (look_factor is not None and bool(spread.look_slow(look_factor).any()),
                both_factor is not None and bool(spread.both_slow(both_factor).any()))

    def forget(self, indices: Sequence[int]) -> list[int]:
        """Drop what was learned of ``indices``' speed (estimate, RPC time, latest look):
        they count as unmeasured (the median, :meth:`rates`) until their next RPC-timed
        look, which then falls from that median like any first sample. What the store
        summed up to now stays folded, so that look sees only samples after this call.
        Returns the indices that had something to forget, ascending (an admin's
        ``lustre-alloc-ctl forget-speed`` after a slow drive was replaced)."""
        had = []
        for i in sorted({int(i) for i in indices}):
            found = [table.pop(i, None) for table in (self.rate, self.latency, self.last_look,
                                                      self._write_back)]
            self._evidence_s.pop(i, None)
            if any(v is not None for v in found):
                had.append(i)
        return had

    def ratios_to_median(self) -> dict[int, float]:
        """Each measured OST's smoothed estimate over the median of the measured ones
        (OST index -> ratio; 0.02: 50x slower); empty when none is measured."""
        if not self.rate:
            return {}
        median = float(np.median(list(self.rate.values())))
        return {i: r / median for i, r in sorted(self.rate.items())}

    def oss_limits(self, oss_names: Sequence[str]) -> np.ndarray:
        """Link limit of each named OSS, bytes/s, float (len,); inf when never shown."""
        return np.array([self.oss_limit.get(n, math.inf) for n in oss_names], dtype=float)

    def write_back(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Mask, bool (len,): OSTs of ``indices`` whose estimate is a write-back one
        (:meth:`_fold_write_back`: ZFS, timed by the OFD)."""
        return np.array([int(i) in self._write_back for i in indices], dtype=bool)

    def latencies(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Smoothed brw_stats write RPC time of ``indices``, s, float (len,); NaN unknown."""
        return np.array([self.latency.get(int(i), math.nan) for i in indices], dtype=float)

    def rates(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Rates of ``indices``, float (len,), bytes/s; unmeasured OSTs get the median
        of the measured ones among them (or the default). Write-back estimates within
        :data:`WRITE_BACK_ALIKE` of their median among ``indices`` read as that median
        (:func:`alike_to_median`); the median of ``indices`` is unchanged by it."""
        idx = [int(i) for i in indices]
        got = np.array([self.rate.get(i, math.nan) for i in idx], dtype=float)
        known = np.isfinite(got)
        fill = float(np.median(got[known])) if known.any() else self.default_rate_bytes_s
        out = np.where(known, got, fill)
        if self.write_back_alike is not None:
            wb = known & np.array([i in self._write_back for i in idx], dtype=bool)
            out[wb] = alike_to_median(out[wb], self.write_back_alike)
        return out


class _Spread:
    """One pass over ``indices`` of a tracker: their smoothed rates and latest looks with
    RPC times (NaN: none), the median rate, and the median of the looks. A look is slow
    against both medians: when most OSTs read slow at once the cause is load, not the
    OST. Behind more than 31 queued RPCs brw_stats' "disk I/Os in flight" stops counting
    (its last bucket), so Little's law under-reads every busy OST alike (expansion-25pct:
    24 of 30 OSTs 4.9x below the median estimate in one look). Nothing is slow with fewer
    than MIN_PEERS OSTs."""

    def __init__(self, tracker: OstRateTracker, indices: Sequence[int] | np.ndarray):
        self.idx = np.asarray([int(i) for i in indices], dtype=np.int64)
        self.enough = len(self.idx) >= MIN_PEERS
        if not self.enough:
            return
        self.rates = tracker.rates(self.idx)
        self.median = float(np.median(self.rates))
        self.looks = np.array([tracker.last_look.get(int(i), math.nan) for i in self.idx],
                              dtype=float)
        seen = self.looks[np.isfinite(self.looks)]
        self.look_ref = min(self.median, float(np.median(seen)) if len(seen) else math.inf)

    def look_slow(self, factor: float) -> np.ndarray:
        """Mask: latest look more than ``factor`` below both medians (NaN: False)."""
        _check_factor(factor)
        if not self.enough:
            return np.zeros(len(self.idx), dtype=bool)
        return self.looks * factor < self.look_ref

    def both_slow(self, factor: float) -> np.ndarray:
        """Mask: :meth:`look_slow` and the smoothed rate more than ``factor`` below the
        median rate."""
        look = self.look_slow(factor)
        return look & (self.rates * factor < self.median) if self.enough else look


def _check_factor(factor: float) -> None:
    if not factor > 1:
        raise ValueError(f"slow-look factor must be > 1, got {factor}")
