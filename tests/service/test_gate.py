"""GatedPolicy: the primary decides only while MDS CPU < limit, state is fresh and rounds
fit the budget; solver errors and whole-batch refusals never fail a create."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.state.cluster_state import OstFlag, make_uniform_cluster
from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.state.ost_health import stale_servers
from lustre_alloc.mapper.state.ost_health import check_placement
from lustre_alloc.mapper.policies.placement import (AllocationError, CreateRequest, InvalidRequestError, Placement,
                                       PlacementCheckError)
from lustre_alloc.mapper.policies.registry import make_policy
from lustre_alloc.mapper.service.fs_context import PlacementGuard
from lustre_alloc.mapper.state.state_store import StateStore


def fresh_cluster(now=100.0):
    snap = make_uniform_cluster(2, 2, 1 << 30)
    snap.time_s = now
    for o in snap.osts:
        o.sample_time_s = now
    for s in snap.osses.values():
        s.sample_time_s = now
    return snap


def gated(primary="round_robin", **kw):
    return GatedPolicy(make_policy(primary), make_policy("lustre_qos"), **kw)


REQ = CreateRequest("j", 2)


def test_mds_cpu_at_or_above_limit_uses_the_fallback():
    g, snap = gated(), fresh_cluster()
    snap.mds_cpu_percent = 69.9
    assert g.allocate(snap, REQ).fallback == ""
    snap.mds_cpu_percent = 70.0
    p = g.allocate(snap, REQ)
    assert (p.policy, p.fallback) == ("lustre_qos", "mds_cpu") and g.fallbacks["mds_cpu"] == 1


def test_stale_sample_uses_the_fallback_and_names_the_server():
    g, snap = gated(max_sample_age_s=10.0), fresh_cluster()
    assert g.allocate(snap, REQ).fallback == ""
    snap.osses["oss1"].sample_time_s = 89.0
    assert g.allocate(snap, REQ).fallback == "stale" and g.last_stale == ["oss1"]
    snap.osts[2].active = snap.osts[3].active = False   # stale OSS serves no usable OST
    assert g.allocate(snap, REQ).fallback == ""


def test_store_stale_servers_agrees_with_the_gate_function_and_is_cached():
    store = StateStore()
    for host, first in (("a", 0), ("b", 2)):
        targets = {f"T{i}": {"kind": "ost", "index": i, "available": True,
                             "values": {"kbytes_total": 1 << 30, "kbytes_free": 1 << 29}}
                   for i in (first, first + 1)}
        store.apply("oss", host, 100.0 if host == "a" else 104.0, 5.0, {"values": {}}, targets)
    for now in (105.0, 110.0, 110.5, 114.0, 114.5):
        snap = store.current(now)
        assert store.stale_servers(snap, 10.0) == stale_servers(snap, 10.0)
    assert store.stale_servers(store.current(112.0), 10.0) == ["a"]


def test_slow_primary_rests_by_time_then_gets_one_trial_round():
    now = [0.0]

    class Slow:
        name = "slow"
        delay = 0.004

        def allocate(self, snapshot, request):
            now[0] += self.delay                    # takes `delay` seconds on the clock
            return Placement((0,), self.name)

    slow = Slow()
    g = GatedPolicy(slow, make_policy("lustre_qos"), round_budget_s=0.0005,
                    budget_rest_s=1.0, clock=lambda: now[0])
    snap = fresh_cluster()
    decide = lambda: g.allocate(snap, CreateRequest("j", 1)).fallback  # noqa: E731
    assert decide() == ""                          # 4 ms: the estimate jumps over budget
    assert [decide() for _ in range(20)] == ["budget"] * 20   # resting: no slow rounds
    now[0] = 1.01
    assert decide() == ""                          # trial round, still slow
    now[0] = 2.5
    assert decide() == "budget"                    # the rest doubled to 2 s
    now[0] = 3.03
    slow.delay = 0.0
    assert decide() == ""                          # trial is fast: measured afresh
    assert [decide() for _ in range(5)] == [""] * 5
    assert g.fallbacks["budget"] == 21


def test_whole_batch_refusal_is_decided_request_by_request():
    class Picky:
        name = "picky"

        def allocate(self, snapshot, request):
            if request.stripe_count > 3:
                raise InvalidRequestError("too wide")
            return Placement((1,), self.name)

        def allocate_batch(self, snapshot, requests):
            return [self.allocate(snapshot, r) for r in requests]   # raises for all
    g = GatedPolicy(Picky(), make_policy("lustre_qos"))
    out = g.allocate_batch(fresh_cluster(), [CreateRequest("a", 1), CreateRequest("b", 4)])
    assert isinstance(out[0], Placement) and out[0].fallback == ""
    assert isinstance(out[1], AllocationError) and out[1].errno == 22


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 9), max_size=6), st.sets(st.integers(0, 7)),
       st.sampled_from([None, "p"]), st.lists(st.sampled_from(
           [OstFlag.NONE, OstFlag.ENOSPC, OstFlag.READONLY, OstFlag.DEGRADED, OstFlag.NOPRECREATE]),
           min_size=8, max_size=8))
def test_guard_agrees_with_check_placement(osts, inactive, pool, flags):
    snap = make_uniform_cluster(4, 2, 1 << 30)
    snap.pools = {"p": frozenset({1, 2, 5, 6})}
    for o, f in zip(snap.osts, flags):
        o.flags = f
        o.active = o.index not in inactive
    try:
        check_placement(snap, osts, pool)
        expected = osts != []
    except PlacementCheckError:
        expected = False
    assert (PlacementGuard().violation(snap, 1, osts, pool) is None) == expected
