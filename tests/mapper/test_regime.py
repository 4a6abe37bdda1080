"""Policy switching (lustre_alloc/mapper/policies/mcmf/regime.py) and the per-application prediction gate
(lustre_alloc/mapper/policies/mcmf/policy.py)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.state.arrays import OstArrays
from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.policies.round_robin import RoundRobin
from lustre_alloc.mapper.policies.mcmf.regime import FLOW, ROUND_ROBIN, RegimeThresholds, classify
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstState

MIB = 1 << 20
KB = 1 << 30            # 1 TiB OSTs, in KiB


def _arrays(rates, used, latency=None):
    n = len(rates)
    total = np.full(n, KB, dtype=np.int64)
    return OstArrays(
        index=np.arange(n), oss=np.arange(n) // 2, kbytes_total=total,
        kbytes_avail=(total * (1 - np.asarray(used))).astype(np.int64), pending_bytes=np.zeros(n),
        cpu_percent=np.zeros(n), mem_percent=np.zeros(n), lnet_load=np.zeros(n), queue=np.zeros(n),
        write_latency_s=np.full(n, np.nan) if latency is None else np.asarray(latency, float),
        rate_bytes_s=np.asarray(rates, float))


EVERY_TEST = RegimeThresholds(load_ratio=2.0, rate_ratio=1.25, qos_threshold_rr_pct=17,
                              used_band=0.05)
"""The load and space tests the rule had on by default before the measurements of docs/history.md."""


def test_uniform_load_and_even_space_is_round_robin():
    got = classify(_arrays([500e6] * 8, [0.40] * 8, [MIB / 500e6] * 8), RegimeThresholds())
    assert got.mode == ROUND_ROBIN and got.load_uniform and got.space_in_band


@pytest.mark.parametrize("rates, used, latency, why", [
    ([500e6] * 6 + [100e6] * 2, [0.4] * 8, None, "slow OSTs"),
    ([500e6] * 8, [0.4] * 8, [MIB / 500e6] * 6 + [8 * MIB / 500e6] * 2, "loaded OSTs"),
    ([500e6] * 8, [0.4] * 7 + [0.7], None, "free space outside qos_threshold_rr"),
    ([500e6] * 8, [0.010] * 7 + [0.013], None, "used max/mean over the band"),
])
def test_uneven_load_or_space_solves_the_flow(rates, used, latency, why):
    assert classify(_arrays(rates, used, latency), EVERY_TEST).mode == FLOW, why


def test_the_default_rule_answers_busy_or_unevenly_filled_alike_osts_with_round_robin():
    default = RegimeThresholds()
    loaded = _arrays([500e6] * 8, [0.4] * 8, [MIB / 500e6] * 6 + [8 * MIB / 500e6] * 2)
    assert classify(loaded, default).mode == ROUND_ROBIN      # a 5 s-old queue: RR's rotation
    assert classify(_arrays([500e6] * 8, [0.4] * 7 + [0.7]), default).mode == ROUND_ROBIN
    # persistent evidence: slower OSTs, or one within an RPC of the ENOSPC reserve
    assert classify(_arrays([500e6] * 6 + [100e6] * 2, [0.4] * 8), default).mode == FLOW
    near_full = _arrays([500e6] * 8, [0.4] * 7 + [1.0 - 1e-9])
    assert classify(near_full, default).mode == FLOW
    assert not classify(near_full, default).space_in_band


def test_one_log2_bucket_step_between_alike_osts_is_not_evidence():
    # OSTs of 291-348 MiB/s (scale-800-hetero) whose RPC times fall either side of the
    # 16 ms edge read at the bucket means 12 and 24 ms: rates 2x apart in one look.
    rpc_12ms, rpc_24ms = MIB / 0.012, MIB / 0.024
    straddle = [rpc_12ms] * 6 + [rpc_24ms] * 4
    used = [0.4] * 10
    assert classify(_arrays(straddle, used), RegimeThresholds()).mode == ROUND_ROBIN
    # Beyond one step (an OSS at 30%: 3.3x) it is.
    degraded = [rpc_12ms] * 6 + [rpc_12ms * 0.3] * 4
    assert classify(_arrays(degraded, used), RegimeThresholds()).mode == FLOW


def test_rate_band_sees_one_slow_ost_among_many():
    # One OST at half speed among 40 is below no percentile the ratios look at.
    rates = [500e6] * 39 + [250e6]
    used = [0.4] * 40
    assert classify(_arrays(rates, used), RegimeThresholds()).mode == ROUND_ROBIN
    banded = RegimeThresholds(rate_band=0.25)
    assert classify(_arrays(rates, used), banded).mode == FLOW
    assert classify(_arrays([500e6] * 39 + [400e6], used), banded).mode == ROUND_ROBIN


@pytest.mark.parametrize("rates, used, latency, off", [
    ([500e6] * 8, [0.4] * 8, [MIB / 500e6] * 6 + [8 * MIB / 500e6] * 2, {"load_ratio": None}),
    ([500e6] * 6 + [100e6] * 2, [0.4] * 8, None, {"rate_ratio": None, "load_ratio": None}),
    ([500e6] * 8, [0.4] * 7 + [0.7], None, {"qos_threshold_rr_pct": None, "used_band": None}),
])
def test_a_threshold_set_to_none_is_not_tested(rates, used, latency, off):
    osts = _arrays(rates, used, latency)
    assert classify(osts, EVERY_TEST).mode == FLOW
    for key in off if len(off) > 1 else ():     # the others still see it
        assert classify(osts, replace(EVERY_TEST, **{key: None})).mode == FLOW, key
    assert classify(osts, replace(EVERY_TEST, **off)).mode == ROUND_ROBIN


def test_thresholds_are_checked():
    with pytest.raises(ValueError, match="regime thresholds"):
        RegimeThresholds(load_ratio=0.5)
    with pytest.raises(ValueError, match="regime thresholds"):
        RegimeThresholds(rate_band=1.5)


def _snapshot(latency):
    osts = [OstState(i, f"oss{i // 2}", KB, KB // 2, KB // 2, write_latency_s=latency[i],
                     sample_time_s=0.0) for i in range(len(latency))]
    return ClusterSnapshot(osts=osts, osses={f"oss{s}": OssState(f"oss{s}") for s in range(4)})


def test_mcmf_switches_between_round_robin_and_the_flow():
    pol = McmfPolicy(cost_model="rate", predict_k=0, regime=True)
    req = CreateRequest(jobid="a", stripe_count=2, stripe_size=MIB, expected_bytes=64 * MIB)
    even = pol.allocate_batch(_snapshot([MIB / 500e6] * 8), [req])[0]
    assert even.note == "regime round_robin"
    # Two OSTs at a fifth of the others' rate: the flow, which leaves them out.
    slow = _snapshot([MIB / 500e6] * 6 + [5 * MIB / 500e6] * 2)
    pol = McmfPolicy(cost_model="rate", predict_k=0, regime=True)
    got = pol.allocate_batch(slow, [req])[0]
    assert got.note != "regime round_robin" and not set(got.osts) & {6, 7}


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(-1, 6), min_size=1, max_size=40), seed=st.integers(0, 99))
def test_with_alike_osts_the_default_mcmf_walks_lustres_rr_order(counts, seed):
    """The rule's property: equal estimated speeds give Lustre's RR order, list for list."""
    snap = _snapshot([MIB / 500e6] * 8)
    mcmf, rr = McmfPolicy(seed=seed), RoundRobin(seed=seed)
    for k in counts:
        req = CreateRequest(jobid="a", stripe_count=k, stripe_size=MIB, expected_bytes=8 * MIB)
        got = mcmf.allocate_batch(snap, [req])[0]
        assert got.note == "regime round_robin"
        assert got.osts == rr.allocate(snap, req).osts


def test_prediction_gate_follows_measured_accuracy_and_probes():
    pol = McmfPolicy(predict_min_accuracy=0.5, predict_min_trials=4, predict_window=8)
    assert pol.prediction_gate.may_predict("a")                     # no evidence yet: trusted
    for _ in range(4):
        pol.prediction_gate.score("a", False)
    for _ in range(4):
        pol.prediction_gate.score("b", True)
    assert pol.prediction_gate.may_predict("b")
    allowed = [pol.prediction_gate.may_predict("a") for _ in range(16)]
    assert allowed.count(True) == 2                  # a probe every 8th round
    assert McmfPolicy().prediction_gate.may_predict("a")            # threshold 0: always predict


def test_an_ost_served_by_its_failover_partner_sends_the_round_to_the_flow():
    alike = _arrays([500e6] * 8, [0.4] * 8)
    moved = classify(alike, RegimeThresholds(), failed_over=True)
    assert moved.mode == FLOW and moved.failed_over and not moved.load_uniform
    assert classify(alike, RegimeThresholds(failed_over=False), failed_over=True).mode == ROUND_ROBIN
    assert classify(alike, RegimeThresholds()).mode == ROUND_ROBIN
    with pytest.raises(ValueError):
        RegimeThresholds(failed_over=1.5)


def _publish(store, t: float, served: dict[str, range]) -> None:
    """Each OSS's collector sample (live field names) with the OSTs it serves now."""
    for host, osts in served.items():
        targets = {f"OST{i:04x}": {"kind": "ost", "index": i, "available": True,
                                   "values": {"kbytes_total": KB, "kbytes_free": KB // 2}}
                   for i in osts}
        store.apply("oss", host, t, 5.0, {"values": {"cpu_percent": 5.0}}, targets)


def test_the_store_marks_an_ost_its_partner_serves_and_the_default_leaves_rr():
    from lustre_alloc.mapper.state.state_store import StateStore
    store = StateStore()
    _publish(store, 5.0, {"oss0": range(0, 4), "oss1": range(4, 8)})
    policy = McmfPolicy()
    policy.allocate_batch(store.current(5.0), [CreateRequest("a", 2)])
    assert policy.stats["regime_rr_requests"] == 1
    _publish(store, 10.0, {"oss0": range(0, 8)})          # oss1 failed over to oss0
    snap = store.current(10.0)
    assert [o.failed_over for o in snap.osts] == [False] * 4 + [True] * 4
    policy.allocate_batch(snap, [CreateRequest("a", 2)])
    assert policy.stats["regime_rr_requests"] == 1         # the flow decided
    assert any(k.endswith("_failed_over") for k in policy.stats)
    _publish(store, 15.0, {"oss0": range(0, 4), "oss1": range(4, 8)})   # failback
    assert not any(o.failed_over for o in store.current(15.0).osts)


def test_failover_evidence_needs_the_partner_to_serve_more_osts_than_usual():
    from lustre_alloc.mapper.policies.mcmf.regime import failover_evidence

    def osts(servers, moved=()):
        return [OstState(index=i, oss=s, kbytes_total=KB, kbytes_free=KB // 2,
                         kbytes_avail=KB // 2, failed_over=i in moved)
                for i, s in enumerate(servers)]
    usual = ["oss0"] * 4 + ["oss1"] * 4 + ["oss2"] * 4
    assert not failover_evidence(osts(usual))
    assert failover_evidence(osts(["oss0"] * 8 + ["oss2"] * 4, moved=range(4, 8)),
                             ["oss0", "oss1", "oss2"])
    # one HA pair: the failed OSS serves none, its partner all
    assert failover_evidence(osts(["oss0"] * 8, moved=range(4, 8)), ["oss0", "oss1"])
    # an OST "moved" but every OSS serves its usual count: a wrong home (a mapper started
    # during a failover, after the failback) or a swap, not a loaded partner
    assert not failover_evidence(osts(usual, moved=range(4, 8)))


def test_a_mapper_started_during_a_failover_stays_with_rr_after_the_failback():
    from lustre_alloc.mapper.state.state_store import StateStore
    store = StateStore()
    _publish(store, 5.0, {"oss0": range(0, 8), "oss2": range(8, 12)})   # oss1 failed over
    policy = McmfPolicy()
    policy.allocate_batch(store.current(5.0), [CreateRequest("a", 2)])
    assert policy.stats["regime_rr_requests"] == 1        # the partner is taken as home
    _publish(store, 10.0, {"oss0": range(0, 4), "oss1": range(4, 8), "oss2": range(8, 12)})
    snap = store.current(10.0)
    assert [o.failed_over for o in snap.osts][4:8] == [True] * 4
    policy.allocate_batch(snap, [CreateRequest("a", 2)])
    assert policy.stats["regime_rr_requests"] == 2        # failback: RR, no false evidence


def _looks(tracker, t, latency_s):
    """One look of the tracker at OSTs with the given brw_stats RPC times (1 in flight)."""
    osts = [OstState(i, f"oss{i // 2}", KB, KB // 2, KB // 2, write_latency_s=lat,
                     sample_time_s=t) for i, lat in enumerate(latency_s)]
    tracker.update(osts)


def test_a_look_beyond_the_bucket_noise_flags_the_ost_before_its_estimate_falls():
    from lustre_alloc.mapper.speed.rates import OstRateTracker
    tracker = OstRateTracker(smoothing=0.3)
    fast = MIB / 700e6
    _looks(tracker, 0.0, [fast] * 8)
    _looks(tracker, 5.0, [fast] * 7 + [49 * fast])      # OST 7 at 1/49 (straggler-ost)
    rates = tracker.rates(range(8))
    assert rates[7] > rates[0] / 3                      # smoothed: not a straggler yet
    assert tracker.slow_looks(range(8), 3.0) == [7]
    _looks(tracker, 10.0, [fast] * 6 + [2 * fast, fast])   # a bucket step: not evidence
    assert tracker.slow_looks(range(8), 3.0) == []
    assert tracker.slow_looks(range(3), 3.0) == []      # fewer than MIN_PEERS: no median
    with pytest.raises(ValueError, match="slow-look factor"):
        tracker.slow_looks(range(8), 1.0)


def test_an_ost_slow_by_its_estimate_and_its_latest_look_is_evidence_beyond_one_step():
    from lustre_alloc.mapper.speed.rates import OstRateTracker
    tracker = OstRateTracker(smoothing=0.3)
    fast = MIB / 700e6
    osts = range(40)
    _looks(tracker, 0.0, [fast] * 39 + [2.9 * fast])    # the 49x OST as pfl's look read it
    assert tracker.slow_in_both(osts, 2.0) == [39]
    assert tracker.slow_looks(osts, 3.0) == []          # below the slow look's 3x
    assert tracker.slow_in_both(osts, 3.0) == []
    # Its next look reads within one bucket step: the estimate rises at once, no evidence.
    _looks(tracker, 5.0, [fast] * 39 + [1.5 * fast])
    assert tracker.slow_in_both(osts, 2.0) == []
    # Its estimate low from bytes-only looks, its latest look within a step (scale-3600):
    # the two disagree, no evidence.
    tracker.rate[39] = 700e6 / 2.06
    assert tracker.slow_in_both(osts, 2.0) == []
    assert tracker.slow_in_both(range(3), 2.0) == []    # fewer than MIN_PEERS
    with pytest.raises(ValueError, match="slow-look factor"):
        tracker.slow_in_both(osts, 1.0)


def test_most_osts_slow_in_one_look_is_load_not_evidence():
    """Behind more than 31 queued RPCs brw_stats' "disk I/Os in flight" stops counting
    (its last bucket), so every saturated OST reads slow in the same look
    (expansion-25pct: 24 of 30 OSTs 4.9x below the median estimate). A look is slow only
    against its peers' latest looks too; one OST slow among them still is."""
    from lustre_alloc.mapper.speed.rates import OstRateTracker
    tracker = OstRateTracker(smoothing=0.3)
    fast = MIB / 500e6
    osts = range(30)
    _looks(tracker, 0.0, [fast] * 30)
    _looks(tracker, 5.0, [5 * fast] * 24 + [fast] * 6)      # the 24 old OSTs saturated
    rates = tracker.rates(osts)
    assert (rates[:24] * 3 < np.median(rates)).sum() == 0    # smoothed: 380 MB/s each
    assert tracker.slow_looks(osts, 3.0) == []
    assert tracker.slow_evidence(osts, 3.0, 2.0) == (False, False)
    _looks(tracker, 10.0, [fast] * 29 + [5 * fast])          # one OST slow among its peers
    assert tracker.slow_looks(osts, 3.0) == [29]
    # the round's one pass agrees with both tests; an untested factor finds nothing
    assert tracker.slow_evidence(osts, 3.0, 2.0) == (True, bool(tracker.slow_in_both(osts, 2.0)))
    assert tracker.slow_evidence(osts, None, None) == (False, False)
    with pytest.raises(ValueError, match="slow-look factor"):
        tracker.slow_evidence(osts, 1.0, None)


def test_a_slow_ost_sends_the_round_to_the_flow_unless_turned_off():
    alike = _arrays([500e6] * 8, [0.4] * 8)
    assert RegimeThresholds().slowest_ratio == 2.0
    got = classify(alike, RegimeThresholds(), slow_ost=True)
    assert got.mode == FLOW and got.slow_ost and not got.load_uniform
    off = RegimeThresholds(slowest_ratio=None)
    assert classify(alike, off, slow_ost=True).mode == ROUND_ROBIN
    with pytest.raises(ValueError, match="regime thresholds"):
        RegimeThresholds(slowest_ratio=1.0)


def test_a_slow_look_sends_the_round_to_the_flow_unless_turned_off():
    alike = _arrays([500e6] * 8, [0.4] * 8)
    got = classify(alike, RegimeThresholds(), slow_look=True)
    assert got.mode == FLOW and got.slow_look and not got.load_uniform
    assert classify(alike, RegimeThresholds(look_factor=None), slow_look=True).mode == ROUND_ROBIN
    with pytest.raises(ValueError, match="regime thresholds"):
        RegimeThresholds(look_factor=1.0)


def test_mcmf_leaves_lustres_rr_at_the_first_look_that_shows_a_straggler():
    """The policy end to end: after a look at eight alike OSTs, one look with OST 7 at 1/49
    of their rate sends the round to the flow, which gives OST 7 no more than its share."""
    pol = McmfPolicy()
    req = [CreateRequest(jobid=f"j{k}", stripe_count=4, stripe_size=MIB,
                         expected_bytes=256 * MIB) for k in range(8)]
    fast = MIB / 700e6
    def snap(t, lat):
        osts = [OstState(i, f"oss{i // 2}", KB, KB // 2, KB // 2, write_latency_s=lat[i],
                         sample_time_s=t) for i in range(8)]
        return ClusterSnapshot(osts=osts, osses={f"oss{s}": OssState(f"oss{s}") for s in range(4)})
    first = pol.allocate_batch(snap(0.0, [fast] * 8), req)
    assert all(p.note == "regime round_robin" for p in first)
    got = pol.allocate_batch(snap(5.0, [fast] * 7 + [49 * fast]), req)
    assert not any(p.note == "regime round_robin" for p in got)
    assert sum(7 in p.osts for p in got) < sum(7 in p.osts for p in first)
    assert any("slow_look" in k for k in pol.stats)


def test_mcmf_leaves_lustres_rr_for_an_ost_slow_by_more_than_a_step_below_the_slow_look():
    """End to end: 40 alike OSTs, one reading 2.9x slower from its first look (below the
    straggler and slow-look factor of 3, as straggler-ost-pfl's 49x OST read): the round
    goes to the flow, which gives that OST less than its turn; with the test off RR deals
    it its turn."""
    req = [CreateRequest(jobid=f"j{k}", stripe_count=4, stripe_size=MIB,
                         expected_bytes=256 * MIB) for k in range(20)]
    fast = MIB / 700e6
    lat = [fast] * 39 + [2.9 * fast]
    osts = [OstState(i, f"oss{i // 4}", KB, KB // 2, KB // 2, write_latency_s=lat[i],
                     sample_time_s=0.0) for i in range(40)]
    snap = ClusterSnapshot(osts=osts, osses={f"oss{s}": OssState(f"oss{s}") for s in range(10)})
    on = McmfPolicy().allocate_batch(snap, req)
    assert not any(p.note == "regime round_robin" for p in on)
    off = McmfPolicy(regime_params={"slowest_ratio": None}).allocate_batch(snap, req)
    assert all(p.note == "regime round_robin" for p in off)
    assert sum(39 in p.osts for p in off) == 2          # 80 stripes over 40 OSTs
    assert sum(39 in p.osts for p in on) < 2


def test_alike_osts_are_left_to_lustres_allocator_a_slow_one_is_not():
    """``leaves_to_lustre`` (what the lease desk asks): alike OSTs, the round-robin regime,
    Lustre's own allocator may place the class; OSTs at a fifth of the others' rate, the
    flow's, not Lustre's; with ``alike_to_lustre`` or ``regime`` off, never."""
    req = CreateRequest(jobid="a", stripe_count=2, stripe_size=MIB, expected_bytes=64 * MIB)
    even = _snapshot([MIB / 500e6] * 8)
    slow = _snapshot([MIB / 500e6] * 6 + [5 * MIB / 500e6] * 2)
    assert McmfPolicy().leaves_to_lustre(even, req) == "regime round_robin"
    assert McmfPolicy().leaves_to_lustre(slow, req) == ""
    assert McmfPolicy(alike_to_lustre=False).leaves_to_lustre(even, req) == ""
    assert McmfPolicy(regime=False).leaves_to_lustre(even, req) == ""


def test_the_gate_leaves_to_lustre_only_where_lod_would_place_round_robin():
    """Where free space is uneven beyond ``qos_threshold_rr`` LOD weighs by it (QOS) and
    would pile new files on the emptiest OST; the regime's round-robin does not, so the
    gate keeps those creates (lod_qos.c ``lod_qos_calc_ppo``, LQ_SAME_SPACE)."""
    from lustre_alloc.mapper.policies.gate import GatedPolicy
    from lustre_alloc.mapper.policies.lustre_qos import LustreQos
    req = CreateRequest(jobid="a", stripe_count=1, stripe_size=MIB)
    even = _snapshot([MIB / 500e6] * 8)
    uneven = _snapshot([MIB / 500e6] * 8)
    uneven.osts[3] = replace(uneven.osts[3], kbytes_avail=KB // 4)    # 1/2 of the others'
    gate = GatedPolicy(McmfPolicy(), LustreQos())
    assert gate.leaves_to_lustre(even, req) == "regime round_robin"
    assert gate.leaves_to_lustre(uneven, req) == ""
    # an admin's qos_threshold_rr of 60% makes that space even enough for LOD's rotation
    assert GatedPolicy(McmfPolicy(), LustreQos(qos_threshold_rr_pct=60)).leaves_to_lustre(
        uneven, req) == "regime round_robin"
