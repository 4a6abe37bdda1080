"""The perfect-information reference: it reads the simulator's truth, avoids
what is slow or busy now, never loses to round-robin by more than noise in a uniform world,
and the mapper service refuses to load it."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.policies.registry import UnknownPolicyError, build_policy
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster
from lustre_alloc.simulator.oracle import Oracle
from lustre_alloc.simulator.report import headroom_captured
from lustre_alloc.simulator.runner import prepare, run_scenario
from lustre_alloc.simulator.scenario import load_scenario

MIB = 1 << 20


class FakeTruth:
    """Four OSTs: 0 slow now, 1 busy with a long transfer, 2 and 3 idle and fast."""

    def position(self, index: int) -> int:
        return index

    def bandwidth_bytes_s(self) -> np.ndarray:
        return np.array([50.0, 500.0, 500.0, 500.0]) * MIB

    def remaining_on(self) -> list[list[float]]:
        return [[], [10_000.0 * MIB], [], []]


def test_the_oracle_places_where_a_stripe_finishes_first():
    oracle = Oracle()
    oracle.attach(FakeTruth())
    snap = make_uniform_cluster(2, 2, 1 << 30, {})
    got = oracle.allocate(snap, CreateRequest("ior.1", 2, expected_bytes=64 * MIB))
    assert sorted(got.osts) == [2, 3] and got.policy == "oracle"
    # a small stripe: the busy OST shares its bandwidth for that long only; the slow one
    # still loses (64 KiB at 1/2 of 500 MiB/s beats 64 KiB at 50 MiB/s)
    three = oracle.allocate(snap, CreateRequest("ior.1", 3, expected_bytes=3 * 64 * 1024))
    assert sorted(three.osts) == [1, 2, 3]


def test_the_oracle_needs_the_simulation():
    with pytest.raises(RuntimeError, match="truth"):
        Oracle().allocate(make_uniform_cluster(1, 2, 1 << 30, {}), CreateRequest("j", 1))


def test_headroom_captured():
    assert headroom_captured(100.0, 90.0, 80.0) == 0.5
    assert headroom_captured(100.0, 110.0, 80.0) == -0.5
    assert headroom_captured(100.0, 90.0, 99.0) is None         # oracle gains < 2%
    assert headroom_captured(None, 90.0, 80.0) is None


def test_the_oracle_never_loses_to_round_robin_in_a_uniform_world():
    sc = load_scenario("paper-32ost").with_overrides(policies=("round_robin", "oracle"),
                                                     duration_s=3 * 3600)
    runs = {r.policy: r for r in run_scenario(sc, jobs=1)}
    from lustre_alloc.simulator.report import user_metrics
    rr, orc = user_metrics(runs["round_robin"]), user_metrics(runs["oracle"])
    assert orc["jobs_unfinished"] == 0
    # strictly more information: never worse than RR by more than noise (1%)
    assert orc["phase_io_time_s_mean"] <= rr["phase_io_time_s_mean"] * 1.01
    assert orc["phase_io_time_s_p99"] <= rr["phase_io_time_s_p99"] * 1.01
    assert prepare(sc).ost_count == 32


def test_the_mapper_refuses_the_oracle():
    with pytest.raises(UnknownPolicyError, match="simulation-only reference"):
        build_policy("oracle")
    done = subprocess.run([sys.executable, "-m", "lustre_alloc.mapper.service.cli", "--policy", "oracle",
                           "--static-cluster", "2x2", "--bind", "tcp://127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "simulation-only reference" in done.stderr and "Traceback" not in done.stderr
