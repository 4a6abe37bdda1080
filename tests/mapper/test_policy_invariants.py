"""Health and pool rules every baseline policy keeps, over random clusters (hypothesis).

For round_robin, lustre_qos and random, on clusters of 1-4 OSSes with random space,
activity, statfs flags, precreation and pools, a sequence of create requests must:
never return an inactive, ENOSPC, ENOINO-with-no-precreated, READONLY or NOPRECREATE
OST (:func:`lustre_alloc.mapper.state.ost_health.check_placement`); never repeat an OST; stay inside the
pool (an empty pool meaning every OST); return the requested count clipped to the
usable OSTs of the pool (-1 = all of them, 0 = 1); refuse an unknown pool with
InvalidRequestError; and raise NoSpaceError when no OST of the pool is usable.
Policies keep state across requests (RR walk, QOS penalties), so each example runs
several requests, at increasing times, against one policy instance.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.mapper.state.ost_health import check_placement, is_usable, pool_members, resolve_stripe_count
from lustre_alloc.mapper.policies.placement import CreateRequest, InvalidRequestError, NoSpaceError
from lustre_alloc.mapper.policies.registry import BASELINES, make_policy
from lustre_alloc.mapper.policies.round_robin import build_rr_array

BAD_FLAGS = [OstFlag.DEGRADED, OstFlag.READONLY, OstFlag.NOPRECREATE, OstFlag.ENOSPC,
             OstFlag.ENOINO]
TOTAL_KIB = 1 << 30


@st.composite
def ost_states(draw, index: int, n_oss: int) -> OstState:
    healthy = draw(st.integers(0, 9)) < 6
    flags = OstFlag.NONE
    if not healthy:
        for flag in draw(st.sets(st.sampled_from(BAD_FLAGS), min_size=1, max_size=2)):
            flags |= flag
    avail = draw(st.one_of(st.integers(0, TOTAL_KIB), st.sampled_from([TOTAL_KIB // 2, 1])))
    return OstState(index=index, oss=f"oss{draw(st.integers(0, n_oss - 1))}",
                    kbytes_total=TOTAL_KIB, kbytes_free=avail, kbytes_avail=avail,
                    files_free=draw(st.sampled_from([0, 40, 1 << 20])),
                    files_precreated=draw(st.sampled_from([0, 128, 128])),
                    active=draw(st.integers(0, 9)) < 8, flags=flags)


@st.composite
def clusters(draw) -> ClusterSnapshot:
    n_oss = draw(st.integers(1, 4))
    n_ost = draw(st.integers(1, 12))
    osts = [draw(ost_states(i, n_oss)) for i in range(n_ost)]
    pool = draw(st.sets(st.integers(0, n_ost - 1)))
    return ClusterSnapshot(osts=osts, osses={o.oss: OssState(o.oss) for o in osts},
                           pools={"p": frozenset(pool), "empty": frozenset()})


requests = st.lists(st.tuples(st.integers(-1, 14), st.sampled_from([None, "p", "empty", "nosuch"])),
                    min_size=1, max_size=6)

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
SLOW_SETTINGS = settings(SETTINGS, max_examples=50)  # draws a new cluster per request


def check_request(policy, snapshot: ClusterSnapshot, count: int, pool: str | None) -> None:
    request = CreateRequest("job", count, pool=pool)
    if pool == "nosuch":
        with pytest.raises(InvalidRequestError):
            policy.allocate(snapshot, request)
        return
    usable = {o.index for o in pool_members(snapshot, pool) if is_usable(o)}
    if not usable:
        with pytest.raises(NoSpaceError):
            policy.allocate(snapshot, request)
        return
    osts = policy.allocate(snapshot, request).osts
    check_placement(snapshot, osts, pool)  # no duplicate, unusable or out-of-pool OST
    assert len(osts) == resolve_stripe_count(count, len(usable))
    if count == -1:
        assert set(osts) == usable
    if count == 0:
        assert len(osts) == 1


@pytest.mark.parametrize("name", BASELINES)
@SETTINGS
@given(snapshot=clusters(), reqs=requests, seed=st.integers(0, 1000))
def test_policy_keeps_health_and_pool_rules(name, snapshot, reqs, seed):
    policy = make_policy(name, seed=seed)
    for step, (count, pool) in enumerate(reqs):
        snapshot.time_s = 100.0 * step  # lets QOS penalties age between requests
        check_request(policy, snapshot, count, pool)


@pytest.mark.parametrize("name", BASELINES)
@SLOW_SETTINGS
@given(first=clusters(), reqs=requests, seed=st.integers(0, 1000), data=st.data())
def test_policy_keeps_rules_when_the_cluster_changes_between_requests(name, first, reqs, seed, data):
    # Same OST indices, new health and space for every request: the RR array, QOS
    # penalties and flags must follow the snapshot, not the one they were built from.
    policy = make_policy(name, seed=seed)
    n_oss = len({o.oss for o in first.osts})
    for step, (count, pool) in enumerate(reqs):
        osts = [data.draw(ost_states(o.index, n_oss)) for o in first.osts]
        snapshot = ClusterSnapshot(osts=osts, osses={o.oss: OssState(o.oss) for o in osts},
                                   pools=first.pools, time_s=10.0 * step)
        check_request(policy, snapshot, count, pool)


@SETTINGS
@given(snapshot=clusters())
def test_rr_array_holds_every_pool_member_exactly_once(snapshot):
    counts: dict[str, int] = {}
    for o in snapshot.osts:
        counts[o.oss] = counts.get(o.oss, 0) + 1
    for pool in (None, "p"):
        members = pool_members(snapshot, pool)
        array = build_rr_array(members, counts, list(counts))
        assert sorted(array) == sorted(o.index for o in members)


@pytest.mark.parametrize("name", BASELINES)
def test_policy_rejects_stripe_count_below_minus_one(name):
    snapshot = ClusterSnapshot(
        osts=[OstState(index=i, oss="oss0", kbytes_total=100, kbytes_free=90, kbytes_avail=90)
              for i in range(3)], osses={})
    with pytest.raises(InvalidRequestError):
        make_policy(name).allocate(snapshot, CreateRequest("job", -2))
