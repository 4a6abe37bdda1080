"""Per-OST write totals over every sample the state store folded, so a reader that looks
at some samples only still counts what all of them measured.

The MCMF rate tracker (:class:`lustre_alloc.mapper.speed.rates.OstRateTracker`) looks at the state when
a round is built, i.e. at creates. Live, the collectors publish every interval (5 s,
paper Section III-A) and the store keeps each OST's latest sample, so a round saw only
the last interval: a slow OST's RPCs of a minute ago, with nothing since, were lost to
it. The simulator reduces lazily at a create, over the readings since its previous
reduction (:mod:`lustre_alloc.simulator.mds_view`), so its rounds saw all of them. The delta of these
totals between two looks is what one sample over the whole span reports, live and
simulated alike, because every quantity the rate estimate uses adds up:

* brw_stats "I/O time" mean: :func:`lustre_alloc.collectors.reduce.summarize_log2`'s mean is linear in
  the bucket counts, so the mean over several intervals is their ``write_ios``-weighted
  mean;
* "disk I/Os in flight" mean: the same, weighted by ``write_ios`` (the simulator and the
  live emulator tally both blocks per RPC);
* obdfilter ``write_bytes``: the interval's rate times its span.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from lustre_alloc.mapper.state.write_time import BRW_STATS, OFD_STATS, WriteTime

MIN_TIMED_IOS = 0.5
"""Fewest write RPCs that give a span a mean RPC time: the OFD's write RPCs come from a
rate times a span (fractional); a span whose only time is an fsync of bytes written
before it has a time and no RPC to spread it over."""


@dataclass(slots=True)
class WriteTotals:
    """Sums over an OST's samples (or, from :meth:`since`, over the samples of a span).

    Attributes:
        samples: samples folded.
        ios: write RPCs timed (brw_stats' "I/O time" count, ``write_ios``, or the OFD's
            write RPCs: :mod:`lustre_alloc.mapper.state.write_time`).
        io_time_s: their time summed, seconds (the OFD's: fsyncs' time included).
        flight_ios: the ``write_ios`` of samples that had the "disk I/Os in flight" block.
        in_flight: sum of ``write_ios`` x mean write I/Os in flight over those samples.
        bytes: bytes written (obdfilter ``write_bytes_per_s`` x the sample's span).
        bytes_span_s: seconds covered by samples with a write rate.
        time_s: the last sample's time, seconds (None before any).
        ofd_ios: the ``ios`` timed by the OFD (a ZFS OST: brw_stats timed none), whose
            bytes went to the OSD's write-back memory first (:attr:`write_back`).
        ofd_time_s: the part of ``io_time_s`` the OFD timed (fsyncs included).
    """
    samples: int = 0
    ios: float = 0
    io_time_s: float = 0.0
    flight_ios: float = 0
    in_flight: float = 0.0
    bytes: float = 0.0
    bytes_span_s: float = 0.0
    time_s: float | None = None
    ofd_ios: float = 0
    ofd_time_s: float = 0.0

    def add(self, time_s: float, span_s: float, write_ios: float | None,
            latency_s: float | None, in_flight: float | None,
            bytes_per_s: float | None) -> None:
        """Fold one sample at ``time_s`` covering ``span_s`` seconds from its RPC count,
        mean RPC time (s) and in-flight mean. ``write_ios`` None with a latency (an older
        sample format without the count) weighs 1."""
        ios = 1 if write_ios is None and latency_s is not None else (write_ios or 0)
        timed = latency_s is not None and latency_s > 0 and ios > 0
        self.add_sample(time_s, span_s, WriteTime(ios, ios * latency_s, in_flight, BRW_STATS)
                        if timed else None, bytes_per_s)

    def add_sample(self, time_s: float, span_s: float, write: WriteTime | None,
                   bytes_per_s: float | None) -> None:
        """Fold one sample at ``time_s`` covering ``span_s`` seconds: its write time
        (:func:`lustre_alloc.mapper.state.write_time.write_time`; None: none timed) and
        write rate, bytes/s."""
        self.samples += 1
        self.time_s = time_s
        if write is not None and write.io_time_s > 0:
            self.ios += write.ios
            self.io_time_s += write.io_time_s
            if write.source == OFD_STATS:
                self.ofd_ios += write.ios
                self.ofd_time_s += write.io_time_s
            if write.in_flight is not None and write.in_flight >= 1 and write.ios > 0:
                self.flight_ios += write.ios
                self.in_flight += write.ios * write.in_flight
        if bytes_per_s is not None and bytes_per_s >= 0 and span_s > 0:
            self.bytes += bytes_per_s * span_s
            self.bytes_span_s += span_s

    def since(self, before: "WriteTotals | None") -> "WriteTotals":
        """What the samples after ``before`` (an earlier copy of these totals) added;
        everything when ``before`` is None or from another run of the store (it counts
        more samples)."""
        if before is None or before.samples > self.samples:
            return self.copy()
        return WriteTotals(self.samples - before.samples, self.ios - before.ios,
                           self.io_time_s - before.io_time_s,
                           self.flight_ios - before.flight_ios,
                           self.in_flight - before.in_flight, self.bytes - before.bytes,
                           self.bytes_span_s - before.bytes_span_s, self.time_s,
                           self.ofd_ios - before.ofd_ios,
                           self.ofd_time_s - before.ofd_time_s)

    def copy(self) -> "WriteTotals":
        return replace(self)

    @property
    def latency_s(self) -> float | None:
        """Mean write I/O time over these samples, s (None: no write ran)."""
        return self.io_time_s / self.ios if self.ios >= MIN_TIMED_IOS and self.io_time_s > 0 else None

    @property
    def mean_in_flight(self) -> float | None:
        """Mean write I/Os in flight, itself included (None: no sample had the block)."""
        return self.in_flight / self.flight_ios if self.flight_ios > 0 else None

    @property
    def bytes_per_s(self) -> float | None:
        """Bytes written per second over the span (None: no write rate was sampled)."""
        return self.bytes / self.bytes_span_s if self.bytes_span_s > 0 else None

    @property
    def write_back(self) -> bool:
        """Most timed write RPCs were timed by the OFD: the OST took the bytes into memory
        (ZFS's dirty data) and paid for them at its txg syncs, so the bytes written over a
        span say how fast the OST accepted them, not how fast it writes them out; the
        RPC time with the fsyncs' time is the measure (:mod:`lustre_alloc.mapper.state.write_time`)."""
        if self.ios > 0:
            return 2 * self.ofd_ios >= self.ios
        return self.ofd_time_s > 0          # an fsync of bytes written before the span
