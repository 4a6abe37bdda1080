"""bench/learning_time.py: the share of new stripes on OSTs that slowed down without a
flag, and the time a policy takes to steer away from them and back."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from .conftest import eight_ost_world, rec, unflagged_degrade

ROOT = Path(__file__).resolve().parents[2]

WORLD = eight_ost_world("slow-spell", '["round_robin"]', unflagged_degrade(5, 900, 1500))


@pytest.fixture(scope="module")
def lt():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("learning_time", ROOT / "bench" / "learning_time.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["learning_time"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from lustre_alloc.traces.format import write_trace
    d = tmp_path_factory.mktemp("slow")
    # every 10 s a job writes four 64 MiB files, stripe count 1
    records = [rec(t, "write", f"job{t % 3}", f"/f{t}.{k}", 64 << 20)
               for t in range(0, 3600, 10) for k in range(4)]
    write_trace(d / "t.csv", records)
    (d / "slow-spell.toml").write_text(WORLD)
    return str(d / "slow-spell.toml")


def test_the_rule_on_a_made_up_log(lt):
    spell = lt.SlowSpell((3,), onset_s=100.0, recovery_s=300.0, fair_share=0.25,
                         capable_share=0.05)
    # 4 OSTs; OST 3 gets its fair share, none from the bin starting at 200 s, then
    # its share again from 400 s
    log = []
    for t in range(0, 600, 10):
        on3 = t < 200 or t >= 400
        log.append((float(t), (0, 1, 2, 3) if on3 else (0, 1, 2, 0)))
    got = lt.measure(log, spell, 100.0, 600.0)
    assert got["adapt_s"] == pytest.approx(200.0)       # end of the bin [200, 300) - onset
    assert got["return_s"] == pytest.approx(200.0)      # end of [400, 500) - recovery
    assert got["share_before"] == pytest.approx(0.25)
    assert got["share_during"] == pytest.approx(0.125)  # [100, 200) at 1/4, [200, 300) at 0
    assert got["stripes"] == 4 * 60


def test_a_world_without_an_unflagged_slowdown_is_refused(lt):
    from lustre_alloc.simulator.scenario import load_scenario
    with pytest.raises(ValueError, match="paper-32ost: no unflagged degrade"):
        lt.slow_spell(load_scenario("paper-32ost"), 32)


def test_round_robin_never_adapts_and_mcmf_adapts_and_returns(lt, world):
    rr, spell = lt.run_one(world, "round_robin", 0, 300.0)
    assert spell.osts == (5,) and spell.fair_share == pytest.approx(1 / 8)
    assert rr.adapt_s is None
    assert rr.share_during == pytest.approx(1 / 8, abs=0.01)
    mcmf, _ = lt.run_one(world, "mcmf", 0, 300.0)
    assert mcmf.adapt_s is not None and mcmf.adapt_s <= 600
    assert mcmf.share_during < (spell.fair_share + spell.capable_share) / 2
    # relaxing an OST's speed toward the others' while it shows nothing brings it back:
    # in this light world nothing else makes the avoided OST worth a stripe, so without
    # relaxing its low estimate stands (docs/history.md, "Learning time")
    relaxed, _ = lt.run_one(world, "mcmf", 0, 300.0, params={"rate_relax_s": 1800.0},
                            label="relaxed")
    assert relaxed.policy == "relaxed" and relaxed.adapt_s is not None
    assert relaxed.return_s is not None
    assert mcmf.return_s is None or relaxed.return_s < mcmf.return_s
    # the flow on every round (regime off) adapts too
    flow, _ = lt.run_one(world, "mcmf", 0, 300.0, params={"regime": False}, label="flow")
    assert flow.adapt_s is not None and flow.adapt_s <= 600
    oracle, _ = lt.run_one(world, "oracle", 0, 300.0)
    assert oracle.adapt_s is not None
