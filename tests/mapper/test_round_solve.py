"""lustre_alloc.mapper.flow.ost_lists: dealing an aggregated class into lists, the per-OST slot bound,
and the planning job solved the same wherever it runs."""
from __future__ import annotations

import pickle
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.experiments.costs import ConvexCost
from lustre_alloc.mapper.flow.costs import RateCost
from lustre_alloc.mapper.flow.network import RoundRequest
from lustre_alloc.mapper.flow.ost_lists import build_network
from lustre_alloc.mapper.flow.ost_lists import PlanJob, deal, handout_ranks, slot_cap, solve_plan
from lustre_alloc.mapper.flow.solver import solve_ortools
from lustre_alloc.mapper.state.arrays import OstTable, ost_arrays
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster

MIB = 1 << 20


def arrays(oss=6, per=4, seed=1):
    rng = random.Random(seed)
    snap = make_uniform_cluster(oss, per, 100 << 20,
                                {i: rng.randrange(0, 70) << 20 for i in range(oss * per)})
    table = OstTable.from_snapshot(snap)
    return ost_arrays(table, table.usable_indices())


@st.composite
def multisets(draw):
    """An aggregated class's rows: ``lists`` x ``count`` stripes, no row more than
    ``lists`` times (what the flow can return)."""
    lists = draw(st.integers(1, 12))
    count = draw(st.integers(1, 6))
    n_rows = draw(st.integers(count, 3 * count + 4))
    left = lists * count
    copies = [0] * n_rows
    # fill rows up to `lists` copies each, in a drawn order, until the stripes are placed
    order = draw(st.permutations(range(n_rows)))
    for r in order:
        take = min(lists, left)
        if r != order[-1]:
            take = draw(st.integers(0, take))
        copies[r] = take
        left -= take
    if left:                    # the drawn copies fell short: top up (n_rows >= count)
        for r in range(n_rows):
            extra = min(lists - copies[r], left)
            copies[r] += extra
            left -= extra
    rows = [r for r, m in enumerate(copies) for _ in range(m)]
    draw(st.randoms()).shuffle(rows)
    cost = np.array(draw(st.lists(st.integers(0, 50), min_size=n_rows, max_size=n_rows)))
    return rows, lists, count, cost


@settings(max_examples=200, deadline=None, derandomize=True)
@given(multisets())
def test_deal_gives_every_list_count_distinct_osts_and_keeps_every_stripe(case):
    rows, lists, count, cost = case
    assert len(rows) == lists * count
    out = deal(rows, lists, count, cost)
    assert len(out) == lists
    for part in out:
        assert len(part) == count and len(set(part)) == count
    assert sorted(r for part in out for r in part) == sorted(rows)


def test_slot_cap_grows_with_stripes_per_ost_and_never_below_four():
    assert slot_cap(10, 3600) == 4
    assert slot_cap(4096, 3600) == 5
    assert slot_cap(720, 32) == 90


def test_max_ost_slots_bounds_the_stripes_one_ost_receives():
    osts = arrays()
    req = [RoundRequest(60, 0, 0, per_ost=10)]
    mask = [np.ones(len(osts.index), bool)]
    for bound in (3, 4):
        net = build_network(osts, req, mask, ConvexCost(), MIB, 4.0 * MIB, max_ost_slots=bound)
        flows = solve_ortools(net).flows[net.assign_arc]
        assert flows.sum() == 60 and flows.max() <= bound
    free = build_network(osts, req, mask, ConvexCost(), MIB, 4.0 * MIB)
    assert solve_ortools(free).flows[free.assign_arc].max() > 3    # the bound did bind


def test_a_pickled_job_solves_to_the_same_lists():
    osts = arrays()
    job = PlanJob(osts, (RoundRequest(40, 0, 0, per_ost=5), RoundRequest(3, 0, 1)), (10, 1),
                  (np.ones(len(osts.index), bool),), MIB, 8.0 * MIB, RateCost(),
                  max_ost_slots=slot_cap(43, len(osts.index)))
    here = solve_plan(job)
    there = solve_plan(pickle.loads(pickle.dumps(job)))
    assert here.lists == there.lists and here.placement_cost == there.placement_cost
    assert len(here.lists[0]) == 10 and all(len(set(osts_)) == 4 for _, osts_ in here.lists[0])
    assert len(here.lists[1]) == 1 and len(here.lists[1][0][1]) == 3


def _greedy_by_definition(parts, osts, model, bps):
    """One list at a time, each the cheapest on the slots its predecessors took (ties:
    the earlier list); the reference for handout_ranks' lazy heap."""
    slots = max(len(parts), 1)
    base = model.request_arc_costs(osts).astype(float)
    unit = model.unit_costs(osts, slots, bps).astype(float)
    oss = osts.oss.astype(int)
    oss_unit = model.oss_unit_costs(osts, slots, bps).astype(float) if model.has_oss_layer else None
    taken, oss_taken, ranks, left = {}, {}, {}, list(range(len(parts)))

    def cost(part):
        c = 0.0
        for r in part:
            c += base[r] + unit[r, min(taken.get(r, 0), unit.shape[1] - 1)]
            if oss_unit is not None:
                c += oss_unit[oss[r], min(oss_taken.get(oss[r], 0), oss_unit.shape[1] - 1)]
        return c
    while left:
        n = min(left, key=lambda k: (cost(parts[k]), k))
        ranks[n] = len(ranks)
        left.remove(n)
        for r in parts[n]:
            taken[r] = taken.get(r, 0) + 1
            oss_taken[oss[r]] = oss_taken.get(oss[r], 0) + 1
    return [ranks[n] for n in range(len(parts))]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), n_lists=st.integers(1, 30), count=st.integers(1, 4),
       model=st.sampled_from([RateCost(), ConvexCost()]))
def test_handout_ranks_are_the_create_by_create_greedy_order(seed, n_lists, count, model):
    osts = arrays(oss=4, per=3, seed=seed)
    rng = random.Random(seed)
    parts = [rng.sample(range(len(osts.index)), count) for _ in range(n_lists)]
    got = handout_ranks(parts, osts, model, 4.0 * MIB)
    assert sorted(got) == list(range(n_lists))
    assert got == _greedy_by_definition(parts, osts, model, 4.0 * MIB)


def test_a_burst_on_equal_osts_walks_every_oss_before_any_twice_and_every_ost_once():
    # 6 OSSes x 4 equal OSTs, every OST chosen twice: handed out by first-stripe cost (the
    # old rank) a burst took OSS 0's OSTs one after another, each twice in a row
    snap = make_uniform_cluster(6, 4, 100 << 20)
    table = OstTable.from_snapshot(snap)
    osts = ost_arrays(table, table.usable_indices())
    parts = [[r] for r in range(24) for _ in range(2)]
    ranks = handout_ranks(parts, osts, RateCost(), 4.0 * MIB)
    order = [parts[n][0] for n in sorted(range(len(parts)), key=lambda n: ranks[n])]
    oss = osts.oss.astype(int)
    assert len({oss[r] for r in order[:6]}) == 6
    assert sorted(order[:24]) == list(range(24))
    assert all(oss[a] != oss[b] for a, b in zip(order, order[1:24]))


def test_a_planned_class_is_handed_out_server_by_server():
    snap = make_uniform_cluster(6, 4, 100 << 20)
    table = OstTable.from_snapshot(snap)
    osts = ost_arrays(table, table.usable_indices())
    job = PlanJob(osts, (RoundRequest(24, 0, 0, per_ost=1),), (24,),
                  (np.ones(len(osts.index), bool),), MIB, 4.0 * MIB, RateCost())
    lists = solve_plan(job).lists[0]
    assert [rank for rank, _ in lists] == sorted(rank for rank, _ in lists)
    servers = [int(osts.oss[list(osts.index).index(o[0])]) for _, o in lists]
    assert len(set(servers[:6])) == 6 and len(set(servers[6:12])) == 6
