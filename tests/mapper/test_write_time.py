"""Which counter times a write (lustre_alloc/mapper/state/write_time.py): brw_stats where the
OSD fills it (ldiskfs), the OFD's write and sync service times where it does not (ZFS)."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.mapper.state.write_time import BRW_STATS, OFD_STATS, write_time

MIB = 1 << 20


def test_brw_stats_wins_when_it_timed_writes():
    wt = write_time({"write_ios": 40, "write_io_time_ms_mean": 12.0,
                     "write_ios_in_flight_mean": 3.0, "write_ops_per_s": 8.0,
                     "write_service_time_us_mean": 90_000.0}, 5.0)
    assert wt.source == BRW_STATS
    assert (wt.ios, wt.in_flight) == (40, 3.0)
    assert math.isclose(wt.latency_s, 0.012)


def test_an_empty_brw_stats_section_hands_over_to_the_ofd_write_and_sync_times():
    """osd-zfs: brw_stats' I/O time section present but never filled for a write
    (``write_ios`` 0); 10 write RPCs/s of 2 ms each and one fsync of 3 s over 5 s."""
    wt = write_time({"write_ios": 0, "write_ops_per_s": 10.0, "write_bytes_per_s": 10 * MIB,
                     "write_service_time_us_mean": 2000.0, "sync_ops_per_s": 0.2,
                     "sync_service_time_us_mean": 3e6}, 5.0)
    assert wt.source == OFD_STATS and wt.in_flight is None
    assert math.isclose(wt.ios, 50.0)
    assert math.isclose(wt.io_time_s, 50 * 0.002 + 3.0)
    assert math.isclose(wt.latency_s, (0.1 + 3.0) / 50)


@pytest.mark.parametrize("values", [
    {},                                                        # idle, nothing timed
    {"write_ios": 0, "write_ops_per_s": 3.0},                  # before 2.14: [reqs], no time
    {"write_ios": 0, "write_service_time_us_mean": 0.0, "write_ops_per_s": 0.0},
])
def test_nothing_timed_is_no_evidence(values):
    assert write_time(values, 5.0) is None


def test_a_sync_with_no_write_in_its_sample_has_time_and_no_rpc():
    wt = write_time({"write_ios": 0, "sync_ops_per_s": 0.2, "sync_service_time_us_mean": 1e6}, 5.0)
    assert wt.ios == 0 and wt.io_time_s == pytest.approx(1.0) and wt.latency_s is None


def _zfs_sample(store: StateStore, t: float, sync_s_per_mib: dict[int, float],
                mib_per_s: dict[int, float], write_ms: float = 2.0) -> None:
    """One OSS, four ZFS OSTs as the collectors publish them: brw_stats has no write time;
    each OST wrote ``mib_per_s`` MiB/s in 1 MiB RPCs of ``write_ms`` and one fsync per
    5 s sample, which took ``sync_s_per_mib`` (default 2 ms) per MiB it wrote since the
    last (a txg sync writes out what is dirty)."""
    targets = {}
    for i in range(4):
        rate = mib_per_s.get(i, 0.0)
        values = {"kbytes_total": 1 << 31, "kbytes_free": 1 << 30, "kbytes_avail": 1 << 30,
                  "write_ios": 0, "write_bytes_per_s": rate * MIB, "write_ops_per_s": rate}
        if rate:
            values.update(write_service_time_us_mean=write_ms * 1000, sync_ops_per_s=0.2,
                          sync_service_time_us_mean=sync_s_per_mib.get(i, 0.002) * rate * 5 * 1e6)
        targets[f"lustre-OST{i:04x}"] = {"kind": "ost", "index": i, "available": True,
                                         "values": values}
    store.apply("oss", "oss0", t, 5.0, {"values": {"cpu_percent": 5.0}}, targets)


def test_a_zfs_ost_slow_at_fsync_is_ranked_slowest_and_left_out():
    """The guest's slow vdev (docs/lustre-vm.md): every OST takes the job's bytes into
    memory at once (2 ms RPCs alike), OST1's fsyncs take 0.89 s per MiB against 2 ms (8.9 s
    for 10 MiB, measured in the guest's warm-up). Judged by
    brw_stats alone the mapper saw four alike OSTs, and by bytes alone it read OST1, which
    delivered fewer, as the least loaded. With the OFD's times it reads OST1 more than 3x
    slower than the median after a single look, and the flow gives it no new file."""
    store = StateStore()
    policy = McmfPolicy()
    for k in range(6):
        _zfs_sample(store, 5.0 * (k + 1), {1: 0.89}, {0: 8.0, 1: 2.0, 2: 8.0, 3: 8.0})
    snap = store.current(30.0)
    tracker = OstRateTracker(smoothing=1.0)
    tracker.update(snap.osts)
    rates = tracker.rates(range(4))
    assert int(rates.argmin()) == 1 and rates[1] * 3 < float(sorted(rates)[2])
    assert tracker.slow_looks(range(4), 3.0) == [1]
    out = policy.allocate_batch(snap, [CreateRequest(f"j{k}", 1) for k in range(20)])
    stripes = Counter(o for p in out for o in p.osts)
    assert stripes[1] <= 1, stripes


def test_an_ost_asked_little_is_not_taken_for_a_slow_one():
    """OST3 wrote a tenth of the others' bytes, each RPC as quick: its estimate is the
    others' (bytes alone would read it 10x slower), and nothing reads as slow."""
    store = StateStore()
    for k in range(4):
        _zfs_sample(store, 5.0 * (k + 1), {}, {0: 10.0, 1: 10.0, 2: 10.0, 3: 1.0})
    tracker = OstRateTracker(smoothing=1.0)
    tracker.update(store.current(20.0).osts)
    rates = tracker.rates(range(4))
    assert rates[3] >= 0.9 * float(min(rates[:3]))
    assert tracker.slow_looks(range(4), 3.0) == []


def test_a_burst_into_zfs_memory_does_not_make_a_slow_ost_fast():
    """Seen in the guest: the job's 48 MiB went into OST1's dirty memory within one 2 s
    sample (its write RPCs quick), and the fsyncs paid for them after. Bytes over that
    span read OST1 as the fastest; the time per RPC with the fsyncs keeps it slowest."""
    store = StateStore()
    for k in range(3):      # the warm-up: OST1 slow at fsync
        _zfs_sample(store, 5.0 * (k + 1), {1: 0.89}, {0: 2.0, 1: 2.0, 2: 2.0, 3: 2.0})
    tracker = OstRateTracker(smoothing=0.3)
    tracker.update(store.current(15.0).osts)
    # the burst: 24 MiB/s for a 5 s sample, 2 ms RPCs, no fsync yet on OST1
    targets = {}
    for i in range(4):
        values = {"kbytes_total": 1 << 31, "kbytes_free": 1 << 30, "kbytes_avail": 1 << 30,
                  "write_ios": 0, "write_bytes_per_s": 24.0 * MIB, "write_ops_per_s": 24.0,
                  "write_service_time_us_mean": 2000.0}
        if i != 1:
            values.update(sync_ops_per_s=0.2, sync_service_time_us_mean=0.002 * 120 * 1e6)
        targets[f"lustre-OST{i:04x}"] = {"kind": "ost", "index": i, "available": True,
                                         "values": values}
    store.apply("oss", "oss0", 20.0, 5.0, {"values": {"cpu_percent": 5.0}}, targets)
    tracker.update(store.current(20.0).osts)
    rates = tracker.rates(range(4))
    assert int(rates.argmin()) == 1 and rates[1] * 3 < float(np.median(rates)), rates


def test_alike_zfs_osts_whose_last_fsyncs_differ_share_a_round_evenly():
    """Seen in the guest: three alike ZFS OSTs read 0.34, 0.44 and 0.80 s a file after
    the same warm-up (which OST's fsync caught a long txg sync is chance), and the flow
    split a round's 24 files 5/1/13/5. Estimates within 2x of their median are one
    estimate: the three fast OSTs take a round alike, the slow one still none."""
    store = StateStore()
    sync = {0: 0.34 / 40, 1: 0.89, 2: 0.44 / 40, 3: 0.80 / 40}   # s per MiB
    for k in range(6):
        _zfs_sample(store, 5.0 * (k + 1), sync, {0: 8.0, 1: 2.0, 2: 8.0, 3: 8.0})
    snap = store.current(30.0)
    policy = McmfPolicy()
    out = policy.allocate_batch(snap, [CreateRequest(f"j{k}", 1) for k in range(24)])
    stripes = Counter(o for p in out for o in p.osts)
    assert stripes[1] == 0 and max(stripes.values()) - min(stripes[i] for i in (0, 2, 3)) <= 1, \
        stripes
    raw = OstRateTracker(smoothing=1.0, write_back_alike=None)
    raw.update(snap.osts)
    spread = raw.rates([0, 2, 3])
    assert spread.max() / spread.min() > 2.0        # what the flow was given before


def test_alike_to_median_moves_values_within_the_band_and_keeps_the_median():
    from lustre_alloc.mapper.speed.rates import alike_to_median
    r = np.array([1.0, 30.0, 40.0, 70.0, 200.0])
    out = alike_to_median(r, 2.0)
    assert out.tolist() == [1.0, 40.0, 40.0, 40.0, 200.0]
    assert np.median(out) == np.median(r)
    assert alike_to_median(np.array([5.0]), 2.0).tolist() == [5.0]
    with pytest.raises(ValueError):
        alike_to_median(r, 0.5)


def test_brw_stats_timed_rates_are_not_snapped():
    """ldiskfs and the simulator time each RPC in brw_stats: their differences are the
    OSTs' own, and the tracker reports them as estimated."""
    tracker = OstRateTracker(smoothing=1.0)
    tracker.rate.update({0: 100.0, 1: 150.0, 2: 180.0})
    assert tracker.rates([0, 1, 2]).tolist() == [100.0, 150.0, 180.0]


def test_one_fsync_in_the_last_sample_is_not_priced_as_load_on_a_zfs_ost():
    """The sampled time per RPC of a write-back OST is whichever fsync fell in the sample;
    priced as RateCost's queue term, the next round went to the alike OSTs without one.
    Its window (rates.py) already holds it: the round spreads over the three alike OSTs."""
    store = StateStore()
    for k in range(6):
        _zfs_sample(store, 5.0 * (k + 1), {1: 0.89}, {0: 8.0, 1: 2.0, 2: 8.0, 3: 8.0})
    _zfs_sample(store, 35.0, {0: 0.02, 1: 0.89}, {0: 8.0, 1: 2.0, 2: 8.0, 3: 8.0})
    snap = store.current(35.0)
    # the setup: OST0's last sample holds a long fsync (a sampled value, not a timing)
    assert snap.osts[0].write_latency_s > 5 * snap.osts[2].write_latency_s
    out = McmfPolicy().allocate_batch(snap, [CreateRequest(f"j{k}", 1) for k in range(12)])
    stripes = Counter(o for p in out for o in p.osts)
    assert stripes[1] == 0 and max(stripes.values()) - min(stripes[i] for i in (0, 2, 3)) <= 1, \
        stripes
