"""The steering controller's rule and its safety: enter/leave with hysteresis and
dwell, the share and pool rules, free space, someone else's flags, leases, bounded retries."""
from __future__ import annotations

import pytest

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstFlag, make_uniform_cluster
from lustre_alloc.mapper.steer.controller import MAX_DWELL_DOUBLINGS, SteerController, SteerParams

FAST = 700e6
SLOW = FAST / 50


def world(n: int = 20, pools: dict | None = None) -> ClusterSnapshot:
    snap = make_uniform_cluster(n, 1, 1 << 30)
    if pools:
        snap.pools = {k: frozenset(v) for k, v in pools.items()}
    return snap


def sample(snap: ClusterSnapshot, t: float, speed: dict[int, float | None]) -> ClusterSnapshot:
    """Every OST busy at FAST (or ``speed[i]``; None: idle, no evidence) in the interval
    ending at ``t``."""
    for o in snap.osts:
        v = speed.get(o.index, FAST)
        o.sample_time_s = t
        o.write_bytes_per_s = v
        o.write_latency_s = None if v is None else (1 << 20) / v
    snap.time_s = t
    return snap


def run(ctl: SteerController, snap: ClusterSnapshot, t0: float, t1: float,
        speed: dict[int, float | None], step: float = 5.0):
    out = []
    t = t0
    while t < t1:
        out.append((t, ctl.evaluate(sample(snap, t, speed), t)))
        t += step
    return out


def test_a_slow_ost_is_steered_and_uniform_worlds_see_no_action():
    ctl = SteerController(SteerParams(mode="on", confirm_s=600))
    snap = world()
    assert all(not d for _, d in run(ctl, snap, 0, 600, {}))       # uniform: nothing
    assert ctl.counts["applied"] == 0
    # the estimate falls by smoothing (0.05 a sample): below the threshold after about
    # 20 samples, then steered once it stayed there for confirm_s
    applied = [(t, d.apply) for t, d in run(ctl, snap, 600, 2000, {3: SLOW}) if d.apply]
    assert len(applied) == 1 and 600 + 600 < applied[0][0] < 600 + 600 + 300
    t, (act,) = applied[0]
    assert act.ost == 3 and act.kind == "degraded" and "slow" in act.reason
    assert act.since_s == t and act.until_s >= t + ctl.params.action_lease_s   # renewed since
    view = ctl.steered_view(snap)
    assert view.osts[3].flags & OstFlag.DEGRADED and not snap.osts[3].flags   # a copy


def test_drain_action_sets_noprecreate_in_the_view():
    ctl = SteerController(SteerParams(mode="on", confirm_s=0, action="drain"))
    snap = world()
    ctl.evaluate(sample(snap, 5, {2: SLOW}), 5)
    assert ctl.steered_view(snap).osts[2].flags & OstFlag.NOPRECREATE


def test_never_more_than_the_share_slowest_first():
    ctl = SteerController(SteerParams(mode="on", confirm_s=0, max_fraction=0.1))
    snap = world(20)
    speeds = {i: SLOW * (1 + i / 10) for i in range(6)}       # six slow OSTs, 0 the slowest
    d = ctl.evaluate(sample(snap, 5, speeds), 5)
    assert sorted(a.ost for a in d.apply) == [0, 1]            # floor(0.1 * 20) = 2
    assert ctl.counts["refused"] == 4


def test_never_all_of_a_pool_and_the_pool_share_holds():
    ctl = SteerController(SteerParams(mode="on", confirm_s=0, max_fraction=0.5))
    snap = world(20, pools={"small": [0, 1]})
    d = ctl.evaluate(sample(snap, 5, {0: SLOW, 1: SLOW}), 5)
    assert len(d.apply) == 1                                   # one of the pool's two stays


def test_never_the_last_free_space():
    ctl = SteerController(SteerParams(mode="on", confirm_s=0, max_fraction=0.5, min_free_share=0.5))
    snap = world(8)
    for o in snap.osts:                      # OST 0 holds most of the free space
        o.kbytes_avail = 10 if o.index else 1 << 20
    d = ctl.evaluate(sample(snap, 5, {0: SLOW}), 5)
    assert not d.apply and ctl.counts["refused"] == 1


def test_someone_elses_flag_is_left_alone():
    ctl = SteerController(SteerParams(mode="on", confirm_s=0))
    snap = world()
    snap.osts[4].flags = OstFlag.DEGRADED             # a RAID script's flag
    d = ctl.evaluate(sample(snap, 5, {4: SLOW}), 5)
    assert not d.apply and 4 not in ctl.active


def test_hysteresis_flapping_evidence_gives_no_flapping_actions():
    p = SteerParams(mode="on", confirm_s=0, rate_smoothing=1.0, min_dwell_s=60)
    ctl = SteerController(p)
    snap = world()
    ctl.evaluate(sample(snap, 5, {3: SLOW}), 5)
    assert 3 in ctl.active
    # evidence flaps between 1/4 and 1/2 of the median (inside the band 1/3..1/1.5 and
    # across the enter threshold) for an hour: one action, never undone
    log = []
    t = 10.0
    for k in range(700):
        d = ctl.evaluate(sample(snap, t, {3: FAST / (4 if k % 2 else 2)}), t)
        log += d.apply + d.undo
        t += 5
    assert log == [] and 3 in ctl.active


def test_recovery_returns_after_the_dwell_and_leases_are_renewed():
    p = SteerParams(mode="on", confirm_s=0, rate_smoothing=1.0, min_dwell_s=300, action_lease_s=120)
    ctl = SteerController(p)
    snap = world()
    ctl.evaluate(sample(snap, 0, {3: SLOW}), 0)
    renewed = [t for t, d in run(ctl, snap, 5, 200, {3: SLOW}) if d.renew]
    assert renewed and renewed[0] >= 60                          # once less than half left
    assert ctl.active[3].until_s >= 195 + 60                     # kept alive by renewals
    events = run(ctl, snap, 200, 400, {})                        # healthy again
    undone = [(t, d.undo[0]) for t, d in events if d.undo]
    assert len(undone) == 1 and undone[0][0] >= 300              # not before the dwell
    assert undone[0][1].ost == 3 and "recovered" in undone[0][1].reason
    assert 3 not in ctl.active


def test_a_still_slow_ost_is_retried_less_and_less():
    p = SteerParams(mode="on", confirm_s=0, rate_smoothing=1.0, min_dwell_s=100, action_lease_s=400)
    ctl = SteerController(p)
    snap = world()
    dwell = []
    t = 0.0
    for _ in range(MAX_DWELL_DOUBLINGS + 2):
        ctl.evaluate(sample(snap, t, {3: SLOW}), t)
        assert 3 in ctl.active
        dwell.append(ctl.dwell_s(3))
        while 3 in ctl.active:           # idle (healthy-looking) until returned
            t += 5
            ctl.evaluate(sample(snap, t, {}), t)
        t += 5                           # still slow at the next sample
    assert dwell == [100, 200, 400, 800, 1600, 1600]


def test_a_strike_keeps_the_time_the_ost_was_first_steered_for_slowness():
    """``slow_since_s`` (what the migration service counts from) survives a probe that finds
    the OST still slow, and restarts after a return that lasted ``action_lease_s``."""
    p = SteerParams(mode="on", confirm_s=0, rate_smoothing=1.0, min_dwell_s=100, action_lease_s=400)
    ctl = SteerController(p)
    snap = world()
    ctl.evaluate(sample(snap, 0.0, {3: SLOW}), 0.0)
    first = ctl.active[3]
    assert first.slow_since_s == first.since_s == 0.0
    t = 0.0
    while 3 in ctl.active:                   # returned once its estimate looks healthy
        t += 5
        ctl.evaluate(sample(snap, t, {}), t)
    t += 5
    ctl.evaluate(sample(snap, t, {3: SLOW}), t)     # still slow: a strike
    again = ctl.active[3]
    assert again.since_s == t and again.slow_since_s == 0.0
    assert again.as_dict()["slow_since_s"] == 0.0
    while 3 in ctl.active:
        t += 5
        ctl.evaluate(sample(snap, t, {}), t)
    t += p.action_lease_s + 5                       # healthy for longer than a lease: a new spell
    ctl.evaluate(sample(snap, t, {3: SLOW}), t)
    assert ctl.active[3].slow_since_s == t


def test_too_few_measured_osts_undo_everything():
    ctl = SteerController(SteerParams(mode="on", confirm_s=0))
    snap = world()
    ctl.evaluate(sample(snap, 5, {3: SLOW}), 5)
    small = world(3)
    d = ctl.evaluate(sample(small, 10, {}), 10)
    assert [a.ost for a in d.undo] == [3] and not ctl.active


@pytest.mark.parametrize("table, key", [
    ({"mode": "maybe"}, "mode"), ({"action": "kill"}, "action"),
    ({"recover_factor": 4.0}, "recover_factor"), ({"max_fraction": 1.0}, "max_fraction"),
    ({"min_free_share": -1}, "min_free_share"), ({"action_lease_s": 0}, "action_lease_s"),
    ({"bogus": 1}, "bogus")])
def test_bad_steer_keys_are_named(table, key):
    with pytest.raises(ValueError, match=key):
        SteerParams.from_table(table)


def test_a_busy_spell_shorter_than_confirm_s_is_not_steered():
    """An OST that looks slow for a few minutes (busy with other streams, its RPCs queued)
    is not steered; the same OST slow for longer than confirm_s is."""
    ctl = SteerController(SteerParams(mode="on", rate_smoothing=1.0, confirm_s=300))
    snap = world()
    for start in (0, 1000, 2000):            # three 4-minute busy spells
        assert not any(d for _, d in run(ctl, snap, start, start + 240, {3: FAST / 4}))
        assert not any(d for _, d in run(ctl, snap, start + 240, start + 1000, {}))
    applied = [t for t, d in run(ctl, snap, 3000, 3400, {3: FAST / 4}) if d.apply]
    assert applied == [3300]
