"""What an OSS's collector would read from its OSTs, kept by the simulator as Lustre keeps
it: cumulative counters advanced only by RPCs that ran.

Per OST position, since the start of the run:

* brw_stats "I/O time (1/1000s)" for reads and writes: RPCs per log2 bucket of their I/O
  time in ms (``lprocfs_oh_tally_log2``), each RPC's time from
  :func:`lustre_alloc.simulator.models.rpc_io_time_s` (the streams sharing the OST in that step, its
  bandwidth then, its request latency); "disk I/O size": every RPC is
  :data:`lustre_alloc.simulator.models.RPC_BYTES`, one disk I/O; "disk I/Os in flight": each RPC under
  the streams sharing its OST in that step (one RPC each, itself included; 31 and above
  in bucket 31, as ``lprocfs_oh_tally``);
* obdfilter ``stats``: ``read_bytes``/``write_bytes`` samples (RPCs) and sum (bytes), and
  ``read``/``write`` ``[usecs]``: the same RPCs and their summed time (the OFD's own clock,
  2.14+; ``ofd_io.c`` ``ofd_commitrw_write()``).

Per OSD, as Lustre's (docs/reference/lustre-configurations.md): on ldiskfs brw_stats times
every RPC (``osd-ldiskfs/osd_io.c`` ``osd_bio_fini()``); on ZFS no write
(``osd-zfs/osd_io.c`` ``osd_write_commit()``: ``record_end_io(osd, WRITE, 0, ...)``), so a
ZFS OST's write time reaches the collectors only through the OFD's ``write`` counter, and
the mapper reads it as deployed (:mod:`lustre_alloc.mapper.state.write_time`). What is not
modelled: ZFS's write-back (a write RPC answered from memory, the device's time paid at the
next fsync or under the dirty-data throttle); the simulated RPC's time is its service time
either way.

Bytes become RPCs when a whole RPC has accumulated on the OST (the rest waits for the next
step). At a sample, :meth:`OstReadings.brw_stats` and :meth:`OstReadings.stats` give the
objects the collectors' parsers return for those files
(:class:`lustre_alloc.collectors.readers.brw_stats.BrwStats`,
:class:`lustre_alloc.collectors.readers.stats_file.StatsSnapshot`), which the collectors' own reduction
(:func:`lustre_alloc.collectors.collector.reduce_brw`, :func:`lustre_alloc.collectors.collector.reduce_stats`) turns
into the sample's values. An OST no RPC reached in an interval has no I/O time in its
sample, exactly as live: nothing in Lustre says what an idle OST could deliver.
"""
from __future__ import annotations

import numpy as np

from lustre_alloc.collectors.readers._common import Counter
from lustre_alloc.collectors.readers.brw_stats import (DISK_IN_FLIGHT, DISK_IO_SIZE, IN_FLIGHT_BUCKETS,
                                          IO_TIME, BrwStats, Histogram)
from lustre_alloc.collectors.readers.stats_file import StatsSnapshot
from lustre_alloc.simulator.models import RPC_BYTES, rpc_io_time_s

TIME_BUCKETS = 24
"""log2 buckets of the I/O time histogram: 1 ms .. 2**23 ms (about 2.3 h)."""
SIZE_BUCKET = int(RPC_BYTES)
"""The disk I/O size bucket every simulated RPC lands in, bytes."""


def log2_bucket_index(values: np.ndarray) -> np.ndarray:
    """:func:`lustre_alloc.collectors.reduce.log2_bucket` of each value as its exponent (bucket
    ``2**i``), int64 of the input's shape: the vectorised form of the kernel's tally."""
    v = np.asarray(values, dtype=float)
    return np.where(v <= 1, 0, np.ceil(np.log2(np.maximum(v, 1.0)))).astype(np.int64)


class OstReadings:
    """Cumulative brw_stats and obdfilter counters of ``n`` OST positions.

    Attributes:
        io_time: RPCs per I/O time bucket, int64 (2, n, TIME_BUCKETS): [0] reads, [1] writes.
        in_flight: RPCs per "disk I/Os in flight" bucket, int64 (2, n, IN_FLIGHT_BUCKETS).
        rpcs, nbytes: RPCs and bytes served, (2, n) int64 / float: [0] reads, [1] writes.
    """

    def __init__(self, n: int, brw_times_writes: bool = True):
        self.n = n
        self.brw_times_writes = brw_times_writes
        """False for ZFS OSTs: brw_stats' write "I/O time" stays empty."""
        self.io_time = np.zeros((2, n, TIME_BUCKETS), dtype=np.int64)
        self.in_flight = np.zeros((2, n, IN_FLIGHT_BUCKETS), dtype=np.int64)
        self.rpcs = np.zeros((2, n), dtype=np.int64)
        self.nbytes = np.zeros((2, n))
        self.time_us = np.zeros((2, n))       # the OFD's read/write [usecs] sums
        self._partial = np.zeros((2, n))      # bytes not yet a whole RPC

    def step(self, read: np.ndarray, written: np.ndarray, sharing: np.ndarray,
             read_bandwidth_bytes_s: np.ndarray, write_bandwidth_bytes_s: np.ndarray,
             latency_s: np.ndarray | None) -> None:
        """One step's traffic per OST position: bytes read and written, the streams sharing
        each OST, its read and write bandwidth now (bytes/s) and request latency (s)."""
        lat = 0.0 if latency_s is None else latency_s
        for d, moved, bw in ((0, read, read_bandwidth_bytes_s), (1, written, write_bandwidth_bytes_s)):
            busy = np.flatnonzero(moved > 0)
            if not len(busy):
                continue
            self.nbytes[d, busy] += moved[busy]
            total = self._partial[d, busy] + moved[busy]
            whole = np.floor(total / RPC_BYTES).astype(np.int64)
            self._partial[d, busy] = total - whole * RPC_BYTES
            ran = whole > 0
            if not ran.any():
                continue
            rows, count = busy[ran], whole[ran]
            streams = np.maximum(sharing[rows], 1)
            with np.errstate(divide="ignore"):
                ms = 1000.0 * rpc_io_time_s(streams, bw[rows],
                                            lat if np.isscalar(lat) else lat[rows])
            self.time_us[d, rows] += count * 1000.0 * ms
            if d == 0 or self.brw_times_writes:
                bucket = np.minimum(log2_bucket_index(ms), TIME_BUCKETS - 1)
                np.add.at(self.io_time[d], (rows, bucket), count)
            flight = np.minimum(np.rint(streams).astype(np.int64), IN_FLIGHT_BUCKETS - 1)
            np.add.at(self.in_flight[d], (rows, flight), count)
            self.rpcs[d, rows] += count

    def brw_stats(self, p: int, now: float) -> BrwStats:
        """The brw_stats of OST position ``p`` at ``now`` (s) as the parser returns it."""
        buckets = [1 << b for b in range(TIME_BUCKETS)]
        time_h = Histogram(IO_TIME, "ios", buckets, self.io_time[0, p].tolist(),
                           self.io_time[1, p].tolist())
        size_h = Histogram(DISK_IO_SIZE, "ios", [SIZE_BUCKET], [int(self.rpcs[0, p])],
                           [int(self.rpcs[1, p])])
        flight_h = Histogram(DISK_IN_FLIGHT, "ios", list(range(IN_FLIGHT_BUCKETS)),
                             self.in_flight[0, p].tolist(), self.in_flight[1, p].tolist())
        return BrwStats(snapshot_time=now, start_time=0.0, elapsed_time=now,
                        histograms={DISK_IN_FLIGHT: flight_h, IO_TIME: time_h,
                                    DISK_IO_SIZE: size_h})

    def stats(self, p: int, now: float) -> StatsSnapshot:
        """The obdfilter ``stats`` of OST position ``p`` at ``now`` (s) as the parser
        returns it."""
        counters = {}
        for d, name in ((0, "read"), (1, "write")):
            if self.rpcs[d, p]:
                counters[f"{name}_bytes"] = Counter(int(self.rpcs[d, p]), "bytes",
                                                    sum=int(self.nbytes[d, p]))
                counters[name] = Counter(int(self.rpcs[d, p]), "usecs",
                                         sum=int(round(self.time_us[d, p])))
        return StatsSnapshot(snapshot_time=now, start_time=0.0, elapsed_time=now,
                             counters=counters)

    @staticmethod
    def empty_brw(now: float) -> BrwStats:
        """A brw_stats with nothing counted yet (the first reading of a collector)."""
        return BrwStats(snapshot_time=now, start_time=0.0, elapsed_time=now, histograms={
            IO_TIME: Histogram(IO_TIME, "ios"), DISK_IO_SIZE: Histogram(DISK_IO_SIZE, "ios")})

    @staticmethod
    def empty_stats(now: float) -> StatsSnapshot:
        """An obdfilter ``stats`` with nothing counted yet."""
        return StatsSnapshot(snapshot_time=now, start_time=0.0, elapsed_time=now)
