"""Capability-weighted interleaving (measured, not the default): Lustre's
round-robin order when the speeds look alike, shares in proportion to speed otherwise, a
straggler kept to its exploration share; speed estimates relax toward the others' when an
OST shows no evidence."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.policies.mcmf.interleave import CapabilityInterleave
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.policies.round_robin import RoundRobin
from lustre_alloc.mapper.state.cluster_state import OstState, make_uniform_cluster

MIB = 1 << 20


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), counts=st.lists(st.integers(1, 4), min_size=1, max_size=40),
       noise=st.floats(0.0, 0.2))
def test_equal_speeds_walk_lustres_round_robin(seed, counts, noise):
    snap = make_uniform_cluster(4, 3, 1 << 30, {})
    speed = {o.index: 500.0 * MIB * (1 + noise * (-1) ** o.index) for o in snap.osts}
    ilv, rr = CapabilityInterleave(seed=seed), RoundRobin(seed=seed)
    for n in counts:
        req = CreateRequest("ior.1", n)
        assert ilv.pick(snap, req, speed) == rr.pick(snap, req)
    assert ilv.stats["weighted"] == 0


def test_a_straggler_gets_at_most_its_exploration_share():
    snap = make_uniform_cluster(4, 3, 1 << 30, {})
    speed = {o.index: 500.0 * MIB for o in snap.osts}
    speed[5] = 10.0 * MIB                                 # 50x slow
    ilv = CapabilityInterleave(seed=1, explore_share=0.01)
    creates = 2000
    on_slow = sum(5 in ilv.pick(snap, CreateRequest("ior.1", 1), speed) for _ in range(creates))
    assert 0 < on_slow <= math.ceil(creates * 0.01)
    assert ilv.stats["explored"] == on_slow


def test_shares_follow_speed():
    snap = make_uniform_cluster(3, 2, 1 << 30, {})
    speed = {o.index: 600.0 * MIB for o in snap.osts}
    speed[0] = 300.0 * MIB                                # half speed: half the stripes
    ilv = CapabilityInterleave(seed=1)
    got = [i for _ in range(1100) for i in ilv.pick(snap, CreateRequest("ior.1", 1), speed)]
    share = {i: got.count(i) for i in speed}
    others = [share[i] for i in speed if i != 0]
    assert abs(share[0] / (sum(others) / len(others)) - 0.5) < 0.02


def test_speed_estimates_relax_toward_the_others_without_evidence():
    tracker = OstRateTracker(smoothing=1.0, relax_s=100.0)

    def ost(i, t, rate):
        return OstState(index=i, oss="oss0", kbytes_total=1, kbytes_free=1, kbytes_avail=1,
                        write_bytes_per_s=rate, sample_time_s=t)
    tracker.update([ost(0, 0.0, 10.0 * MIB), ost(1, 0.0, 500.0 * MIB), ost(2, 0.0, 500.0 * MIB)])
    assert tracker.rate[0] == 10.0 * MIB
    tracker.update([ost(0, 100.0, None), ost(1, 100.0, 500.0 * MIB), ost(2, 100.0, 500.0 * MIB)])
    median = 500.0 * MIB
    assert tracker.rate[0] == median + (10.0 * MIB - median) * math.exp(-1.0)
    no_relax = OstRateTracker(smoothing=1.0)              # relax_s 0: kept as it was
    no_relax.update([ost(0, 0.0, 10.0 * MIB), ost(1, 0.0, 500.0 * MIB)])
    no_relax.update([ost(0, 100.0, None), ost(1, 100.0, 500.0 * MIB)])
    assert no_relax.rate[0] == 10.0 * MIB


def test_the_mcmf_policy_places_by_interleave_when_asked():
    from lustre_alloc.mapper.policies.mcmf import McmfPolicy
    snap = make_uniform_cluster(2, 2, 1 << 30, {})
    got = McmfPolicy(seed=3, placement="interleave", plan_ahead=False).allocate(
        snap, CreateRequest("ior.1", 2))
    assert got.note == "interleave" and got.osts == tuple(RoundRobin(seed=3).pick(
        snap, CreateRequest("ior.1", 2)))
