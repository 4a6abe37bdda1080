"""The migration budget: bandwidth share per OST, moves per OSS, data in flight, pauses."""
from __future__ import annotations

import pytest

from lustre_alloc.rebalance.budget import BudgetParams, MigrationBudget, Move, OstLoad, faulty_reason

MIB = 1 << 20


def _loads(**over) -> dict[int, OstLoad]:
    out = {i: OstLoad(oss=f"oss{i // 2}", rate_bytes_s=100 * MIB) for i in range(6)}
    out.update(over)
    return out


def test_a_move_charges_each_ost_its_part_and_waits_for_the_debt_to_be_paid():
    b = MigrationBudget(BudgetParams(ost_share=0.5, max_per_oss=4))
    loads = _loads()
    b.refill(0.0, loads)
    move = Move("/a", 200 * MIB, [0], [2, 4])
    assert move.parts() == {0: 200 * MIB, 2: 100 * MIB, 4: 100 * MIB}
    assert b.refusal(move, loads, used_bytes=1e15) is None
    b.start(move, loads)
    b.end("/a")
    # OST 0 owes 200 MiB - 50 MiB = 150 MiB: 3 s at 50 MiB/s before another move from it
    other = Move("/b", MIB, [0], [1])
    b.refill(2.0, loads)
    assert b.refusal(other, loads, 1e15) == "OST 0 over its bandwidth share"
    b.refill(3.0, loads)
    assert b.refusal(other, loads, 1e15) is None
    # over any span an OST gives moves at most its share plus one file
    assert b.tokens[0] <= 0.5 * 100 * MIB


def test_moves_per_oss_and_data_in_flight_are_capped():
    b = MigrationBudget(BudgetParams(ost_share=1.0, max_per_oss=1, max_in_flight_ratio=0.05))
    loads = _loads()
    b.refill(0.0, loads)
    b.start(Move("/a", MIB, [0], [2]), loads)           # oss0 and oss1 busy
    assert b.refusal(Move("/b", MIB, [1], [4]), loads, 1e15) == "OSS oss0 at 1 moves"
    assert b.refusal(Move("/a", MIB, [4], [5]), loads, 1e15) == "in flight"
    # 5% of 100 MiB used is 5 MiB: one more of 4 MiB does not fit beside the 1 MiB running
    assert b.refusal(Move("/c", 5 * MIB, [4], [5]), loads, 100 * MIB) == \
        "data in flight at its ceiling"
    assert b.refusal(Move("/c", 4 * MIB, [4], [5]), loads, 100 * MIB) is None


def test_a_busy_source_waits_and_a_fault_pauses_everything():
    b = MigrationBudget(BudgetParams(busy_share=0.8))
    loads = _loads()
    loads[3] = OstLoad(oss="oss1", rate_bytes_s=100 * MIB, jobs_bytes_s=90 * MIB)
    b.refill(0.0, loads)
    assert b.refusal(Move("/a", MIB, [3], [0]), loads, 1e15) == "OST 3 busy with jobs"
    assert b.refusal(Move("/a", MIB, [0], [3]), loads, 1e15) is None    # a busy target is fine
    assert b.paused(loads) is None
    loads[5] = OstLoad(oss="oss2", rate_bytes_s=100 * MIB,
                       faulty=faulty_reason(degraded=True, available=True, steered_by_us=False))
    assert b.paused(loads) == "OST 5: degraded"
    # the mapper's own steering flag is the evacuation's cause, not a fault
    assert faulty_reason(degraded=True, available=True, steered_by_us=True) is None
    assert faulty_reason(degraded=False, available=False, steered_by_us=True) == "unavailable"


def test_bandwidth_limit_splits_the_smallest_share():
    b = MigrationBudget(BudgetParams(ost_share=0.2, max_per_oss=2), rate_capped=True)
    loads = _loads()
    loads[1] = OstLoad(oss="oss0", rate_bytes_s=10 * MIB)
    assert b.bandwidth_limit(Move("/a", MIB, [1], [2]), loads) == pytest.approx(MIB)


@pytest.mark.parametrize("bad", [{"ost_share": 0}, {"ost_share": 1.5}, {"max_per_oss": 0},
                                 {"max_in_flight_ratio": 0}, {"busy_share": 0}])
def test_bad_budget_values_are_refused(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        BudgetParams(**bad)


def test_a_failing_ost_kept_at_its_own_slow_speed_is_not_busy():
    """Busy is measured against the OST's rating: jobs reading a slow OST at all it can do
    must not stop its evacuation for good."""
    b = MigrationBudget(BudgetParams(busy_share=0.8))
    slow = OstLoad(oss="oss0", rate_bytes_s=2 * MIB, jobs_bytes_s=2 * MIB, peak_bytes_s=100 * MIB)
    loads = {0: slow, 1: OstLoad(oss="oss1", rate_bytes_s=100 * MIB)}
    b.refill(0.0, loads)
    assert b.refusal(Move("/a", MIB, [0], [1]), loads, 1e15) is None
    loads[0].jobs_bytes_s = 90 * MIB
    assert b.refusal(Move("/a", MIB, [0], [1]), loads, 1e15) == "OST 0 busy with jobs"


def test_without_w_moves_are_not_capped_and_bytes_in_flight_per_ost_are():
    """No ``-W`` (before Lustre 2.16, or lfs_bandwidth_option off): no rate cap, and the
    running moves touching an OST hold at most ost_in_flight_mib, a single larger file
    alone; with ``-W`` that limit is not applied."""
    loads = _loads()
    b = MigrationBudget(BudgetParams(ost_share=1.0, max_per_oss=8, max_in_flight_ratio=1.0,
                                     ost_in_flight_mib=100))
    b.refill(0.0, loads)
    big = Move("/big", 300 * MIB, [1], [2])
    assert b.bandwidth_limit(big, loads) == 0.0
    assert b.refusal(big, loads, 1e15) is None                  # alone: larger than the cap
    b.start(big, loads)
    small = Move("/small", MIB, [1], [3])
    assert b.refusal(small, loads, 1e15) == "OST 1 at 100 MiB in flight"
    b.end("/big")
    b.refill(1e9, loads)                                        # its bandwidth share paid off
    assert b.refusal(small, loads, 1e15) is None
    capped = MigrationBudget(BudgetParams(ost_share=1.0, max_per_oss=8,
                                          max_in_flight_ratio=1.0, ost_in_flight_mib=100),
                             rate_capped=True)
    capped.refill(0.0, loads)
    capped.start(big, loads)
    capped.refill(1e9, loads)
    assert capped.refusal(small, loads, 1e15) is None           # big still running
