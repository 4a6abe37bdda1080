"""The in-place OST arrays and the pending overlay (lustre_alloc.mapper.state.arrays, lustre_alloc.mapper.state.pending)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from lustre_alloc.mapper.state.arrays import OstTable, TableSync, ost_arrays
from lustre_alloc.mapper.state.cluster_state import OstFlag, make_uniform_cluster
from lustre_alloc.mapper.state.pending import PendingOverlay
from lustre_alloc.mapper.state.state_store import StateStore

FIELDS = ("present", "usable", "degraded", "oss", "kbytes_total", "kbytes_avail",
          "latency_known", "cpu_percent", "mem_percent")


def same_rows(a: OstTable, b: OstTable) -> None:
    idx = a.indices()
    assert np.array_equal(idx, b.indices())
    for name in FIELDS[1:6]:
        assert np.array_equal(getattr(a, name)[idx], getattr(b, name)[idx]), name
    assert np.array_equal(a.latency_s[idx], b.latency_s[idx], equal_nan=True)
    names = sorted(a.oss_ids)
    assert sorted(b.oss_ids) == names
    for n in names:
        sa, sb = a.oss_ids[n], b.oss_ids[n]
        assert (a.cpu_percent[sa], a.mem_percent[sa]) == (b.cpu_percent[sb], b.mem_percent[sb])


def feed(store: StateStore, rng: random.Random, t: float) -> None:
    for host in range(6):
        targets = {}
        for i in range(host * 5, host * 5 + 5):
            if rng.random() < 0.3:
                continue
            targets[f"T{i}"] = {"kind": "ost", "index": i, "available": rng.random() > 0.1,
                                "values": {"kbytes_total": 1 << 30,
                                           "kbytes_free": rng.randrange(1, 1 << 30),
                                           "degraded": rng.random() < 0.1,
                                           "write_io_time_ms_mean": rng.choice([None, 3.0, 40.0])}}
        store.apply("oss", f"oss{5 - host}", t, 5.0,
                    {"values": {"cpu_percent": rng.uniform(0, 90), "mem_percent": 20.0}}, targets)


def test_store_keeps_its_arrays_equal_to_the_objects_as_samples_arrive():
    store = StateStore()
    rng = random.Random(7)
    for t in range(20):
        feed(store, rng, float(t))
        snap = store.current(float(t))
        same_rows(snap.ost_table, OstTable.from_snapshot(snap))


def test_objects_changed_behind_the_producers_back_are_reread():
    store = StateStore.static_cluster(2, 4)
    snap = store.current(0.0)
    sync = TableSync()
    assert sync.table(snap).usable[3]
    snap.osts[3].flags = OstFlag.READONLY
    snap.changed()
    assert not sync.table(snap).usable[3]


def test_round_arrays_number_osses_by_first_appearance():
    snap = make_uniform_cluster(3, 2, 1 << 20)
    table = OstTable.from_snapshot(snap)
    arrays = ost_arrays(table, np.array([2, 3, 4, 5]))
    assert arrays.oss.tolist() == [0, 0, 1, 1]
    assert arrays.index.tolist() == [2, 3, 4, 5]


def sampled_at_zero(osts: int):
    """A one-OSS cluster of ``osts`` OSTs, every one sampled at t = 0, and its table."""
    snap = make_uniform_cluster(1, osts, 1 << 20)
    for o in snap.osts:
        o.sample_time_s = 0.0
    return snap, OstTable.from_snapshot(snap)


def test_pending_bytes_shrink_by_landed_data_and_stripes_reset_on_a_new_sample():
    snap, table = sampled_at_zero(4)
    pending = PendingOverlay(half_life_s=300.0)
    pending.decay(0.0)
    pending.add([1, 2], 4096.0, table)
    assert pending.bytes_by_ost() == {1: 4096.0, 2: 4096.0}
    snap.osts[1].kbytes_avail -= 1                 # 1 KiB landed on OST 1
    snap.osts[2].sample_time_s = 5.0               # OST 2 sampled since
    table.refresh(snap)
    pending.absorb(table)
    assert pending.bytes_by_ost() == {1: 3072.0, 2: 4096.0}
    assert pending.stripes_by_ost() == {1: 1.0}
    pending.decay(300.0)
    assert pending.bytes_by_ost() == {1: 1536.0, 2: 2048.0}
    pending.reserve([3], 1.0)
    over = pending.overlay(ost_arrays(table, table.indices()))
    assert over.queue.tolist() == [0.0, 0.5, 0.0, 1.0]
    pending.reserve([3], -1.0)
    assert pending.reserved_by_ost() == {}


def test_a_stripe_placed_late_in_an_interval_stays_counted_for_the_part_the_sample_missed():
    """brw_stats' write time is a mean over the sample's interval: a stripe placed at
    ``tau`` in ``(t0, t1]`` shows in it for ``(t1 - tau) / (t1 - t0)`` only; the rest is
    carried until the next sample, whose interval it spans whole."""
    snap, table = sampled_at_zero(3)
    pending = PendingOverlay(half_life_s=1e9)
    pending.decay(1.0)
    pending.add([0], 1.0, table)                   # early: 4/5 of (0, 5] sees it
    pending.decay(4.0)
    pending.add([1, 1], 1.0, table)                # late: 1/5 each
    for o in snap.osts:
        o.sample_time_s = 5.0
    table.refresh(snap)
    pending.absorb(table)
    got = pending.stripes_by_ost()
    assert got[0] == pytest.approx(0.2) and got[1] == pytest.approx(1.6) and 2 not in got
    pending.decay(6.0)
    pending.add([0], 1.0, table)                   # a new stripe on top of the carried part
    assert pending.stripes_by_ost()[0] == pytest.approx(1.2)
    over = pending.overlay(ost_arrays(table, table.indices()))
    assert over.queue.tolist() == pytest.approx([1.2, 1.6, 0.0])
    for o in snap.osts:
        o.sample_time_s = 10.0
    table.refresh(snap)
    pending.absorb(table)                          # the carried parts are shown now
    assert pending.stripes_by_ost() == pytest.approx({0: 0.2})   # (6 - 5) / 5 of the new one
    pending.remove([0], 1.0)
    assert pending.stripes_by_ost() == pytest.approx({0: 0.2})   # carried: not taken back
