"""How long writes waited on an OST over one sample, from what its OSD actually measures.

The mapper's per-OST speed (:class:`lustre_alloc.mapper.speed.rates.OstRateTracker`) rests
on one number per sample: the write RPCs that ran and their mean time. Lustre measures it
in two places, and which one holds the truth depends on the OSD (read in lustre-release
v2_15_8 and v2_17_0; docs/reference/lustre-stats-formats.md, "Which counter times a write"):

* **brw_stats "I/O time"** (``osd-*.*.brw_stats``): on ldiskfs, each bulk I/O's time from
  submission to the block device's completion (``osd-ldiskfs/osd_io.c``
  ``osd_bio_fini()`` sets ``dr_elapsed``, ``osd_fini_iobuf()`` tallies it): a slow disk
  shows there. On ZFS, never for a write: ``osd-zfs/osd_io.c`` ``osd_write_commit()`` calls
  ``record_end_io(osd, WRITE, 0, ...)`` and ``record_end_io()`` tallies the histogram only
  ``if (elapsed)``. The section stays empty whatever the disk does.
* **the OFD's ``stats``** (``obdfilter.*.stats``, 2.14+; debugfs in 2.17): ``write``
  ``[usecs]``, from the start of ``ofd_commitrw_write()`` to its end (``ofd_io.c``,
  ``ktime_us_delta(ktime_get(), kstart)``), which on ZFS includes the transaction start
  where the write throttle (``zfs_dirty_data_max``, ``dmu_tx_delay``) holds a writer behind
  a slow vdev; and ``sync`` ``[usecs]`` (``ofd_dev.c`` ``ofd_sync_hdl()``), what an fsync
  waits for: a ZFS OST's txg sync to its vdevs.

The rule: a sample whose brw_stats timed writes is taken from brw_stats (ldiskfs; the
simulator's OSTs, which time every RPC the same way). Otherwise, when the OFD timed its
writes, the write RPCs are the sample's ``write_bytes`` RPCs and their time is the OFD's
``write`` time plus its ``sync`` time, spread over those RPCs: the seconds the clients
waited on this OST per RPC written, fsync included. With neither, a sample has RPCs and no
time (an older Lustre whose OFD counts ``[reqs]``: its brw_stats is the only clock).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

BRW_STATS = "brw_stats"
OFD_STATS = "ofd_stats"


@dataclass(frozen=True, slots=True)
class WriteTime:
    """One sample's write RPCs and how long they took.

    Attributes:
        ios: write RPCs in the sample (brw_stats "I/O time" count, or the OFD's
            ``write_bytes`` samples); may be fractional from a rate times a span.
        io_time_s: seconds those RPCs took, summed (OFD: fsyncs' time included); may be
            > 0 with ``ios`` 0 (an fsync in a sample that wrote nothing).
        in_flight: mean write I/Os in flight, itself included (brw_stats "disk I/Os in
            flight"); None when not measured (the OFD counts no queue).
        source: :data:`BRW_STATS` or :data:`OFD_STATS`.
    """
    ios: float
    io_time_s: float
    in_flight: float | None
    source: str

    @property
    def latency_s(self) -> float | None:
        """Mean time per write RPC, s; None when no RPC ran or none was timed."""
        return self.io_time_s / self.ios if self.ios > 0 and self.io_time_s > 0 else None


def _num(values: Mapping[str, Any], name: str) -> float | None:
    v = values.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def write_time(values: Mapping[str, Any], span_s: float) -> WriteTime | None:
    """The write time of one OST sample's ``values`` (docs/protocol.md, "OST values")
    covering ``span_s`` seconds, by the rule of this module; None when the sample timed
    no write.

    Args:
        values: the sample's values (``write_ios``, ``write_io_time_ms_mean``,
            ``write_ios_in_flight_mean``; ``write_ops_per_s``,
            ``write_service_time_us_mean``, ``sync_ops_per_s``,
            ``sync_service_time_us_mean``).
        span_s: seconds the sample covers (> 0 for the OFD's rates to count).
    """
    brw_ios = _num(values, "write_ios")
    brw_ms = _num(values, "write_io_time_ms_mean")
    if brw_ms is not None and brw_ms > 0 and (brw_ios is None or brw_ios > 0):
        ios = 1.0 if brw_ios is None else brw_ios   # an older sample without the count
        return WriteTime(ios, ios * brw_ms / 1000.0, _num(values, "write_ios_in_flight_mean"),
                         BRW_STATS)
    if span_s <= 0:
        return None
    write_us = _num(values, "write_service_time_us_mean")
    sync_us = _num(values, "sync_service_time_us_mean")
    if write_us is None and sync_us is None:
        return None
    writes = (_num(values, "write_ops_per_s") or 0.0) * span_s
    syncs = (_num(values, "sync_ops_per_s") or 0.0) * span_s
    seconds = (writes * (write_us or 0.0) + syncs * (sync_us or 0.0)) / 1e6
    if seconds <= 0:
        return None
    return WriteTime(writes, seconds, None, OFD_STATS)
