"""mapper.flow.round_solve: dealing an aggregated class into lists, the per-OST slot bound,
and the planning job solved the same wherever it runs."""
from __future__ import annotations

import pickle
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mapper.flow.costs import ConvexCost, RateCost
from mapper.flow.network import RoundRequest
from mapper.flow.round_solve import build_network
from mapper.flow.round_solve import PlanJob, deal, slot_cap, solve_plan
from mapper.flow.solver import solve_ortools
from mapper.state.arrays import OstTable, ost_arrays
from mapper.state.cluster_state import make_uniform_cluster

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
