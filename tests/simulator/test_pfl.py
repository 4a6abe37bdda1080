"""Composite (PFL) layouts in the simulator: each file is placed
component by component through the same request rule as the mapper's composite ``alloc``,
a file's bytes past a component's end go to the next component's OSTs, so where a later
component goes shows in the job's I/O time."""
from __future__ import annotations

import numpy as np
import pytest

from lustre_alloc.mapper.policies.composite import LUSTRE_EOF
from lustre_alloc.simulator.client_ops import bytes_per_slot
from lustre_alloc.simulator.create_path import CreatePath
from lustre_alloc.simulator.inflight import SimFile
from lustre_alloc.simulator.runner import prepare, run_policy
from lustre_alloc.simulator.scenario import ScenarioError, load_scenario

from .conftest import rec, small

MIB, GIB = 1 << 20, 1 << 30
# lfs setstripe -E 1M -c 1 -E -1 -c 2
TWO = """
[layout]
pfl = [{ end_bytes = 1048576, stripe_count = 1 }, { end_bytes = -1, stripe_count = 2 }]
"""


def _with_layout(body: str, layout: str = TWO) -> str:
    return body.replace("\n[[workload]]", layout + "\n[[workload]]", 1)


def test_bytes_fill_each_component_in_turn_raid0_within_it():
    f = SimFile("a", np.arange(13), MIB, comps=((0, MIB, 0, 1), (MIB, GIB, 1, 4),
                                                 (GIB, LUSTRE_EOF, 5, 8)))
    assert bytes_per_slot(f, 512 << 10).tolist() == [512 << 10] + [0] * 12
    # 3 MiB: the first MiB in component 0; chunks 1 and 2 (by file offset, as LOV
    # numbers them) on stripes 1 and 2 of component 1
    assert bytes_per_slot(f, 3 * MIB).tolist() == [MIB, 0, MIB, MIB] + [0] * 9
    # past 1 GiB: component 1 full (chunks 1..1023 over 4 stripes), the rest over the 8
    got = bytes_per_slot(f, GIB + 8 * MIB)
    assert got[:5].tolist() == [MIB, 255 * MIB, 256 * MIB, 256 * MIB, 256 * MIB]
    assert got[5:].tolist() == [MIB] * 8
    assert got.sum() == GIB + 8 * MIB


def test_a_files_bytes_past_the_first_component_land_on_the_next_components_osts(
        make_scenario):
    sc = load_scenario(make_scenario(_with_layout(small()),
                                     [rec(0, "write", "a", "f", 201 * MIB, sc=4)]))
    assert sc.pfl == ((MIB, 1), (LUSTRE_EOF, 2))
    r = run_policy(sc, prepare(sc), "round_robin")
    grown = r.ost_used_hourly[-1] - r.ost_used_hourly[0]
    # the trace's stripe count 4 is not used: 1 MiB on one OST, 200 MiB over two
    assert sorted(grown.tolist()) == [0, MIB, 100 * MIB, 100 * MIB]
    assert r.counters["creates"] == 1
    assert r.apps["a"].io_time_s == pytest.approx(1.0, rel=0.02)   # 100 MiB at 100 MiB/s


def test_where_the_later_component_goes_shows_in_the_files_write_time(make_scenario,
                                                                      monkeypatch):
    # OST 0 at a tenth of its speed, unflagged (a slow drive): the file whose second
    # component holds OST 0 writes its bulk at 10 MiB/s there, whatever its first MiB does
    placed: dict[str, list] = {}
    place = CreatePath.place

    def spy(self, view, record, app):
        placed[record.file_id] = out = place(self, view, record, app)
        return out

    monkeypatch.setattr(CreatePath, "place", spy)
    body = _with_layout(small(duration=600)).replace(
        "\n[[workload]]", '\n[[event]]\nkind = "degrade"\nat_s = 0\nost = 0\nfraction = 0.1\n'
        'flagged = false\n\n[[workload]]', 1)
    sc = load_scenario(make_scenario(body, [rec(0, "write", "a", "f", 201 * MIB),
                                            rec(100, "write", "b", "g", 201 * MIB)]))
    r = run_policy(sc, prepare(sc), "round_robin")
    assert [len(c) for c in placed["f"]] == [1, 2] == [len(c) for c in placed["g"]]
    for app, fid in (("a", "f"), ("b", "g")):
        slow_bulk = 0 in placed[fid][1]
        # 100 MiB a stripe: at 10 MiB/s on OST 0, else at 100 MiB/s
        assert r.apps[app].io_time_s == pytest.approx(10.0 if slow_bulk else 1.0, rel=0.05)
    assert {0 in placed["f"][1], 0 in placed["g"][1]} == {True, False}   # both cases seen


def test_a_composite_file_with_two_components_on_one_ost_is_one_stream_to_it(make_scenario):
    # three OSTs for four stripes: round-robin must reuse one across the components
    layout = TWO.replace("stripe_count = 2 }", "stripe_count = 4 }")
    sc = load_scenario(make_scenario(_with_layout(small(), layout),
                                     [rec(0, "write", "a", "f", 5 * MIB)]))
    r = run_policy(sc, prepare(sc), "round_robin")
    grown = r.ost_used_hourly[-1] - r.ost_used_hourly[0]
    assert grown.sum() == 5 * MIB and sorted(grown.tolist()) == [MIB, MIB, MIB, 2 * MIB]


@pytest.mark.parametrize("layout, why", [
    ("pfl = [{ end_bytes = 1048576, stripe_count = 1 }]", "only the last"),
    ("pfl = [{ end_bytes = 1000, stripe_count = 1 }, { end_bytes = -1, stripe_count = 1 }]",
     "multiple of 65536"),
    ("pfl = [{ end_bytes = 2097152, stripe_count = 1 }, { end_bytes = 1048576, stripe_count = 1 },"
     " { end_bytes = -1, stripe_count = 1 }]", "above the previous"),
    ("pfl = [{ end_bytes = -1, stripe_count = 0 }]", "stripe_count"),
    ("pfl = [{ end_bytes = -1, stripe_count = 9 }]", "stripe_count: must be <= 4"),
    ("pfl = [{ end_bytes = -1, stripe_count = 1, pool = 'x' }]", "pool: unknown key"),
])
def test_a_bad_pfl_layout_is_refused_naming_its_key(make_scenario, layout, why):
    with pytest.raises(ScenarioError, match=why) as e:
        load_scenario(make_scenario(_with_layout(small(), f"\n[layout]\n{layout}\n"),
                                    [rec(0, "write", "a", "f", MIB)]))
    assert "layout.pfl[" in str(e.value)


def test_the_bundled_pfl_world_is_straggler_ost_with_the_references_pfl_default():
    pfl, plain = load_scenario("straggler-ost-pfl"), load_scenario("straggler-ost")
    assert pfl.pfl == ((MIB, 1), (GIB, 4), (LUSTRE_EOF, 8))
    assert (pfl.cluster, pfl.workloads, pfl.events) == (plain.cluster, plain.workloads,
                                                        plain.events)


def test_composite_files_are_asked_per_create_behind_leases(make_scenario):
    """The shim leases flat layouts only (a PFL create sends one v2 composite alloc), so
    under ``<policy>+lease`` a composite file's components are decided per create, and
    the run equals the policy's own."""
    recs = [rec(1 + i, "write", "a", f"f{i}", 3 * MIB) for i in range(20)]
    sc = load_scenario(make_scenario(_with_layout(small(duration=120)), recs))
    leased = run_policy(sc, prepare(sc), "round_robin+lease")
    own = run_policy(sc, prepare(sc), "round_robin")
    assert leased.notes.get("leased", 0) == 0
    assert leased.counters["creates"] == own.counters["creates"] == 20
    assert np.array_equal(leased.ost_used_hourly, own.ost_used_hourly)
    flat = load_scenario(make_scenario(small(duration=120), recs, name="flat"))
    assert run_policy(flat, prepare(flat), "round_robin+lease").notes["leased"] == 20
