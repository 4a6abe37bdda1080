"""job_stats in the simulator: per OST and job id, cumulative byte counters that
the collectors' own reduction (:func:`lustre_alloc.collectors.collector.reduce_jobs`) turns into the
sample's ``jobs`` rows, as live; the live emulator's job_stats file, parsed by the
collector's parser, holds the same counters for the same traffic."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lustre_alloc.collectors.collector import reduce_jobs
from lustre_alloc.collectors.readers.job_stats import JobStats, parse_job_stats
from lustre_alloc.livestack.emulator import EmulatedCluster
from lustre_alloc.simulator.cluster import MIB, SimCluster
from lustre_alloc.simulator.inflight import SimTransfer
from lustre_alloc.simulator.job_readings import JOB_CLEANUP_INTERVAL_S, JobReadings
from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy
from lustre_alloc.simulator.scenario import load_scenario

from .conftest import rec, small


def _transfer(job: str, osts: list[int], per_ost_mib: list[float], write: bool = True) -> SimTransfer:
    per = np.array(per_ost_mib) * MIB
    return SimTransfer(write=write, job=job, file=None, osts=np.array(osts), per_ost=per,
                       nbytes=float(per.sum()), remaining=float(per.sum()), ops=1, start_s=0.0)


def _bytes(tables: dict[int, JobStats], p: int, job: str, name: str = "write_bytes") -> int:
    return tables[p].jobs[job].counters[name].sum


def test_bytes_count_as_they_move_and_never_go_back_when_a_transfer_settles():
    jr = JobReadings()
    tr = _transfer("ior.1", [0, 1], [6, 4])
    half = jr.job_stats(1.0, [(tr, tr.nbytes / 2)])
    assert _bytes(half, 0, "ior.1") == 3 * MIB and _bytes(half, 1, "ior.1") == 2 * MIB
    jr.settle(tr, 1.0)                                   # finished: left the book
    done = jr.job_stats(2.0, [])
    assert _bytes(done, 0, "ior.1") == 6 * MIB and _bytes(done, 1, "ior.1") == 4 * MIB
    c = done[0].jobs["ior.1"].counters["write_bytes"]
    assert c.samples == 6 and c.max == MIB                # 1 MiB RPCs
    rd = _transfer("ior.1", [1], [3], write=False)        # a read: its own counter
    jr.settle(rd, 0.5)                                    # cancelled half way
    t = jr.job_stats(3.0, [])
    assert _bytes(t, 1, "ior.1", "read_bytes") == 1.5 * MIB and _bytes(t, 1, "ior.1") == 4 * MIB
    assert 2 not in t                                     # no job ever touched OST 2


def test_an_idle_job_leaves_the_table_after_the_cleanup_interval_and_restarts_at_zero():
    jr = JobReadings()
    jr.settle(_transfer("a", [0], [8]), 1.0)
    assert "a" in jr.job_stats(10.0, [])[0].jobs
    assert "a" in jr.job_stats(10.0 + JOB_CLEANUP_INTERVAL_S - 1, [])[0].jobs
    assert 0 not in jr.job_stats(10.0 + JOB_CLEANUP_INTERVAL_S, [])     # dropped
    jr.settle(_transfer("a", [0], [2]), 1.0)                            # back: from zero
    assert _bytes(jr.job_stats(700.0, []), 0, "a") == 2 * MIB


def test_rows_are_the_collectors_reduction():
    jr = JobReadings()
    prev = jr.job_stats(0.0, [])
    jr.settle(_transfer("big", [0], [10]), 1.0)
    jr.settle(_transfer("small", [0], [2], write=False), 1.0)
    values, unavailable = {}, {}
    rows = reduce_jobs(prev.get(0, JobStats()), jr.job_stats(5.0, [])[0], 5.0, values, unavailable)
    assert [r["job_id"] for r in rows] == ["big", "small"] and values["jobs_active"] == 2
    assert rows[0]["write_bytes_per_s"] == 2 * MIB and rows[1]["read_bytes_per_s"] == 0.4 * MIB
    assert rows[0]["ops_per_s"] == 2.0                    # 10 RPCs in 5 s


def test_live_emulator_job_stats_hold_the_same_counters(tmp_path):
    cl = SimCluster(oss_names=["oss0"], ost_index=np.arange(2), ost_oss=np.array([0, 0]),
                    capacity_bytes=np.full(2, float(1 << 40)), used_bytes=np.zeros(2),
                    bandwidth_bytes_s=np.full(2, 400.0 * MIB))
    emu = EmulatedCluster(cl, tmp_path)
    for f in ("a", "b"):
        emu.charge([0], MIB, 0, 4 * MIB, "ior.1", f)
    emu.charge([1], MIB, 0, 2 * MIB, "vpic.2", "c")
    emu.flush()
    live = {}
    for p in (0, 1):
        (path,) = Path(emu.oss_root("oss0")).rglob(f"obdfilter/*-OST000{p}/job_stats")
        live[p] = parse_job_stats(path.read_text(), str(path))
    jr = JobReadings()
    for tr in (_transfer("ior.1", [0], [4]), _transfer("ior.1", [0], [4]),
               _transfer("vpic.2", [1], [2])):
        jr.settle(tr, 1.0)
    sim = jr.job_stats(5.0, [])
    for p, job in ((0, "ior.1"), (1, "vpic.2")):
        assert set(live[p].jobs) == set(sim[p].jobs) == {job}
        for name in ("read_bytes", "write_bytes"):
            a, b = live[p].jobs[job].counters[name], sim[p].jobs[job].counters[name]
            assert (a.samples, a.sum or 0) == (b.samples, b.sum or 0), (p, name)


def test_a_runs_samples_publish_every_byte_of_each_job(make_scenario):
    """Through the engine: summed over the samples, each job's published write rate times
    the interval is the bytes it wrote, split over the OSTs it wrote to."""
    recs = [rec(1 + i, "write", "ior.1", f"f{i}", 64 << 20, sc=2) for i in range(4)]
    recs += [rec(3 + i, "write", "vpic.2", f"g{i}", 32 << 20, sc=1) for i in range(2)]
    recs.append(rec(100, "write", "late.3", "h", 1 << 20))      # a create after all is done
    recs.sort(key=lambda r: r.timestamp_s)
    sc = load_scenario(make_scenario(small(duration=200), recs))
    sim = build_simulation(sc, prepare(sc), scenario_policy(sc, "round_robin"))
    seen: dict[str, float] = {}
    refresh = sim.mds.refresh_stats

    def spy(now, *args, **kw):
        dt = now - sim.mds.last_stats_s if np.isfinite(sim.mds.last_stats_s) else now
        refresh(now, *args, **kw)
        for rows in sim.mds.last_jobs.values():
            for r in rows:
                seen[r["job_id"]] = seen.get(r["job_id"], 0.0) + r["write_bytes_per_s"] * dt
    sim.mds.refresh_stats = spy
    sim.run()
    assert seen["ior.1"] == pytest.approx(4 * 64 * MIB, rel=1e-6)
    assert seen["vpic.2"] == pytest.approx(2 * 32 * MIB, rel=1e-6)


def test_the_mdt_job_stats_count_creates_and_the_store_learns_bytes_per_create(make_scenario):
    """The engine counts each create in the MDT's job_stats; the MDS collector's rows,
    reduced by the collectors' code, reach the mapper's store, which divides each job's
    bytes written on the OSTs by its files created."""
    recs = [rec(1 + i, "write", "ior.1", f"f{i}", 64 << 20, sc=2) for i in range(8)]
    recs += [rec(2 + i, "write", "vpic.2", f"g{i}", 4 << 20, sc=1) for i in range(6)]
    recs.sort(key=lambda r: r.timestamp_s)
    sc = load_scenario(make_scenario(small(duration=60), recs))
    sim = build_simulation(sc, prepare(sc), scenario_policy(sc, "round_robin"))
    sim.run()
    table = sim.mds.mdt_job_readings.job_stats(30.0)
    assert table.jobs["ior.1"].counters["mknod"].samples == 8
    assert table.jobs["vpic.2"].counters["mknod"].samples == 6
    sizes = sim.mds.view.job_sizes
    assert sizes is sim.mds.store.job_sizes
    assert sizes.bytes_per_create("ior.1", 30.0) == pytest.approx(64 << 20, rel=1e-6)
    assert sizes.bytes_per_create("vpic.2", 30.0) == pytest.approx(4 << 20, rel=1e-6)


def test_an_idle_job_leaves_the_mdt_table():
    from lustre_alloc.simulator.job_readings import MdtJobReadings
    mdt = MdtJobReadings()
    mdt.created("a", 1.0)
    assert mdt.job_stats(1.0 + JOB_CLEANUP_INTERVAL_S - 1).jobs["a"].counters["open"].samples == 1
    assert "a" not in mdt.job_stats(1.0 + JOB_CLEANUP_INTERVAL_S).jobs
