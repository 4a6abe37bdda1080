"""The OST rate memory survives a restart (lustre_alloc/mapper/speed/rate_memory.py): saved with the
predictor, restored by the policy, malformed entries skipped and counted."""
from __future__ import annotations

import json
import math

import pytest

from lustre_alloc.mapper.speed.rate_memory import (OST_RATES_KEY, RateMemoryError, export_rate_memory,
                                     restore_rate_memory)
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstState

MIB = 1 << 20
KB = 1 << 30            # 1 TiB OSTs, in KiB
SLOW = 3                # a fail-slow drive: 1/49.475 of the others' rate (straggler-ost's)


def _snapshot(t: float, timed: bool, n: int = 8) -> ClusterSnapshot:
    """OSTs at 500 MB/s, OST SLOW 49x slower, sampled at ``t``; ``timed``: with brw_stats
    RPC times (busy), else idle (no RPC ran: no evidence)."""
    osts = []
    for i in range(n):
        lat = (MIB / 500e6) * (49.475 if i == SLOW else 1.0) if timed else None
        osts.append(OstState(i, f"oss{i // 2}", KB, KB // 2, KB // 2, write_latency_s=lat,
                             sample_time_s=t))
    osses = {f"oss{s}": OssState(f"oss{s}", lnet_load=50.0) for s in range(n // 2)}
    return ClusterSnapshot(osts=osts, osses=osses)


def _learned_tracker() -> OstRateTracker:
    tr = OstRateTracker()
    for k in range(6):
        snap = _snapshot(5.0 * (k + 1), timed=True)
        tr.update(snap.osts)
    tr.oss_limit["oss0"] = 2.2e9
    return tr


def test_the_memory_round_trips_through_json():
    tr = _learned_tracker()
    back = OstRateTracker()
    doc = json.loads(json.dumps(export_rate_memory(tr)))
    assert restore_rate_memory(back, doc) == 0
    idx = list(range(8))
    assert back.rates(idx).tolist() == pytest.approx(tr.rates(idx).tolist())
    assert back.latencies(idx).tolist() == pytest.approx(tr.latencies(idx).tolist())
    assert back.last_look == pytest.approx(tr.last_look)
    assert back.oss_limit == {"oss0": 2.2e9}
    # what the round reads from it: the slow OST is slow by its estimate and its look
    assert back.slow_in_both(idx, 3.0) == [SLOW] == tr.slow_in_both(idx, 3.0)


def test_malformed_entries_are_skipped_and_counted():
    tr = OstRateTracker()
    doc = {"version": 1,
           "rate_bytes_s": {"0": 5e8, "1": -1.0, "x": 5e8, "-2": 5e8, "02": 5e8,
                            "3": True, "4": math.inf, "5": "fast"},
           "rpc_time_s": [0.002], "oss_limit_bytes_s": {"oss1": 0, "oss2": 1e9, "": 1e9}}
    assert restore_rate_memory(tr, doc) == 10
    assert tr.rate == {0: 5e8} and tr.latency == {} and tr.oss_limit == {"oss2": 1e9}
    assert restore_rate_memory(tr, None) == 0          # a file saved before the key existed


@pytest.mark.parametrize("doc, message", [
    ([1, 2], "ost_rates: not an object"),
    ({"version": 2, "rate_bytes_s": {}}, "ost_rates: version 2, this build reads version 1"),
])
def test_a_document_that_is_not_the_memory_is_refused_by_name(doc, message):
    with pytest.raises(RateMemoryError, match=message):
        restore_rate_memory(OstRateTracker(), doc)


def _lists(policy: McmfPolicy, snapshot: ClusterSnapshot, n: int = 8) -> set[int]:
    """OSTs of ``n`` two-stripe files placed by ``policy`` on ``snapshot``."""
    req = CreateRequest(jobid="ckpt", stripe_count=2, stripe_size=MIB, expected_bytes=64 * MIB)
    got = set()
    for _ in range(n):
        got.update(policy.allocate_batch(snapshot, [req])[0].osts)
    return got


def test_a_restarted_mapper_still_avoids_the_ost_it_learned_slow(tmp_path):
    before = McmfPolicy()
    for k in range(6):                      # busy looks: the slow OST's RPC times show it
        assert SLOW not in _lists(before, _snapshot(5.0 * (k + 1), timed=True), 1)
    state = before.save_state(tmp_path / "mapper-state.json")
    assert json.loads(state.read_text())[OST_RATES_KEY]["version"] == 1

    idle = _snapshot(600.0, timed=False)    # after the restart: quiet OSTs, no RPC times
    fresh = McmfPolicy()
    assert SLOW in _lists(fresh, idle)      # what a restart did before: RR's lists
    restored = McmfPolicy()
    assert restored.load_state(state) == 0
    assert SLOW not in _lists(restored, idle)
    # the restored estimate is evidence like any other: a look at full speed raises it
    fast_again = ClusterSnapshot(
        osts=[OstState(i, f"oss{i // 2}", KB, KB // 2, KB // 2, write_latency_s=MIB / 500e6,
                       sample_time_s=700.0) for i in range(8)],
        osses=idle.osses)
    assert SLOW in _lists(restored, fast_again)


def test_a_malformed_memory_loses_nothing_else(tmp_path):
    pol = McmfPolicy(predict_k=1)
    for size in (1 << 20, 1 << 22) * 4:
        pol.predictor.observe("ior.1", size)
    path = pol.save_state(tmp_path / "s.json")
    doc = json.loads(path.read_text())
    doc[OST_RATES_KEY] = "garbage"
    path.write_text(json.dumps(doc))
    back = McmfPolicy(predict_k=1)
    assert back.load_state(path) == 1                   # counted, logged
    assert back.predictor.jobids() == ["ior.1"]         # the predictor is restored


def test_forget_makes_an_ost_unmeasured_until_its_next_look():
    tr = _learned_tracker()
    assert tr.ratios_to_median()[SLOW] < 0.1
    assert tr.forget([SLOW, 99, SLOW]) == [SLOW]            # 99 never measured
    idx = list(range(8))
    assert tr.rates(idx)[SLOW] == pytest.approx(500e6)      # the median of the others
    assert SLOW not in tr.ratios_to_median() and tr.slow_looks(idx, 3.0) == []
    # its next RPC-timed look falls from that median by smoothing, as a first sample does
    tr.update(_snapshot(100.0, timed=True).osts)
    assert 500e6 / 49.475 < tr.rate[SLOW] < 500e6
    assert OstRateTracker().ratios_to_median() == {}
