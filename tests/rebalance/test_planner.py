"""The rebalance planner: balance reached, rules kept, bad input refused."""
from __future__ import annotations

import numpy as np
import pytest

from lustre_alloc.mapper.state.cluster_state import OstFlag, make_uniform_cluster
from lustre_alloc.rebalance.plan import (FileTable, MigrationOsts, PlanInputError, PlanTargets,
                                      plan_migration)

GIB = 1 << 30


def _cluster(n_old: int, n_new: int, files_per_ost: int = 200, seed: int = 3,
             stripe_counts=(1,)):
    """``n_old`` OSTs holding files, ``n_new`` empty ones (an expansion)."""
    rng = np.random.default_rng(seed)
    n = n_old + n_new
    m = n_old * files_per_ost
    ks = rng.choice(stripe_counts, size=m)
    first = rng.integers(0, n_old, size=m)
    osts = [[int((f + s) % n_old) for s in range(k)] for f, k in zip(first, ks)]
    sizes = np.floor(rng.lognormal(np.log(GIB), 1.0, m))
    used = np.zeros(n)
    for o, sz in zip(osts, sizes):
        for i in o:
            used[i] += sz / len(o)
    snap = make_uniform_cluster(n // 4, 4, kbytes_total=int(2 * used.max() / 1024) + 1,
                                kbytes_used={i: int(used[i] // 1024) for i in range(n)})
    files = FileTable.from_lists([f"/lustre/f{i}" for i in range(m)], sizes, osts,
                                 access_bytes_s=sizes * 1e-4 * rng.lognormal(0, 0.3, m))
    return snap, files


def _apply(files: FileTable, plan, n: int) -> np.ndarray:
    """Used bytes per OST after the plan, recomputed from the file list."""
    new = {int(f): plan.osts_of(i) for i, f in enumerate(plan.files)}
    used = np.zeros(n)
    for f in range(files.count):
        osts = new.get(f, files.ost_index[files.ost_ptr[f]:files.ost_ptr[f + 1]])
        used[osts] += files.size_bytes[f] / len(osts)
    return used


def test_expansion_fills_new_osts_to_the_mean():
    snap, files = _cluster(24, 8)
    table = MigrationOsts.from_snapshot(snap, 1e9)
    plan = plan_migration(table, files, PlanTargets(budget_fraction=0.25))
    used = _apply(files, plan, 32)
    fill = used / used.mean()
    assert fill.max() < 1.06
    assert fill[24:].min() > 0.9                        # the new OSTs took their share
    assert plan.summary.fill_max_mean_before > 1.3
    assert plan.summary.fill_max_mean_after == pytest.approx(fill.max(), rel=0.02)
    # Every moved byte was read once and written once; the estimate is positive.
    assert plan.summary.bytes_read == plan.summary.bytes_written > 0
    assert plan.summary.duration_s > 0
    assert np.all(plan.est_end_s >= plan.est_start_s)


def test_balanced_cluster_needs_no_move():
    snap, files = _cluster(16, 0)
    plan = plan_migration(MigrationOsts.from_snapshot(snap, 1e9), files,
                          PlanTargets(0.5, fill_tolerance=0.5, load_tolerance=1.0))
    assert plan.summary.files_moved == 0 and len(plan.files) == 0
    assert plan.summary.duration_s == 0.0


def test_never_targets_unusable_or_draining_osts_and_drains():
    snap, files = _cluster(24, 8)
    snap.osts[25].flags = OstFlag.ENOSPC
    snap.osts[26].flags = OstFlag.READONLY
    snap.osts[27].active = False
    snap.osts[3].flags = OstFlag.NOPRECREATE        # being drained: must end empty
    plan = plan_migration(MigrationOsts.from_snapshot(snap, 1e9), files, PlanTargets(0.25))
    assert not set(plan.new_osts.tolist()) & {25, 26, 27, 3}
    on3 = [f for f in range(files.count)
           if 3 in files.ost_index[files.ost_ptr[f]:files.ost_ptr[f + 1]]]
    assert set(on3) <= set(plan.files.tolist())


def test_striped_files_keep_their_stripe_count_on_distinct_osts():
    snap, files = _cluster(12, 4, files_per_ost=60, stripe_counts=(1, 2, 4))
    plan = plan_migration(MigrationOsts.from_snapshot(snap, 1e9), files, PlanTargets(0.25))
    assert plan.summary.files_moved > 0
    for i, f in enumerate(plan.files):
        new = plan.osts_of(i)
        assert len(new) == files.ost_ptr[f + 1] - files.ost_ptr[f]
        assert len(set(new.tolist())) == len(new)


def test_max_duration_cuts_the_plan():
    snap, files = _cluster(24, 8)
    table = MigrationOsts.from_snapshot(snap, 1e9)
    full = plan_migration(table, files, PlanTargets(0.25))
    half = plan_migration(table, files, PlanTargets(0.25, max_duration_s=full.summary.duration_s / 2))
    assert 0 < half.summary.files_moved < full.summary.files_moved
    assert half.summary.duration_s <= full.summary.duration_s / 2
    assert half.summary.cut_by_duration == full.summary.files_moved - half.summary.files_moved


def test_a_smaller_budget_takes_longer():
    snap, files = _cluster(24, 8)
    table = MigrationOsts.from_snapshot(snap, 1e9)
    fast = plan_migration(table, files, PlanTargets(0.5)).summary.duration_s
    slow = plan_migration(table, files, PlanTargets(0.1)).summary.duration_s
    assert slow == pytest.approx(5 * fast, rel=1e-6)


@pytest.mark.parametrize("budget", [0.0, -0.1, 1.5])
def test_budget_outside_0_1_is_refused(budget):
    with pytest.raises(PlanInputError, match="budget"):
        PlanTargets(budget_fraction=budget)


def test_unknown_ost_names_the_file():
    snap, _ = _cluster(4, 0, files_per_ost=2)
    files = FileTable.from_lists(["/a", "/b"], [GIB, GIB], [[0], [9]])
    with pytest.raises(PlanInputError, match=r"file /b: unknown OST 9"):
        plan_migration(MigrationOsts.from_snapshot(snap, 1e9), files, PlanTargets(0.5))


def test_file_without_ost_and_duplicate_ost_are_refused():
    snap, _ = _cluster(4, 0, files_per_ost=2)
    table = MigrationOsts.from_snapshot(snap, 1e9)
    with pytest.raises(PlanInputError, match="file /a: has no OST"):
        plan_migration(table, FileTable.from_lists(["/a"], [GIB], [[]]), PlanTargets(0.5))
    with pytest.raises(PlanInputError, match="file /a: an OST appears twice"):
        plan_migration(table, FileTable.from_lists(["/a"], [GIB], [[1, 1]]), PlanTargets(0.5))


def test_move_largest_moves_fewer_files_for_the_same_balance():
    snap, files = _cluster(24, 8)
    table = MigrationOsts.from_snapshot(snap, 1e9)
    paper = plan_migration(table, files, PlanTargets(0.25)).summary
    big = plan_migration(table, files, PlanTargets(0.25, move_largest=True)).summary
    assert big.files_moved < paper.files_moved / 3
    assert big.fill_max_mean_after < 1.08 and paper.fill_max_mean_after < 1.06
