"""Lustre's round-robin allocator against hand-worked examples.

Every expected array and OST sequence below is worked out by hand from
``docs/reference/lustre-lod-allocator.md`` ("RR"), with the arithmetic in comments.
Where the reference notes and lod_qos.c differ, the test follows lod_qos.c
(``lod_ost_alloc_rr``, identical in 2.4 .. 2.15; the notes claim the same for 2.16):

* the slot is read *before* ``start_idx`` is incremented
  (``pos = (start_idx + offset_idx) % N; start_idx += 1``), as round_robin.py documents;
* each pass (speed 0, 1, 2) restarts from the ``start_idx`` the call began with (the
  notes do not say what a new pass starts from);
* the wrap at the start of a call is ``if count >= N or start_idx > N: start_idx %= N``
  (the notes write ``start_idx >= N: start_idx -= N``). The two differ only when a call
  begins with ``start_idx == N`` exactly: Lustre then reads slot ``(N + offset) % N``
  without advancing ``offset_idx``; see test_rr_does_not_wrap_when_start_idx_equals_n.

``start_idx`` re-seeding is controlled by replacing the policy's generator with a
scripted one, so the seeded values appear in the comments.

Pools are sets here, so "pool-member order" (Lustre: the order of ``pool_add``) is read
as LOD array (index) order, the order :func:`lustre_alloc.mapper.state.ost_health.pool_members` returns.
Master's speed-2 change ("after i=0 walk pos+1 sequentially") is not modelled; the
released walk (every pass reads ``(start_idx + offset_idx) % N``) is.
"""
from __future__ import annotations

import random

import pytest

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.mapper.state.ost_health import check_placement, pool_members
from lustre_alloc.mapper.policies.placement import CreateRequest, NoSpaceError
from lustre_alloc.mapper.policies.round_robin import RoundRobin, build_rr_array


class ScriptedRng:
    """Stands in for ``random.Random``: ``randrange(n)`` returns scripted values and
    records every ``n`` it was asked for."""

    def __init__(self, *values: int):
        self.values = list(values)
        self.asked: list[int] = []

    def randrange(self, n: int) -> int:
        self.asked.append(n)
        value = self.values.pop(0)
        assert 0 <= value < n, f"scripted {value} outside [0, {n})"
        return value


def cluster(layout: list[tuple[str, list[int]]], pools: dict[str, frozenset[int]] | None = None,
            **per_ost: dict) -> ClusterSnapshot:
    """OSTs listed per OSS; OST order in the snapshot is index order (connect order)."""
    osts = []
    for oss, indices in layout:
        for i in indices:
            kw = dict(kbytes_total=1 << 30, kbytes_free=1 << 29, kbytes_avail=1 << 29)
            kw.update(per_ost.get(f"ost{i}", {}))
            osts.append(OstState(index=i, oss=oss, **kw))
    osts.sort(key=lambda o: o.index)
    return ClusterSnapshot(osts=osts, osses={oss: OssState(oss) for oss, _ in layout},
                           pools=pools or {})


def rr_with_start(*seeded_starts: int) -> tuple[RoundRobin, ScriptedRng]:
    rr = RoundRobin(seed=0)
    rng = ScriptedRng(*seeded_starts)
    rr._rng = rng  # the generator behind start_idx re-seeding (prandom_u32_max)
    return rr, rng


def files(rr: RoundRobin, snap: ClusterSnapshot, count: int, n: int, pool: str | None = None):
    return [rr.allocate(snap, CreateRequest("job", count, pool=pool)).osts for _ in range(n)]


AB = [("A", [0, 1, 2, 3]), ("B", [4, 5, 6, 7])]
# OSS A={0,1,2,3}, B={4,5,6,7}, N=8, both OSSes have 4 OSTs (tie: A connected first).
#   A: j=0 -> 0*8/4=0, j=1 -> 2, j=2 -> 4, j=3 -> 6
#   B: j=0 -> 0 taken -> 1; j=1 -> 2 taken -> 3; j=2 -> 4 -> 5; j=3 -> 6 -> 7
AB_ARRAY = [0, 4, 1, 5, 2, 6, 3, 7]


def array_of(snap: ClusterSnapshot, pool: str | None = None) -> list[int | None]:
    counts: dict[str, int] = {}
    order: list[str] = []
    for o in snap.osts:
        if o.oss not in counts:
            order.append(o.oss)
        counts[o.oss] = counts.get(o.oss, 0) + 1
    return build_rr_array(pool_members(snap, pool), counts, order)


# -- building the RR array ------------------------------------------------------------

def test_rr_interleaves_osts_across_oss():
    assert array_of(cluster(AB)) == AB_ARRAY


def test_rr_array_places_oss_with_most_osts_first():
    # Connect order c (1 OST: 0), b (2 OSTs: 1,2), a (3 OSTs: 3,4,5); N=6.
    # Sorted by OST count descending: a, b, c.
    #   a (3): OST3 j=0 -> 0;  OST4 j=1 -> 1*6/3=2;  OST5 j=2 -> 2*6/3=4
    #   b (2): OST1 j=0 -> 0 taken -> 1;  OST2 j=1 -> 1*6/2=3
    #   c (1): OST0 j=0 -> 0,1,2,3,4 taken -> 5
    # (In connect order instead it would be 0,1,3,2,4,5.)
    snap = cluster([("c", [0]), ("b", [1, 2]), ("a", [3, 4, 5])])
    assert array_of(snap) == [3, 1, 4, 2, 5, 0]


def test_rr_array_ties_keep_connect_order_not_name_order():
    # "oss-b" serves OSTs 0,1 (connected first), "oss-a" serves 2,3; both have 2 OSTs.
    #   oss-b: OST0 -> 0; OST1 -> 1*4/2=2
    #   oss-a: OST2 -> 0 taken -> 1; OST3 -> 2 taken -> 3
    # (Sorting by name would give 2,0,3,1.)
    snap = cluster([("oss-b", [0, 1]), ("oss-a", [2, 3])])
    assert array_of(snap) == [0, 2, 1, 3]


def test_rr_array_spaces_pool_members_by_the_oss_total_ost_count():
    # A={0,1,2,3}, B={4,5,6,7}; pool {0,1,2,4,5}, N=5. The divisor is the OSS's total
    # OST count (lsq_tgt_count = 4), not its 3 or 2 pool members:
    #   A: OST0 j=0 -> 0;  OST1 j=1 -> 5/4=1;  OST2 j=2 -> 10/4=2
    #   B: OST4 j=0 -> 0,1,2 taken -> 3;  OST5 j=1 -> 5/4=1 -> 1,2,3 taken -> 4
    # (Dividing by pool members, A 3 / B 2, would give 0,1,4,2,5.)
    snap = cluster(AB, pools={"p": frozenset({0, 1, 2, 4, 5})})
    assert array_of(snap, "p") == [0, 1, 2, 4, 5]


def test_rr_policy_uses_the_pool_array():
    snap = cluster(AB, pools={"p": frozenset({0, 1, 2, 4, 5})})
    rr, _ = rr_with_start(0)
    # start 0, single stripes: slots 0..4 of [0,1,2,4,5], then slot 0 again
    # (call 6 begins with start_idx=5 == N: no wrap, slot (5+0)%5=0).
    assert files(rr, snap, 1, 6, pool="p") == [(0,), (1,), (2,), (4,), (5,), (0,)]


def test_rr_array_holds_each_pool_member_once():
    snap = cluster([("a", [0, 1, 2]), ("b", [3, 4]), ("c", [5]), ("d", [6, 7, 8, 9])],
                   pools={"p": frozenset({0, 2, 3, 5, 6, 9})})
    for pool in (None, "p"):
        arr = array_of(snap, pool)
        assert sorted(arr) == sorted(o.index for o in pool_members(snap, pool))


# -- walking the array ----------------------------------------------------------------

def test_rr_consecutive_single_stripe_files_follow_array_order():
    rr, rng = rr_with_start(0)
    snap = cluster(AB)
    # start_idx seeded 0, offset 0: file k reads slot (k-1) % 8. Call 9 begins with
    # start_idx = 8 (== N, no wrap: slot 8 % 8 = 0); call 10 begins with 9 > 8 -> 9 % 8 = 1
    # and, stripe count 1, offset_idx stays 0.
    assert [f[0] for f in files(rr, snap, 1, 16)] == AB_ARRAY * 2
    assert rng.asked == [8]  # seeded once, on the first file
    assert rr.state().offset_idx == 0


def test_rr_multi_stripe_file_takes_consecutive_slots():
    rr, _ = rr_with_start(3)
    # start_idx seeded 3: slots 3,4,5,6 -> OSTs 5,2,6,3 (one per OSS alternately)
    assert files(rr, cluster(AB), 4, 1) == [(5, 2, 6, 3)]
    assert rr.state().start_idx == 7


def test_rr_first_file_reseeds_start_idx_and_start_count():
    rr, rng = rr_with_start(5)
    snap = cluster(AB)
    # start_count 0 -> -1 <= 0: start_idx = uniform[0, 8) = 5 (scripted),
    # start_count = (2000 // 8 + 30) * 8 = (250 + 30) * 8 = 2240.
    assert files(rr, snap, 1, 1) == [(AB_ARRAY[5],)]
    st = rr.state()
    assert rng.asked == [8]
    assert st.start_count == 2240
    assert st.start_idx == 6


def test_rr_seed_fixes_the_first_start_idx():
    # The seed drives start_idx re-seeding: RoundRobin(seed) draws uniform[0, N) from
    # random.Random(seed), so the first file of the A/B cluster lands on that slot.
    snap = cluster(AB)
    starts = set()
    for seed in range(6):
        slot = random.Random(seed).randrange(8)
        starts.add(slot)
        assert RoundRobin(seed).allocate(snap, CreateRequest("j", 1)).osts == (AB_ARRAY[slot],)
        assert RoundRobin(seed).allocate(snap, CreateRequest("j", 1)).osts == \
            RoundRobin(seed).allocate(snap, CreateRequest("j", 1)).osts
    assert len(starts) > 1


def test_rr_start_count_uses_integer_division_by_n():
    rr, _ = rr_with_start(0)
    snap = cluster([("a", [0, 1]), ("b", [2])])
    files(rr, snap, 1, 1)
    # N=3: (2000 // 3 + 30) * 3 = (666 + 30) * 3 = 2088 (not 2000/3*3 + 90 = 2090)
    assert rr.state().start_count == 2088


def test_rr_reseeds_start_idx_when_start_count_expires():
    rr, rng = rr_with_start(0, 5)
    snap = cluster(AB)
    # Call 1 seeds start_idx=0 and start_count=2240. Calls 2..2240 count it down to 1.
    out = files(rr, snap, 1, 2240)
    assert rr.state().start_count == 1
    assert rng.asked == [8]
    # Without a reseed call 2241 would read slot 2240 % 8 = 0 (OST 0). Its start_count
    # reaches 0, so start_idx is re-seeded to 5 (scripted) -> slot 5 -> OST 6, and
    # start_count is reset to 2240.
    assert out[-1] == (AB_ARRAY[2239 % 8],)
    assert files(rr, snap, 1, 1) == [(6,)]
    assert rng.asked == [8, 8]
    assert rr.state().start_count == 2240
    assert rr.state().start_idx == 6


SIX = [("a", [0, 1]), ("b", [2, 3]), ("c", [4, 5])]
# N=6, three OSSes with 2 OSTs:
#   a: OST0 -> 0; OST1 -> 1*6/2=3
#   b: OST2 -> 0 -> 1; OST3 -> 3 -> 4
#   c: OST4 -> 0,1 -> 2; OST5 -> 3,4 -> 5
SIX_ARRAY = [0, 2, 4, 1, 3, 5]


def test_rr_six_ost_array():
    assert array_of(cluster(SIX)) == SIX_ARRAY


def test_rr_offset_advances_when_start_idx_wraps():
    rr, _ = rr_with_start(0)
    # count=4, N=6, 6 % 4 = 2 != 1, so a wrap advances offset_idx.
    #   call 1: seed start_idx 0; slots 0,1,2,3 -> 0,2,4,1; start_idx 4
    #   call 2: 4 <= 6, no wrap; slots 4,5,0,1 -> 3,5,0,2; start_idx 8
    #   call 3: 8 > 6 -> start_idx 8 % 6 = 2, offset_idx 1; slots 3,4,5,0 -> 1,3,5,0
    assert files(rr, cluster(SIX), 4, 3) == [(0, 2, 4, 1), (3, 5, 0, 2), (1, 3, 5, 0)]
    assert rr.state().offset_idx == 1
    assert rr.state().start_idx == 6


def test_rr_offset_stays_when_n_mod_count_is_one():
    rr, _ = rr_with_start(0)
    # A={0,1,2}, B={3,4}, N=5:
    #   A: OST0 -> 0; OST1 -> 5/3=1; OST2 -> 10/3=3
    #   B: OST3 -> 0,1 -> 2; OST4 -> 5/2=2 -> 2,3 -> 4       array 0,1,3,2,4
    # count=4, 5 % 4 = 1: the file count already precesses, offset_idx never moves.
    #   call 1: slots 0,1,2,3 -> 0,1,3,2; start_idx 4
    #   call 2: 4 <= 5; slots 4,0,1,2 -> 4,0,1,3; start_idx 8
    #   call 3: 8 > 5 -> 3, offset stays 0; slots 3,4,0,1 -> 2,4,0,1
    snap = cluster([("A", [0, 1, 2]), ("B", [3, 4])])
    assert array_of(snap) == [0, 1, 3, 2, 4]
    assert files(rr, snap, 4, 3) == [(0, 1, 3, 2), (4, 0, 1, 3), (2, 4, 0, 1)]
    assert rr.state().offset_idx == 0


def test_rr_offset_stays_for_single_stripe_files():
    rr, _ = rr_with_start(0)
    # count=1 (6 % 1 = 0 != 1, but count > 1 is required): 20 files wrap three times.
    out = files(rr, cluster(SIX), 1, 20)
    assert rr.state().offset_idx == 0
    assert [f[0] for f in out] == [SIX_ARRAY[k % 6] for k in range(20)]


def test_rr_full_width_files_rotate_by_one_slot_each():
    rr, _ = rr_with_start(0)
    # count=-1 -> 6 = N: every later call wraps (count >= N) and 6 % 6 = 0 != 1, so
    # offset_idx goes 1, 2, ...: file k starts at slot k-1.
    out = files(rr, cluster(SIX), -1, 3)
    assert out == [tuple(SIX_ARRAY), tuple(SIX_ARRAY[1:] + SIX_ARRAY[:1]),
                   tuple(SIX_ARRAY[2:] + SIX_ARRAY[:2])]
    assert rr.state().offset_idx == 2


def test_rr_does_not_wrap_when_start_idx_equals_n():
    rr, _ = rr_with_start(0)
    # A={0,1}, B={2,3}, N=4: A: 0 -> 0, 1 -> 2; B: 2 -> 1, 3 -> 3; array 0,2,1,3.
    # count=2 (4 % 2 = 0 != 1):
    #   call 1: slots 0,1 -> 0,2; start_idx 2
    #   call 2: slots 2,3 -> 1,3; start_idx 4
    #   call 3: 4 > 4 is false and 2 >= 4 is false: no wrap; slots 4%4=0, 1 -> 0,2; start 6
    #   call 4: 6 > 4 -> 6 % 4 = 2, offset_idx 1; slots 3, 0 -> 3,0; start_idx 4
    #   call 5: no wrap; slots (4+1)%4=1, 2 -> 2,1; start_idx 6
    # (The notes' ">= N" rule would wrap in call 3 and give (2,1) there.)
    snap = cluster([("A", [0, 1]), ("B", [2, 3])])
    assert files(rr, snap, 2, 5) == [(0, 2), (1, 3), (0, 2), (3, 0), (2, 1)]
    assert rr.state().offset_idx == 1


# -- the three passes -------------------------------------------------------------------

def test_rr_first_pass_skips_ost_without_precreated_objects():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, ost0=dict(files_precreated=0))
    # slot 0 holds OST0, which has no precreated objects: pass 0 moves on to slots 1,2.
    assert files(rr, snap, 2, 1) == [(4, 1)]


def test_rr_later_pass_takes_ost_without_precreated_objects_when_nothing_else_left():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, ost4=dict(files_precreated=0))
    # count 8 = all. Pass 0 from slot 0: 0, (4 skipped), 1,5,2,6,3,7 -> 7 stripes.
    # Pass 1 restarts at slot 0: 0 already taken, then OST4 (precreation no longer
    # required) -> 8 stripes, in the order found.
    assert files(rr, snap, -1, 1) == [(0, 1, 5, 2, 6, 3, 7, 4)]


def test_rr_degraded_ost_is_taken_only_in_the_last_pass():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, ost4=dict(flags=OstFlag.DEGRADED), ost5=dict(files_precreated=0))
    # Pass 0: 0, (4 degraded), 1, (5 not precreated), 2, 6, 3, 7
    # Pass 1: 5 (precreation no longer needed); 4 still skipped as DEGRADED
    # Pass 2: 4
    assert files(rr, snap, -1, 1) == [(0, 1, 2, 6, 3, 7, 5, 4)]


def test_rr_prefers_healthy_osts_over_degraded_ones():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, ost0=dict(flags=OstFlag.DEGRADED), ost4=dict(flags=OstFlag.DEGRADED))
    # start slot 0: slots 0 (OST0) and 1 (OST4) are DEGRADED: pass 0 takes slots 2,3.
    assert files(rr, snap, 2, 1) == [(1, 5)]


def test_rr_single_stripe_on_all_degraded_cluster_uses_last_pass():
    rr, _ = rr_with_start(2)
    degraded = {f"ost{i}": dict(flags=OstFlag.DEGRADED) for i in range(8)}
    # Passes 0 and 1 find nothing; pass 2 restarts at slot 2 -> OST1.
    assert files(rr, cluster(AB, **degraded), 1, 1) == [(1,)]


def test_rr_each_pass_restarts_from_the_start_idx_of_the_call():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, ost4=dict(files_precreated=0))
    # File 1 (count 8): pass 0 walks 8 slots (start_idx 0 -> 8); pass 1 restarts at
    # start_idx 0 and walks slot 0 (duplicate) and slot 1 (OST4): start_idx ends at 2.
    files(rr, snap, -1, 1)
    assert rr.state().start_idx == 2
    # File 2 (count 2): 2 <= 8, no wrap, offset stays 0: slots 2,3 -> OSTs 1,5.
    # (Continuing pass 1 from start_idx 8 would end at 10, wrap and advance offset_idx,
    # giving slots 3,4 -> 5,2.)
    assert files(rr, snap, 2, 1) == [(1, 5)]
    assert rr.state().offset_idx == 0


def test_rr_skips_unusable_osts_in_every_pass():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, ost0=dict(active=False), ost4=dict(flags=OstFlag.ENOSPC),
                   ost1=dict(flags=OstFlag.READONLY), ost5=dict(flags=OstFlag.NOPRECREATE),
                   ost2=dict(flags=OstFlag.ENOINO, files_precreated=0))
    # Usable: 6, 3, 7 (slots 5, 6, 7). -1 -> 3 stripes in slot order.
    assert files(rr, snap, -1, 1) == [(6, 3, 7)]


def test_rr_returns_fewer_stripes_when_walk_finds_fewer():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, ost0=dict(flags=OstFlag.ENOSPC), ost1=dict(flags=OstFlag.ENOSPC),
                   ost2=dict(flags=OstFlag.ENOSPC), ost3=dict(flags=OstFlag.ENOSPC),
                   ost4=dict(flags=OstFlag.ENOSPC), ost5=dict(flags=OstFlag.ENOSPC))
    # Lustre clips the count to *active* OSTs, so RR can be asked for more stripes than
    # there are usable OSTs and succeeds with what it found. allocate() already clips to
    # usable OSTs, so this is exercised through select() (the walk QOS falls back to).
    got = rr.select(snap, snap.osts, None, 4)
    assert got == [6, 7]  # slots 5, 7 in array order


def test_rr_walk_raises_enospc_when_no_ost_found():
    rr, _ = rr_with_start(0)
    snap = cluster(AB, **{f"ost{i}": dict(flags=OstFlag.ENOSPC) for i in range(8)})
    with pytest.raises(NoSpaceError):
        rr.select(snap, snap.osts, None, 2)
    with pytest.raises(NoSpaceError):
        rr.allocate(snap, CreateRequest("job", 2))


def test_rr_empty_pool_shares_the_global_rr_state():
    # "empty pool = no pool": LOD drops the pool and uses the file system's RR state,
    # so files with and without the empty pool continue one walk.
    rr, rng = rr_with_start(0)
    snap = cluster(AB, pools={"empty": frozenset()})
    out = [rr.allocate(snap, CreateRequest("job", 1, pool=pool)).osts[0]
           for pool in (None, "empty", None, "empty")]
    assert out == AB_ARRAY[:4]
    assert rng.asked == [8]


def test_rr_pools_keep_separate_rr_states():
    rr, rng = rr_with_start(0, 1)
    snap = cluster(AB, pools={"p": frozenset({0, 1, 4, 5})})
    # Pool p, N=4 (divisor 4 = OSS total): A: 0 -> 0, 1 -> 1; B: 4 -> 2, 5 -> 1*4/4=1 -> 3
    # array 0,1,4,5; the global array is AB_ARRAY. Each has its own seed (0 and 1).
    assert rr.allocate(snap, CreateRequest("j", 1)).osts == (0,)            # global slot 0
    assert rr.allocate(snap, CreateRequest("j", 1, pool="p")).osts == (1,)  # pool slot 1
    assert rr.allocate(snap, CreateRequest("j", 1)).osts == (4,)            # global slot 1
    assert rr.allocate(snap, CreateRequest("j", 1, pool="p")).osts == (4,)  # pool slot 2
    assert rng.asked == [8, 4]


def test_rr_pool_array_is_rebuilt_when_an_oss_gains_osts_outside_the_pool():
    # Adding OSTs sets LOD's RR DIRTY flag and changes lsq_tgt_count, which spaces the
    # pool's array even for OSTs that are not pool members.
    rr, _ = rr_with_start(0)
    pool = {"p": frozenset({0, 1, 4, 5})}
    # Before: A and B have 4 OSTs each, N=4.
    #   A: OST0 -> 0; OST1 -> 1*4/4 = 1.  B: OST4 -> 0,1 -> 2; OST5 -> 1,2 -> 3
    assert rr.allocate(cluster(AB, pools=pool), CreateRequest("j", 1, pool="p")).osts == (0,)
    assert rr.state("p").array == [0, 1, 4, 5]
    # After: B serves 6 OSTs (8 and 9 added, not in the pool) and sorts first.
    #   B: OST4 -> 0; OST5 -> 1*4/6 = 0 -> 1.  A: OST0 -> 0,1 -> 2; OST1 -> 1,2 -> 3
    grown = cluster([("A", [0, 1, 2, 3]), ("B", [4, 5, 6, 7, 8, 9])], pools=pool)
    # The walk's counters survive the rebuild: start_idx 1 -> slot 1 -> OST5.
    assert rr.allocate(grown, CreateRequest("j", 1, pool="p")).osts == (5,)
    assert rr.state("p").array == [4, 5, 0, 1]


def test_rr_results_are_valid_placements():
    rr = RoundRobin(seed=11)
    snap = cluster(AB, ost3=dict(flags=OstFlag.ENOSPC), pools={"p": frozenset({1, 2, 3, 6})})
    for count in (-1, 0, 1, 2, 3, 5, 9):
        for pool in (None, "p"):
            osts = rr.allocate(snap, CreateRequest("j", count, pool=pool)).osts
            check_placement(snap, osts, pool)


class _ReferenceWalk(RoundRobin):
    """The RR walk as first restated, slot by slot with every filter tested in place (the
    production walk reads per-version slot levels and takes a shortcut when every slot
    passes the first pass): both must pick the same OSTs and leave the same counters."""

    def select(self, snapshot, members, pool, count):
        from lustre_alloc.mapper.policies.round_robin import LOV_CREATE_RESEED_MIN, LOV_CREATE_RESEED_MULT
        from lustre_alloc.mapper.state.ost_health import is_usable
        st = self._state_for(snapshot, members, pool)
        n = len(st.array)
        st.start_count -= 1
        if st.start_count <= 0:
            st.start_idx = self._rng.randrange(n)
            st.start_count = (LOV_CREATE_RESEED_MIN // n + LOV_CREATE_RESEED_MULT) * n
        elif count >= n or st.start_idx > n:
            st.start_idx %= n
            if count > 1 and n % count != 1:
                st.offset_idx += 1
        chosen, taken = [], set()
        call_start = st.start_idx
        for speed in range(3):
            st.start_idx = call_start
            for _ in range(n):
                if len(chosen) >= count:
                    break
                pos = (st.start_idx + st.offset_idx) % n
                st.start_idx += 1
                idx = st.array[pos]
                if idx is None or idx in taken:
                    continue
                ost = st.members[idx]
                if not is_usable(ost):
                    continue
                if speed == 0 and ost.files_precreated == 0:
                    continue
                if speed < 2 and ost.flags & OstFlag.DEGRADED:
                    continue
                chosen.append(idx)
                taken.add(idx)
            if len(chosen) >= count:
                break
        if not chosen:
            raise NoSpaceError("round-robin found no usable OST")
        return chosen


@pytest.mark.parametrize("seed", range(12))
def test_rr_walk_matches_the_slot_by_slot_reference(seed):
    rng = random.Random(seed)
    per = {o: rng.randint(1, 5) for o in range(rng.randint(1, 6))}
    osts, i = [], 0
    for oss, k in per.items():
        for _ in range(k):
            osts.append(OstState(i, f"oss{oss}", 1 << 30, 1 << 29, 1 << 29))
            i += 1
    pools = {"p": frozenset(rng.sample(range(i), max(1, i // 2))), "empty": frozenset()}
    snap = ClusterSnapshot(osts, {}, pools=pools, version=1)
    fast, ref = RoundRobin(seed), _ReferenceWalk(seed)
    for call in range(400):
        if call % 25 == 0:          # a new statistics version: some OSTs change state
            for o in snap.osts:
                o.flags = OstFlag.NONE
                o.files_precreated = 128
                o.active = True
                roll = rng.random()
                if roll < 0.15:
                    o.flags = OstFlag.DEGRADED
                elif roll < 0.25:
                    o.files_precreated = 0
                elif roll < 0.3:
                    o.active = False
                elif roll < 0.35:
                    o.flags = OstFlag.ENOSPC
                elif roll < 0.4:
                    o.flags = OstFlag.DEGRADED
                    o.files_precreated = 0
            if call % 50 == 0:      # and sometimes every OST is ready
                for o in snap.osts:
                    o.flags, o.files_precreated, o.active = OstFlag.NONE, 128, True
            snap.changed()
        req = CreateRequest("j", rng.choice([1, 2, 3, 4, 8, -1, i, i + 3]),
                            pool=rng.choice([None, "p", "empty"]))
        results = []
        for policy in (fast, ref):
            try:
                results.append(policy.allocate(snap, req).osts)
            except NoSpaceError as exc:
                results.append(("ENOSPC", str(exc)))
        assert results[0] == results[1], call
        for pool in (None, "p"):
            a, b = fast.state(pool), ref.state(pool)
            assert (a is None) == (b is None)
            if a is not None:
                assert (a.start_idx, a.start_count, a.offset_idx) == \
                    (b.start_idx, b.start_count, b.offset_idx)


def _probing_rr_array(members, server_ost_count, server_order):
    """lod_qos_calc_rr as written: probe slot by slot for the next empty one."""
    n = len(members)
    slots = [None] * n
    by_server: dict = {}
    for ost in members:
        by_server.setdefault(ost.oss, []).append(ost)
    for server in sorted(server_order, key=lambda s: -server_ost_count[s]):
        for j, ost in enumerate(by_server.get(server, ())):
            pos = j * n // server_ost_count[server]
            while slots[pos] is not None:
                pos = (pos + 1) % n
            slots[pos] = ost.index
    return slots


@pytest.mark.parametrize("seed", range(40))
def test_rr_array_equals_slot_by_slot_probing(seed):
    """The next-free-slot forest gives the slots of Lustre's one-by-one probing, with
    uneven OSSes, pool subsets and interleaved connection orders."""
    rng = random.Random(seed)
    n_oss = rng.randint(1, 40)
    osts = [OstState(i, f"oss{rng.randrange(n_oss)}", 1 << 20, 1 << 19, 1 << 19)
            for i in range(rng.randint(1, 300))]
    order: list[str] = []
    counts: dict[str, int] = {}
    for o in osts:
        if o.oss not in counts:
            order.append(o.oss)
        counts[o.oss] = counts.get(o.oss, 0) + 1
    members = [o for o in osts if rng.random() < 0.7] or osts[:1]
    assert build_rr_array(members, counts, order) == _probing_rr_array(members, counts, order)
