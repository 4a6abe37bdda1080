"""The paper's random policy (Paul et al. 2017, Section IV-B).

"Our random allocation model picks a random OST from a subset of the OSTs whose ratio
of available space to total disk space is greater than 0.4." Read as: eligible means
``kbytes_avail / kbytes_total > 0.4`` (strictly), among usable pool members; stripes are
drawn without replacement. The paper does not say what happens when fewer OSTs qualify
than stripes are wanted; random_policy.py documents its rule (every eligible OST first,
the rest uniformly from the other usable OSTs, with a note) and these tests hold it to it.
"""
from __future__ import annotations

from collections import Counter

import pytest

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.mapper.state.ost_health import check_placement
from lustre_alloc.mapper.policies.placement import CreateRequest, InvalidRequestError, NoSpaceError
from lustre_alloc.mapper.policies.random_policy import AVAIL_RATIO_MIN, WeightedRandom


def snap(avail_per_mille: list[int], pools: dict[str, frozenset[int]] | None = None,
         **per_ost: dict) -> ClusterSnapshot:
    """OST i has ``kbytes_total = 1000`` and ``kbytes_avail = avail_per_mille[i]``."""
    osts = []
    for i, avail in enumerate(avail_per_mille):
        kw = dict(kbytes_total=1000, kbytes_free=avail, kbytes_avail=avail)
        kw.update(per_ost.get(f"ost{i}", {}))
        osts.append(OstState(index=i, oss=f"oss{i // 2}", **kw))
    return ClusterSnapshot(osts=osts, osses={o.oss: OssState(o.oss) for o in osts},
                           pools=pools or {})


def alloc(policy, s, count, pool=None):
    return policy.allocate(s, CreateRequest("job", count, pool=pool))


def test_random_threshold_is_the_papers_0_4():
    assert AVAIL_RATIO_MIN == 0.4


def test_random_picks_only_osts_above_40_percent_available():
    # OSTs 0..3 at 50% available, 4..7 at 30%: with up to 4 stripes only 0..3 qualify.
    s = snap([500, 500, 500, 500, 300, 300, 300, 300])
    policy = WeightedRandom(seed=1)
    for count in (1, 2, 3, 4):
        for _ in range(50):
            placement = alloc(policy, s, count)
            assert len(placement.osts) == count
            assert set(placement.osts) <= {0, 1, 2, 3}
            assert placement.note == ""


def test_random_exactly_40_percent_available_is_not_eligible():
    # 400/1000 = 0.4 is not > 0.4; 401/1000 is.
    s = snap([400, 401, 400])
    policy = WeightedRandom(seed=2)
    assert {alloc(policy, s, 1).osts for _ in range(30)} == {(1,)}


def test_random_skips_unusable_osts_even_when_emptiest():
    s = snap([900, 900, 900, 500], ost0=dict(flags=OstFlag.READONLY),
             ost1=dict(active=False), ost2=dict(flags=OstFlag.ENOSPC))
    policy = WeightedRandom(seed=3)
    assert {alloc(policy, s, 1).osts for _ in range(30)} == {(3,)}


def test_random_fills_with_other_usable_osts_when_too_few_qualify():
    # Eligible: 0 and 1 (60%); others 10-20%. Asking 4: both eligible OSTs are always
    # in the layout, the other 2 stripes come from {2, 3, 4}, and the note says why.
    s = snap([600, 600, 100, 200, 150])
    policy = WeightedRandom(seed=4)
    fillers = Counter()
    heads = set()
    for _ in range(300):
        placement = alloc(policy, s, 4)
        assert len(set(placement.osts)) == 4
        assert set(placement.osts[:2]) == {0, 1}  # the eligible OSTs come first
        heads.add(placement.osts[:2])
        fillers.update(placement.osts[2:])
        assert placement.note == "only 2 OSTs above 40% available"
    # Uniform among the 3 fillers: each is in 2/3 of 300 layouts = 200 on average
    # (binomial sd sqrt(300*2/3*1/3) = 8.2; +-6 sd = +-49).
    assert heads == {(0, 1), (1, 0)}  # drawn, so both stripe orders occur
    assert set(fillers) == {2, 3, 4}
    for i in (2, 3, 4):
        assert 151 <= fillers[i] <= 249


def test_random_uses_all_usable_osts_for_minus_one():
    s = snap([600, 600, 100, 200, 150], ost3=dict(flags=OstFlag.NOPRECREATE))
    placement = alloc(WeightedRandom(seed=5), s, -1)
    assert sorted(placement.osts) == [0, 1, 2, 4]


def test_random_is_uniform_among_eligible_osts():
    # 4 eligible OSTs, 4000 single-stripe files: mean 1000 each, sd sqrt(4000*.25*.75)
    # = 27.4; +-6 sd = +-164.
    s = snap([500, 700, 900, 450, 100])
    policy = WeightedRandom(seed=6)
    hits = Counter(alloc(policy, s, 1).osts[0] for _ in range(4000))
    assert set(hits) == {0, 1, 2, 3}
    for i in range(4):
        assert 836 <= hits[i] <= 1164


def test_random_is_deterministic_for_a_seed():
    s = snap([500, 700, 900, 450, 100, 800, 650, 300])
    a = WeightedRandom(seed=9)
    b = WeightedRandom(seed=9)
    counts = (1, 3, 2, 5, -1, 8)  # 5 and 8 exceed the 5 eligible OSTs: the fill rule too
    assert [alloc(a, s, c).osts for c in counts] == [alloc(b, s, c).osts for c in counts]


def test_random_differs_between_seeds():
    s = snap([500, 700, 900, 450, 100, 800, 650, 300])
    seqs = {tuple(alloc(p, s, 2).osts for _ in range(10))
            for p in (WeightedRandom(seed=1), WeightedRandom(seed=2), WeightedRandom(seed=3))}
    assert len(seqs) > 1


def test_random_respects_pools():
    s = snap([500, 700, 900, 450, 100, 800], pools={"p": frozenset({1, 4, 5}),
                                                     "empty": frozenset()})
    policy = WeightedRandom(seed=7)
    for _ in range(50):
        assert set(alloc(policy, s, 2, "p").osts) <= {1, 5}  # 4 is only 10% available
    seen = {o for _ in range(100) for o in alloc(policy, s, 1, "empty").osts}
    assert seen == {0, 1, 2, 3, 5}  # empty pool = all OSTs (4 not eligible)
    with pytest.raises(InvalidRequestError):
        alloc(policy, s, 1, "nosuch")


def test_random_raises_no_space_when_nothing_usable():
    s = snap([500, 500], ost0=dict(flags=OstFlag.ENOSPC), ost1=dict(active=False))
    with pytest.raises(NoSpaceError):
        alloc(WeightedRandom(seed=8), s, 1)


def test_random_results_are_valid_placements():
    s = snap([500, 700, 900, 450, 100, 800], ost2=dict(flags=OstFlag.DEGRADED),
             ost5=dict(flags=OstFlag.ENOINO, files_precreated=0), pools={"p": frozenset({0, 1, 5})})
    policy = WeightedRandom(seed=10)
    for count in (-1, 0, 1, 2, 3, 4, 9):
        for pool in (None, "p"):
            check_placement(s, alloc(policy, s, count, pool).osts, pool)
