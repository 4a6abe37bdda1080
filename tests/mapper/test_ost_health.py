"""The OST usability rules, stripe-count resolution and pool lookup every policy applies.

Expected values come from ``docs/reference/lustre-lod-allocator.md`` ("USABLE CHECK"
and "DISPATCH"): inactive -> error; ENOSPC, or ENOINO with no precreated object ->
ENOSPC; READONLY -> EROFS; NOPRECREATE -> ENOBUFS; DEGRADED alone is still usable (only
the allocators' preference passes avoid it).
"""
from __future__ import annotations

import errno

import pytest

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.common.lustre import LOV_MAX_STRIPE_COUNT
from lustre_alloc.mapper.state.ost_health import (check_placement, is_usable, pool_members,
                               resolve_stripe_count, unusable_reason)
from lustre_alloc.mapper.policies.placement import InvalidRequestError, NoSpaceError, PlacementCheckError


def ost(index: int, oss: str = "oss0", **kw) -> OstState:
    defaults = dict(kbytes_total=1000, kbytes_free=800, kbytes_avail=800)
    defaults.update(kw)
    return OstState(index=index, oss=oss, **defaults)


def snapshot(osts: list[OstState], pools: dict[str, frozenset[int]] | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(osts=osts, osses={o.oss: OssState(o.oss) for o in osts},
                           pools=pools or {})


# -- usability check ------------------------------------------------------------------

def test_healthy_ost_is_usable():
    assert unusable_reason(ost(0)) is None
    assert is_usable(ost(0))


@pytest.mark.parametrize("kw, reason", [
    (dict(active=False), "inactive"),
    (dict(flags=OstFlag.ENOSPC), "ENOSPC"),
    (dict(flags=OstFlag.ENOINO, files_precreated=0), "ENOSPC"),
    (dict(flags=OstFlag.READONLY), "EROFS"),
    (dict(flags=OstFlag.NOPRECREATE), "ENOBUFS"),
])
def test_unusable_ost_reports_lustre_reason(kw, reason):
    assert unusable_reason(ost(0, **kw)) == reason
    assert not is_usable(ost(0, **kw))


def test_out_of_inodes_ost_stays_usable_while_it_has_precreated_objects():
    # ENOINO blocks an OST only when fprecreated == 0 (objects already precreated
    # still have inodes).
    assert is_usable(ost(0, flags=OstFlag.ENOINO, files_precreated=5))


def test_degraded_ost_is_usable_for_the_health_check():
    # DEGRADED is a preference (QOS excludes it, RR takes it in pass 2), not an error.
    assert is_usable(ost(0, flags=OstFlag.DEGRADED))
    assert is_usable(ost(0, flags=OstFlag.DEGRADED, files_precreated=0))


@pytest.mark.parametrize("kw, reason", [
    # The check's order: inactive first, then ENOSPC, then EROFS, then ENOBUFS.
    (dict(active=False, flags=OstFlag.ENOSPC | OstFlag.READONLY), "inactive"),
    (dict(flags=OstFlag.ENOSPC | OstFlag.READONLY | OstFlag.NOPRECREATE), "ENOSPC"),
    (dict(flags=OstFlag.READONLY | OstFlag.NOPRECREATE), "EROFS"),
    (dict(flags=OstFlag.ENOINO | OstFlag.NOPRECREATE, files_precreated=3), "ENOBUFS"),
])
def test_unusable_reason_follows_lod_check_order(kw, reason):
    assert unusable_reason(ost(0, **kw)) == reason


# -- stripe count ---------------------------------------------------------------------

@pytest.mark.parametrize("requested, usable, expected", [
    (-1, 7, 7),        # -1: every usable OST
    (0, 7, 1),         # 0: the default stripe count, 1
    (3, 7, 3),
    (9, 7, 7),         # clipped to the usable OSTs
    (1, 0, 0),         # nothing usable -> 0 (the policy then raises NoSpaceError)
    (-1, 0, 0),
    (LOV_MAX_STRIPE_COUNT, 3000, LOV_MAX_STRIPE_COUNT),
    (-1, 3000, LOV_MAX_STRIPE_COUNT),  # -1 is also clipped to LOV_MAX_STRIPE_COUNT = 2000
])
def test_resolve_stripe_count(requested, usable, expected):
    assert resolve_stripe_count(requested, usable) == expected


@pytest.mark.parametrize("requested", [-2, LOV_MAX_STRIPE_COUNT + 1])
def test_stripe_count_outside_lustre_range_is_rejected(requested):
    with pytest.raises(InvalidRequestError) as info:
        resolve_stripe_count(requested, 10)
    assert info.value.errno == errno.EINVAL


def test_error_classes_carry_lustre_errno():
    assert NoSpaceError("x").errno == errno.ENOSPC
    assert InvalidRequestError("x").errno == errno.EINVAL


# -- pools ----------------------------------------------------------------------------

def test_pool_members_keep_lod_array_order():
    snap = snapshot([ost(i) for i in range(5)], pools={"p": frozenset({4, 1, 3})})
    assert [o.index for o in pool_members(snap, "p")] == [1, 3, 4]


def test_no_pool_and_empty_pool_mean_every_ost():
    snap = snapshot([ost(i) for i in range(3)], pools={"empty": frozenset()})
    assert [o.index for o in pool_members(snap, None)] == [0, 1, 2]
    assert [o.index for o in pool_members(snap, "empty")] == [0, 1, 2]


def test_unknown_pool_is_an_invalid_request():
    snap = snapshot([ost(0)], pools={"p": frozenset({0})})
    with pytest.raises(InvalidRequestError, match="nosuch"):
        pool_members(snap, "nosuch")


# -- check_placement (the invariant checker the other suites rely on) ------------------

def test_check_placement_accepts_a_valid_layout():
    snap = snapshot([ost(0), ost(1), ost(2, flags=OstFlag.DEGRADED)], pools={"p": frozenset({1, 2})})
    check_placement(snap, [2, 1], "p")
    check_placement(snap, [0, 2, 1], None)


@pytest.mark.parametrize("osts, pool, message", [
    ([1, 1], None, "twice"),
    ([7], None, "does not exist"),
    ([0], "p", "not in pool"),
    ([3], None, "unusable"),
])
def test_check_placement_names_the_first_violation(osts, pool, message):
    snap = snapshot([ost(0), ost(1), ost(2), ost(3, flags=OstFlag.READONLY)],
                    pools={"p": frozenset({1, 2})})
    with pytest.raises(PlacementCheckError, match=message):
        check_placement(snap, osts, pool)


def test_check_placement_raises_a_typed_error_naming_the_ost_not_an_assertion():
    """Production (the service's last-line check) catches this type; an AssertionError
    would vanish under ``python -O`` and mix with real assertion failures."""
    snap = snapshot([ost(0), ost(1, flags=OstFlag.READONLY)])
    with pytest.raises(PlacementCheckError) as err:
        check_placement(snap, [0, 1], None)
    assert not isinstance(err.value, AssertionError)
    assert err.value.ost == 1 and "EROFS" in err.value.reason
