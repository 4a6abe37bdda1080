"""Bytes per create from job_stats: the state store folds the OSTs' write bytes and the MDTs'
creates per jobid (collector rows), and ``size_from_job_stats`` prices an unsized create with it."""
from __future__ import annotations

import pytest

from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.policies.registry import build_policy
from lustre_alloc.mapper.state.job_sizes import MIN_CREATES, WINDOW_S, JobBytesPerCreate
from lustre_alloc.mapper.state.state_store import StateStore

MIB = 1 << 20


def _oss(store: StateStore, t: float, rows_by_ost: dict[int, list[dict]]) -> None:
    """One OSS sample of OSTs 0-3 of ``scratch``, each with its job_stats rows."""
    targets = {}
    for i in range(4):
        targets[f"scratch-OST{i:04x}"] = {
            "kind": "ost", "index": i, "available": True,
            "values": {"kbytes_total": 1 << 30, "kbytes_free": 1 << 29, "kbytes_avail": 1 << 29},
            "jobs": rows_by_ost.get(i, [])}
    store.apply("oss", "oss0", t, 5.0, {"values": {"cpu_percent": 5.0}}, targets)


def _mds(store: StateStore, t: float, rows: list, fs: str = "scratch") -> None:
    store.apply("mds", "mds0", t, 5.0, {"values": {"cpu_percent": 5.0}},
                {f"{fs}-MDT0000": {"kind": "mdt", "index": 0, "values": {}, "jobs": rows}})


def _row(job: str, **rates: float) -> dict:
    return {"job_id": job, "read_bytes_per_s": 0.0, "write_bytes_per_s": 0.0,
            "ops_per_s": 0.0, **rates}


def test_store_divides_bytes_written_by_files_created():
    store = StateStore()
    # 8 files of 64 MiB in 5 s: 8 creates on the MDT, 512 MiB over two OSTs
    _oss(store, 5.0, {0: [_row("ckpt.1", write_bytes_per_s=256 * MIB / 5)],
                      1: [_row("ckpt.1", write_bytes_per_s=256 * MIB / 5)]})
    _mds(store, 5.0, [_row("ckpt.1", creates_per_s=8 / 5, ops_per_s=16 / 5)])
    assert store.job_sizes.bytes_per_create("ckpt.1", 5.0) == pytest.approx(64 * MIB)
    assert store.snapshot.job_sizes is store.job_sizes
    # another file system's MDT, and a row that is not one, change nothing
    _mds(store, 6.0, [_row("ckpt.1", creates_per_s=1000.0)], fs="other")
    _mds(store, 6.0, ["ckpt.1", {"job_id": 3, "creates_per_s": 5.0},
                      _row("ckpt.1", creates_per_s=True)])
    assert store.job_sizes.bytes_per_create("ckpt.1", 6.0) == pytest.approx(64 * MIB)


def test_too_little_history_or_an_idle_job_gives_nothing():
    sizes = JobBytesPerCreate()
    sizes.add_writes("a", 0.0, 100 * MIB)
    sizes.add_creates("a", 0.0, MIN_CREATES - 1)
    assert sizes.bytes_per_create("a", 0.0) is None
    sizes.add_creates("a", 1.0, 1)
    assert sizes.bytes_per_create("a", 1.0) == pytest.approx(100 * MIB / MIN_CREATES)
    # past Lustre's job_cleanup_interval the job is forgotten
    assert sizes.bytes_per_create("a", 1.0 + WINDOW_S) is None
    assert len(sizes) == 0
    assert sizes.bytes_per_create("never", 0.0) is None


def test_jobs_kept_are_bounded():
    sizes = JobBytesPerCreate(max_jobs=3)
    for j in range(5):
        sizes.add_creates(f"j{j}", 0.0, 10)
    assert len(sizes) == 3
    assert sizes.bytes_per_create("j0", 0.0) is None


def test_size_from_job_stats_prices_an_unsized_create():
    store = StateStore()
    _oss(store, 5.0, {0: [_row("ckpt.1", write_bytes_per_s=8 * 256 * MIB / 5)]})
    _mds(store, 5.0, [_row("ckpt.1", creates_per_s=8 / 5)])
    snap = store.current(6.0)
    for on in (False, True):
        policy = build_policy("mcmf", {"mcmf": {"experimental": {"size_from_job_stats": on}}},
                              gate=False)
        assert isinstance(policy, McmfPolicy)
        policy.allocate_batch(snap, [CreateRequest("ckpt.1", 2, MIB)])
        assert policy.stats["sized_by_job_stats"] == (1 if on else 0)
        booked = sum(policy.predicted_load().values())
        assert booked == pytest.approx(256 * MIB if on else 2 * MIB, rel=0.05)
        # an announced size stays; a job job_stats knows nothing of stays unsized
        policy.allocate_batch(snap, [CreateRequest("ckpt.1", 2, MIB, expected_bytes=3 * MIB),
                                     CreateRequest("other.2", 2, MIB)])
        assert policy.stats["sized_by_job_stats"] == (1 if on else 0)
