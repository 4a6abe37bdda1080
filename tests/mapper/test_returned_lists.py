"""Lists given back unused are handed out again first in the round-robin regime
(lustre_alloc/mapper/policies/mcmf/returned_lists.py)."""
from __future__ import annotations

from collections import Counter

import pytest

from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.mcmf.returned_lists import MAX_KEPT, ReturnedLists
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstState
from lustre_alloc.simulator.leasing import LeasedCreates

MIB = 1 << 20
KB = 1 << 30


def _snapshot(n=4, t=0.0, inactive=()):
    osts = [OstState(i, f"oss{i // 2}", KB, KB // 2, KB // 2, write_latency_s=MIB / 500e6,
                     sample_time_s=0.0, active=i not in inactive) for i in range(n)]
    return ClusterSnapshot(osts=osts, osses={f"oss{s}": OssState(f"oss{s}")
                                             for s in range((n + 1) // 2)}, time_s=t)


def test_the_oldest_fitting_list_comes_first_and_stale_or_unfit_ones_are_dropped():
    kept = ReturnedLists(ttl_s=2.0)
    kept.give_back([1])
    kept.stamp(0.0)
    kept.give_back([2])
    kept.give_back([3, 0])
    kept.stamp(1.0)
    assert kept.take(1, lambda osts: True, 2.5) == (2,)      # (1,) is past its 2 s
    assert kept.take(2, lambda osts: 3 not in osts, 2.5) is None
    assert kept.take(1, lambda osts: True, 2.5) is None and len(kept) == 0
    assert kept.stats == {"returned": 3, "reused": 1, "dropped": 2}
    with pytest.raises(ValueError):
        ReturnedLists(0.0)


def test_at_most_max_kept_lists_are_kept_the_oldest_dropped():
    kept = ReturnedLists(ttl_s=10.0)
    for i in range(MAX_KEPT + 3):
        kept.give_back([i % 7])
        kept.stamp(float(i) * 1e-3)
    assert len(kept) == MAX_KEPT and kept.stats["dropped"] == 3
    assert kept.take(1, lambda osts: True, 5.0) == (3 % 7,)


def test_the_round_robin_regime_hands_a_returned_list_out_before_moving_on():
    pol = McmfPolicy(seed=0)
    req = CreateRequest(jobid="a", stripe_count=1, stripe_size=MIB)
    first = [pol.allocate_batch(_snapshot(), [req])[0] for _ in range(4)]
    assert all(p.note == "regime round_robin" for p in first)
    assert sorted(p.osts for p in first) == [(0,), (1,), (2,), (3,)]
    pol.unbook(first[2].osts, MIB)                # leased, never used
    pol.lease_returned(first[2].osts)
    again = pol.allocate_batch(_snapshot(t=0.5), [req])[0]
    assert again.osts == first[2].osts            # not the rotation's next (the 5th)
    # a returned list naming an OST that is no longer usable is not handed out
    pol.unbook(first[1].osts, MIB)
    pol.lease_returned(first[1].osts)
    nxt = pol.allocate_batch(_snapshot(t=0.6, inactive={first[1].osts[0]}), [req])[0]
    assert nxt.osts != first[1].osts


def test_writers_slower_than_their_leases_split_files_as_lustres_round_robin_does():
    """4 writers x 6 files, one every 3 s, behind leases (16 layouts at first, one used;
    then one layout per create). Each writer's 15 unused first layouts went by the
    rotation; on four alike OSTs the files were split unevenly, as on Lustre (10/3/4/7).
    Handed out again first, the returned lists keep the files created in rotation."""
    pol = McmfPolicy(seed=0)
    leased = LeasedCreates(pol)
    per_ost: Counter = Counter()
    for f in range(6):
        for w in range(4):
            t = 3.0 * f + 0.01 * w
            req = CreateRequest(jobid=f"w{w}", stripe_count=1, stripe_size=MIB)
            got = leased.allocate(_snapshot(t=t), req)
            per_ost[got.osts[0]] += 1
    assert leased.stats["expired"] > 0 and pol.returned.stats["reused"] > 0
    assert sorted(per_ost.values()) == [6, 6, 6, 6], per_ost
