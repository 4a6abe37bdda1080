"""File sizes in the simulator: with the ``"at_close"`` hint (the shim's
``LUSTRE_ALLOC_SIZES=1``) each managed file reports its final size when its writes have landed,
through the policy's own ``learn_sizes`` (the service's path); without it (the shim's default)
nothing is reported; the ``"final"`` hint announces the size at create instead; an unmanaged
job reports nothing."""
from __future__ import annotations

import pytest

from lustre_alloc.mapper.policies.mcmf.policy import McmfPolicy
from lustre_alloc.simulator.file_sizes import final_sizes
from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy
from lustre_alloc.simulator.scenario import load_scenario

from .conftest import rec, small

MIB = 1 << 20
# job "a" writes four files in two records each (3 + 5 MiB), then "b" one of 2 MiB
RECORDS = [r for i in range(4) for r in (rec(10 * i, "write", "a", f"a{i}", 3 * MIB),
                                         rec(10 * i + 1, "write", "a", f"a{i}", 5 * MIB))] + \
          [rec(50, "write", "b", "b0", 2 * MIB)]


def _run(make_scenario, body: str):
    sc = load_scenario(make_scenario(body, RECORDS))
    policy = scenario_policy(sc, "mcmf")
    sim = build_simulation(sc, prepare(sc), policy)
    asked = []
    request = sim.creates.request
    sim.creates.request = lambda r: asked.append(request(r)) or asked[-1]
    sim.run()
    return policy.primary, asked


def test_final_sizes_add_up_each_files_writes():
    assert final_sizes(RECORDS) == {**{f"a{i}": 8 * MIB for i in range(4)}, "b0": 2 * MIB}


AT_CLOSE = 'trace = "t.csv"\nsize_hint = "at_close"'


def test_by_default_nothing_is_reported(make_scenario):
    mcmf, asked = _run(make_scenario, small(policies='["mcmf"]'))
    assert all(r.expected_bytes == 0 for r in asked)
    assert mcmf.predictor.app_info("a") is None


def test_closed_files_teach_the_policy_their_final_sizes(make_scenario):
    mcmf, asked = _run(make_scenario, small(policies='["mcmf"]').replace('trace = "t.csv"',
                                                                           AT_CLOSE))
    assert isinstance(mcmf, McmfPolicy) and all(r.expected_bytes == 0 for r in asked)
    a = mcmf.predictor.app_info("a")
    # one report per file, at its final size (not per write record)
    assert a.requests == 4 and a.mean_bytes == 8 * MIB
    assert mcmf.predictor.app_info("b").requests == 1


def test_a_create_that_announces_its_size_reports_nothing_at_close(make_scenario):
    body = small(policies='["mcmf"]').replace('trace = "t.csv"',
                                              'trace = "t.csv"\nsize_hint = "final"')
    mcmf, asked = _run(make_scenario, body)
    assert sorted(r.expected_bytes for r in asked) == [2 * MIB] + [8 * MIB] * 4
    # learned once, at create (from the announced size): no second report at close
    assert mcmf.predictor.app_info("a").requests == 4


def test_an_unmanaged_job_reports_nothing(make_scenario):
    body = small(policies='["mcmf"]').replace('trace = "t.csv"', AT_CLOSE + '\nmanaged = false')
    mcmf, _ = _run(make_scenario, body)
    assert mcmf.predictor.app_info("a") is None
