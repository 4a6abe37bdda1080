"""Sweeps on Dask distributed: the same seeds give identical results whether
the runs go one after the other in this process or as tasks on a real LocalCluster; the
seeds change the runs, and the aggregate states its intervals."""
from __future__ import annotations

import pytest

from lustre_alloc.simulator.report import run_figures
from lustre_alloc.simulator.runner import run_seeds
from lustre_alloc.simulator.scenario import load_scenario
from lustre_alloc.simulator.seeds import aggregate, interval

pytestmark = pytest.mark.timeout(300)


def _rows(per_seed):
    return [run_figures(r) for r in per_seed]


def test_serial_and_local_cluster_sweeps_are_identical():
    sc = load_scenario("paper-32ost").with_overrides(policies=("round_robin", "random"),
                                                     duration_s=900)
    serial = run_seeds(sc, 2, jobs=1)
    progress = []
    dask = run_seeds(sc, 2, jobs=2, progress=lambda label, done, total: progress.append(label))
    assert _rows(serial) == _rows(dask)
    assert {"round_robin", "random#1"} <= set(progress)      # reports came back from workers
    # another seed is another run: the workload's jitter and the cluster's draws changed
    assert _rows(serial)[0] != _rows(serial)[1]


def test_interval_and_difference_from_round_robin():
    assert interval([1.0, 2.0, 3.0]) == {"n": 3, "mean": 2.0, "ci95": 2.4841}
    assert interval([5.0])["ci95"] is None and interval([])["mean"] is None
    rr = {"policy": "round_robin", "phase_io_time_s_mean": 10.0}
    per_seed = [[rr, {"policy": "x", "phase_io_time_s_mean": m}] for m in (12.0, 12.5, 11.5)]
    rows = {r["policy"]: r for r in aggregate([[dict(r) for r in s] for s in per_seed])}
    d = rows["x"]["phase_io_time_s_mean"]["vs_round_robin"]
    assert d["mean"] == 2.0 and d["includes_zero"] is False
    noisy = [[rr, {"policy": "x", "phase_io_time_s_mean": m}] for m in (8.0, 12.0, 10.5)]
    rows = {r["policy"]: r for r in aggregate(noisy)}
    assert rows["x"]["phase_io_time_s_mean"]["vs_round_robin"]["includes_zero"] is True
