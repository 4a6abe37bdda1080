"""An OST on which the MDS has no precreated objects is left out while others can serve,
as LOD's own first pass leaves it (lod_qos.c lod_check_and_reserve_ost(): "skip OSPs with
no objects ready"); an explicit list would make the create wait for its precreation."""
from __future__ import annotations

from collections import Counter

import pytest

from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.state.state_store import StateStore

MIB = 1 << 20


def _store(slow: dict[int, float] | None = None) -> StateStore:
    """Four alike ldiskfs-like OSTs on one OSS (OST ``i`` at ``slow.get(i, 1)`` of the
    others' speed), sampled 3 times."""
    store = StateStore(fsname="lustre")
    for k in range(3):
        targets = {}
        for i in range(4):
            f = (slow or {}).get(i, 1.0)
            targets[f"lustre-OST{i:04x}"] = {
                "kind": "ost", "index": i, "available": True,
                "values": {"kbytes_total": 1 << 31, "kbytes_free": 1 << 30,
                           "kbytes_avail": 1 << 30, "write_bytes_per_s": 100 * MIB * f,
                           "write_ios": 500, "write_io_time_ms_mean": 10.0 / f,
                           "write_ios_in_flight_mean": 1.0}}
        store.apply("oss", "oss0", 5.0 * (k + 1), 5.0, {"values": {"cpu_percent": 5.0}},
                    targets)
    return store


def _mds(store: StateStore, t: float, ready: dict[int, int]) -> None:
    osts = {f"lustre-OST{i:04x}": {"fsname": "lustre", "index": i, "active": True,
                                   "max_create_count": 20000, "prealloc_status": 0,
                                   "precreated_objects": ready.get(i, 32)}
            for i in range(4)}
    store.apply("mds", "mds0", t, 5.0, {"values": {"cpu_percent": 5.0}, "osts": osts,
                                        "pools": {}}, {})


@pytest.mark.parametrize("slow", [None, {3: 0.2}], ids=["round-robin regime", "flow"])
def test_an_ost_without_precreated_objects_gets_no_file_while_others_can_serve(slow):
    store = _store(slow)
    _mds(store, 16.0, {1: 0})
    snap = store.current(16.0)
    assert [o.files_precreated for o in snap.osts] == [32, 0, 32, 32]
    out = McmfPolicy().allocate_batch(snap, [CreateRequest(f"j{k}", 1) for k in range(12)])
    stripes = Counter(o for p in out for o in p.osts)
    assert stripes[1] == 0 and sum(stripes.values()) == 12, stripes


def test_it_is_used_when_a_file_needs_every_ost_and_again_once_refilled():
    store = _store()
    _mds(store, 16.0, {1: 0})
    (wide,) = McmfPolicy().allocate_batch(store.current(16.0), [CreateRequest("j", 4)])
    assert sorted(wide.osts) == [0, 1, 2, 3]
    _mds(store, 21.0, {})
    snap = store.current(21.0)
    assert snap.osts[1].files_precreated == 32
    out = McmfPolicy().allocate_batch(snap, [CreateRequest(f"j{k}", 1) for k in range(12)])
    assert Counter(o for p in out for o in p.osts)[1] > 0
