"""Lustre's QOS allocator against hand-worked penalty, weight and threshold cases.

All expected numbers are derived by hand from ``docs/reference/lustre-lod-allocator.md``
("QOS"); the arithmetic is in the comments. Units: ``ba = (kbytes_avail*1024) >> 8``
(bytes >> 8), so ``ba = 4 * kbytes_avail``. Defaults: qos_prio_free 90% -> stored 230,
``prio_wide = 256 - 230 = 26``; qos_threshold_rr 17% -> 43; qos_maxage 5 s.

The weighted draw ``r = uniform[0, total)`` is scripted: the policy's generator is
replaced by one that returns given values and records each ``total`` it was asked for,
so a test sees the total weight at every draw. The first calculation always runs with
RESET set (fresh LOD), so penalties start at 0.
"""
from __future__ import annotations

from collections import Counter

import pytest

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.mapper.policies.lustre_qos import LustreQos, pct_to_stored, stored_to_pct
from lustre_alloc.mapper.state.ost_health import check_placement
from lustre_alloc.mapper.policies.placement import CreateRequest


class ScriptedRng:
    """``randrange(n)`` returns scripted values (or ``n - 1`` for "last") and records n."""

    def __init__(self, *values):
        self.values = list(values)
        self.asked: list[int] = []

    def randrange(self, n: int) -> int:
        self.asked.append(n)
        value = self.values.pop(0) if self.values else 0
        if value == "last":
            value = n - 1
        assert 0 <= value < n, f"scripted {value} outside [0, {n})"
        return value


def snap(avail_kib: dict[int, int], oss_of: dict[int, str] | None = None, time_s: float = 1000,
         pools: dict[str, frozenset[int]] | None = None, **per_ost: dict) -> ClusterSnapshot:
    oss_of = oss_of or {}
    osts = []
    for i, avail in sorted(avail_kib.items()):
        kw = dict(kbytes_total=1 << 50, kbytes_free=avail, kbytes_avail=avail)
        kw.update(per_ost.get(f"ost{i}", {}))
        osts.append(OstState(index=i, oss=oss_of.get(i, f"oss{i}"), **kw))
    return ClusterSnapshot(osts=osts, osses={o.oss: OssState(o.oss) for o in osts},
                           pools=pools or {}, time_s=time_s)


def qos_with(*draws, **kw) -> tuple[LustreQos, ScriptedRng]:
    qos = LustreQos(seed=0, **kw)
    rng = ScriptedRng(*draws)
    qos._rng = rng  # the weighted draw's generator (lu_prandom_u64_max)
    return qos, rng


def alloc(qos: LustreQos, snapshot: ClusterSnapshot, count: int, pool: str | None = None):
    return qos.allocate(snapshot, CreateRequest("job", count, pool=pool))


# The hand-worked cluster: OSS a = {OST0, OST1}, OSS b = {OST2, OST3}.
#   kbytes_avail 1000, 2000, 3000, 4000 -> ba = 4000, 8000, 12000, 16000
#   4 active OSTs: n1 = 3; 2 servers with space: ns1 = 1
# Per-OST penalty per object (2.15: ((26*ba) >> 8) // n1 >> 1; master/2.16:
# ((26*ba) >> 9) // n1; nested floor divisions compose, so both equal 26*ba // (512*n1)):
#   OST0: 26*4000 = 104000;  >>8 = 406, //3 = 135, >>1 = 67  | >>9 = 203, //3 = 67
#   OST1: 208000;            >>8 = 812, //3 = 270, >>1 = 135 | >>9 = 406, //3 = 135
#   OST2: 312000;            >>8 = 1218, //3 = 406, >>1 = 203 | >>9 = 609, //3 = 203
#   OST3: 416000;            >>8 = 1625, //3 = 541, >>1 = 270 | >>9 = 812, //3 = 270
# Per-server (bavail_sum, divided by ost_count * ns1 = 2):
#   a: 26*(4000+8000)  = 312000; >>8 = 1218, //2 = 609,  >>1 = 304
#   b: 26*(12000+16000) = 728000; >>8 = 2843, //2 = 1421, >>1 = 710
# Threshold: (16000 * (256-43)) >> 8 = 3408000 >> 8 = 13312, not < 4000: QOS is used.
# 2.16 weights: avail = ba, penalties 0: 4000, 8000, 12000, 16000; total 40000.
HAND = {0: 1000, 1: 2000, 2: 3000, 3: 4000}
HAND_OSS = {0: "a", 1: "a", 2: "b", 3: "b"}
HAND_PPO = {0: 67, 1: 135, 2: 203, 3: 270}


# -- tunables -------------------------------------------------------------------------

@pytest.mark.parametrize("pct, stored, shown", [
    (90, 230, 90),   # (90<<8)//100 = 23040//100 = 230; (230*100+255)>>8 = 23255>>8 = 90
    (91, 232, 91),   # 23296//100 = 232; (23200+255)>>8 = 23455>>8 = 91   (<= 2.14 default)
    (17, 43, 17),    # 4352//100 = 43;   (4300+255)>>8 = 4555>>8 = 17
    (100, 256, 100),
    (0, 0, 0),
])
def test_tunable_percent_round_trips_through_256ths(pct, stored, shown):
    assert pct_to_stored(pct) == stored
    assert stored_to_pct(stored) == shown


def test_qos_defaults_are_lustre_2_15_defaults():
    qos = LustreQos()
    assert (qos.prio_free, qos.threshold_rr, qos.maxage_s) == (230, 43, 5)
    assert LustreQos(qos_prio_free_pct=91).prio_free == 232


@pytest.mark.parametrize("kw", [dict(weight_version="2.14"), dict(qos_prio_free_pct=101),
                                dict(qos_threshold_rr_pct=-1), dict(qos_maxage_s=0)])
def test_qos_rejects_bad_tunables(kw):
    with pytest.raises(ValueError):
        LustreQos(**kw)


# -- penalties per object -------------------------------------------------------------

@pytest.mark.parametrize("version", ["2.16", "2.15"])
def test_qos_penalty_per_object_hand_worked(version):
    qos, _ = qos_with(0, weight_version=version)
    alloc(qos, snap(HAND, HAND_OSS), 1)
    pen = qos.penalties()
    assert {i: ppo for i, (_, ppo) in pen["ost"].items()} == HAND_PPO
    assert {s: ppo for s, (_, ppo) in pen["oss"].items()} == {"a": 304, "b": 710}


def test_qos_single_server_doubles_ost_penalty_per_object():
    # One OSS with OSTs avail 1000, 2000 KiB: ba 4000, 8000; n1 = 1.
    #   OST0: (26*4000 >> 8) = 406, //1, >>1 = 203; one server (ns1 = 0 -> 1): doubled 406
    #   OST1: (26*8000 >> 8) = 812, >>1 = 406 -> doubled 812
    #   server: 26*12000 >> 8 = 1218, // (2 OSTs * 1) = 609, >>1 = 304
    # Threshold: 8000*213 >> 8 = 6656, not < 4000: QOS.
    qos, _ = qos_with(0)
    alloc(qos, snap({0: 1000, 1: 2000}, {0: "s", 1: "s"}), 1)
    pen = qos.penalties()
    assert {i: ppo for i, (_, ppo) in pen["ost"].items()} == {0: 406, 1: 812}
    assert pen["oss"]["s"][1] == 304


def test_qos_server_penalty_divides_by_all_osts_of_the_server():
    # OSS a = {0, 1, 2 (inactive)}, OSS b = {3}; avail 1000, 2000, -, 4000 KiB.
    # 3 active OSTs: n1 = 2; 2 servers with space: ns1 = 1.
    #   OST0: 26*4000 >> 8 = 406, //2 = 203, >>1 = 101
    #   OST1: 26*8000 >> 8 = 812, //2 = 406, >>1 = 203
    #   OST3: 26*16000 >> 8 = 1625, //2 = 812, >>1 = 406
    #   a: 26*12000 >> 8 = 1218, // (3 OSTs * 1) = 406, >>1 = 203  (the inactive OST counts)
    #   b: 26*16000 >> 8 = 1625, // (1 * 1) = 1625, >>1 = 812
    qos, _ = qos_with(0)
    s = snap({0: 1000, 1: 2000, 2: 3000, 3: 4000}, {0: "a", 1: "a", 2: "a", 3: "b"},
             ost2=dict(active=False))
    alloc(qos, s, 1)
    pen = qos.penalties()
    assert {i: pen["ost"][i][1] for i in (0, 1, 3)} == {0: 101, 1: 203, 3: 406}
    assert (pen["oss"]["a"][1], pen["oss"]["b"][1]) == (203, 812)
    assert 2 not in pen["ost"]  # an inactive OST gets no QOS state


# -- weights, the draw and the charge on use ------------------------------------------

def test_qos_weighted_draw_takes_first_ost_whose_running_sum_reaches_r():
    # Running sums in candidate order: 4000, 12000, 24000, 40000.
    for r, expected in [(0, 0), (4000, 0), (4001, 1), (12000, 1), (12001, 2), (24001, 3),
                        (39999, 3)]:
        qos, rng = qos_with(r)
        assert alloc(qos, snap(HAND, HAND_OSS), 1).osts == (expected,), r
        assert rng.asked == [40000]


def test_qos_charges_used_ost_and_oss_then_decays_all_penalties():
    # Draw 1: r = 30000 -> OST3 (running sum 40000). Charge:
    #   OST3: 0>>1 + 270*4 active OSTs = 1080;  b: 0>>1 + 710*2 active servers = 1420
    #   decay every server by its ppo: a 0 (floored), b 1420-710 = 710
    #   decay every active OST: OST0..2 stay 0, OST3 1080-270 = 810
    #   weights of the rest: OST0 4000, OST1 8000, OST2 12000-0-710 = 11290; total 23290
    # Draw 2: r = 12001 -> running sums 4000, 12000, 23290 -> OST2. Charge:
    #   OST2: 0>>1 + 203*4 = 812;  b: 710>>1 + 1420 = 355 + 1420 = 1775
    #   decay: a 0, b 1775-710 = 1065; OST2 812-203 = 609, OST3 810-270 = 540
    qos, rng = qos_with(30000, 12001)
    placement = alloc(qos, snap(HAND, HAND_OSS), 2)
    assert placement.osts == (3, 2)
    assert placement.note == ""
    assert rng.asked == [40000, 23290]
    pen = qos.penalties()
    assert pen["ost"] == {0: (0, 67), 1: (0, 135), 2: (609, 203), 3: (540, 270)}
    assert pen["oss"] == {"a": (0, 304), "b": (1065, 710)}


def test_qos_weight_subtracts_ost_and_oss_penalties():
    qos, rng = qos_with(30000, 12001, 0)
    s = snap(HAND, HAND_OSS)
    alloc(qos, s, 2)
    # Same space, same time: no recalculation. Weights now (avail - ost - oss penalty):
    #   OST0 4000-0-0 = 4000; OST1 8000; OST2 12000-609-1065 = 10326;
    #   OST3 16000-540-1065 = 14395; total 36721
    assert alloc(qos, s, 1).osts == (0,)
    assert rng.asked[-1] == 36721


def test_qos_2_15_weight_multiplies_space_by_free_inodes():
    # 2.15: avail = ((bavail*bsize) >> 16) * (ffree >> 8).
    #   OST0: 1000 KiB = 1024000 B >> 16 = 15; ffree 2**24 >> 8 = 65536 -> 983040
    #   OST1: 2048000 >> 16 = 31 -> 31 * 65536 = 2031616; total 3014656
    # Penalties start at 0, so r = 983040 is OST0's last value and r+1 is OST1's first.
    s = snap({0: 1000, 1: 2000})
    qos, rng = qos_with(983040, weight_version="2.15")
    assert alloc(qos, s, 1).osts == (0,)
    assert rng.asked == [3014656]
    qos, rng = qos_with(983041, weight_version="2.15")
    assert alloc(qos, s, 1).osts == (1,)


def test_qos_2_15_weight_drops_with_free_inodes():
    # OST0 ffree 2**16 >> 8 = 256: weight 15 * 256 = 3840; total 3840 + 2031616 = 2035456
    s = snap({0: 1000, 1: 2000}, ost0=dict(files_free=1 << 16))
    qos, rng = qos_with(0, weight_version="2.15")
    alloc(qos, s, 1)
    assert rng.asked == [2035456]


def test_qos_2_16_weight_ignores_free_inodes():
    s = snap({0: 1000, 1: 2000}, ost0=dict(files_free=1 << 16))
    qos, rng = qos_with(0, weight_version="2.16")
    alloc(qos, s, 1)
    assert rng.asked == [4000 + 8000]


def test_qos_skips_ost_without_precreated_objects_until_slow_retry():
    # r = 4001 lands on OST1 (no precreated objects): reservation fails, the walk goes
    # on and takes OST2 (running sum 24000 >= r) in the same draw.
    qos, rng = qos_with(4001)
    s = snap(HAND, HAND_OSS, ost1=dict(files_precreated=0))
    assert alloc(qos, s, 1).osts == (2,)
    assert rng.asked == [40000]
    # r = 30000 lands on OST3, the last candidate, with nothing after it: the draw finds
    # nothing, the allocator switches to "slow" (wait for precreation) and draws again.
    qos, rng = qos_with(30000, 30000)
    s = snap(HAND, HAND_OSS, ost3=dict(files_precreated=0))
    assert alloc(qos, s, 1).osts == (3,)
    assert rng.asked == [40000, 40000]


def test_qos_pool_draws_only_among_pool_members_but_computes_penalties_for_all():
    qos, rng = qos_with(0)
    placement = alloc(qos, snap(HAND, HAND_OSS, pools={"p": frozenset({0, 1})}), 1, pool="p")
    assert placement.osts == (0,)
    assert rng.asked == [4000 + 8000]
    assert {i: ppo for i, (_, ppo) in qos.penalties()["ost"].items()} == HAND_PPO


# -- penalty ageing -------------------------------------------------------------------

def age_and_read(qos: LustreQos, now: float) -> dict:
    """Re-run the penalty calculation at ``now`` without charging anything: OST0 is
    DEGRADED (and its avail changes by 1 KiB to set DIRTY), so a -1 request has 3 QOS
    candidates for 4 stripes and QOS declines right after the calculation."""
    s = snap({**HAND, 0: 999}, HAND_OSS, time_s=now, ost0=dict(flags=OstFlag.DEGRADED))
    assert alloc(qos, s, -1).note.startswith("round-robin")
    return qos.penalties()


@pytest.mark.parametrize("now, ost2, ost3, oss_b", [
    # After the 2-stripe allocation at t=1000: OST2 609, OST3 540, b 1065 (used at 1000).
    (1047, 609, 540, 1065),   # age = 47 >> 3 = 5, not > maxage 5: unchanged
    (1048, 304, 270, 532),    # age = 48 >> 3 = 6 > 5: >> (6 // 5 = 1)
    (1079, 304, 270, 532),    # age = 79 >> 3 = 9: >> 1
    (1080, 152, 135, 266),    # age = 80 >> 3 = 10: >> 2
    (1000 + 8 * 161, 0, 0, 0),  # age 161 > 32*5 = 160: zeroed
])
def test_qos_penalties_decay_with_age(now, ost2, ost3, oss_b):
    qos, _ = qos_with(30000, 12001)
    alloc(qos, snap(HAND, HAND_OSS), 2)
    pen = age_and_read(qos, now)
    assert (pen["ost"][2][0], pen["ost"][3][0], pen["oss"]["b"][0]) == (ost2, ost3, oss_b)


def test_qos_penalty_is_zeroed_beyond_32_maxage_not_just_shifted():
    # Large OSTs so a penalty survives a 32-bit shift; qos_maxage 1 s.
    #   OST0 (oss a) 2**40 KiB: ba = 2**50 >> 8 = 2**42;  OST1 (oss b) 2**39 KiB: ba = 2**41
    #   n1 = 1, ns1 = 1. Master formula: ppo0 = (26 * 2**42) >> 9 = 26 * 2**33
    #   server a: 26 * 2**42 >> 9 // (1 OST * 1) = 26 * 2**33
    #   Threshold: 2**42 * 213 >> 8 = 213 * 2**34 > 2**41: QOS.
    # r = 0 -> OST0. Charge: OST0 0 + ppo0*2 = 26*2**34, then - ppo0 = 26*2**33;
    #   a likewise 26*2**34 - 26*2**33 = 26*2**33. Used at t = 1000.
    big = {0: 1 << 40, 1: 1 << 39}
    p = 26 << 33
    results = {}
    for now in (1000 + 8 * 32, 1000 + 8 * 33):
        qos, _ = qos_with(0, qos_maxage_s=1)
        assert alloc(qos, snap(big), 1).osts == (0,)
        assert qos.penalties()["ost"][0] == (p, p)
        s = snap({0: 1 << 40, 1: (1 << 39) - 1}, time_s=now, ost1=dict(flags=OstFlag.DEGRADED))
        alloc(qos, s, -1)  # 1 candidate for 2 stripes: declines after recalculating
        results[now] = (qos.penalties()["ost"][0][0], qos.penalties()["oss"]["oss0"][0])
    # age 32 = 32*maxage: not beyond, so shifted by 32 // 1 = 32: 26*2**33 >> 32 = 52
    assert results[1000 + 8 * 32] == (52, 52)
    # age 33 > 32*maxage: zero
    assert results[1000 + 8 * 33] == (0, 0)


# -- the switch to round-robin --------------------------------------------------------

@pytest.mark.parametrize("min_kib, uses_qos", [
    # OST0 6400 KiB: ba_max = 25600; 25600 * (256 - 43) = 5452800, >> 8 = 21300.
    (5325, True),    # ba_min = 21300: 21300 < 21300 is false -> QOS
    (5326, False),   # ba_min = 21304: 21300 < 21304 -> SAME_SPACE -> round-robin
])
def test_qos_switches_to_rr_at_the_17_percent_threshold(min_kib, uses_qos):
    qos, _ = qos_with(0)
    placement = alloc(qos, snap({0: 6400, 1: min_kib}), 1)
    if uses_qos:
        assert placement.note == ""
        assert qos.last_fallback_reason is None
    else:
        assert placement.note == "round-robin: free space within qos_threshold_rr"


def test_qos_threshold_follows_the_tunable():
    # 50% -> stored 128: 25600 * 128 >> 8 = 12800 < ba_min 12804 (3201 KiB) -> RR;
    # with 3200 KiB, ba_min 12800 is not > 12800 -> QOS.
    qos, _ = qos_with(0, 0, qos_threshold_rr_pct=50)
    assert alloc(qos, snap({0: 6400, 1: 3201}), 1).note.startswith("round-robin")
    qos, _ = qos_with(0, qos_threshold_rr_pct=50)
    assert alloc(qos, snap({0: 6400, 1: 3200}), 1).note == ""


def test_qos_threshold_compares_all_active_osts_not_just_the_pool():
    # Pool {0, 1} has equal space, but OST2 is far emptier: not SAME_SPACE, QOS runs.
    qos, rng = qos_with(0)
    s = snap({0: 4000, 1: 4000, 2: 40000}, pools={"p": frozenset({0, 1})})
    assert alloc(qos, s, 1, pool="p").note == ""
    assert rng.asked == [32000]


def test_qos_balanced_space_skips_recalculation_until_space_changes():
    qos, rng = qos_with(0)
    balanced = snap({0: 6400, 1: 6000})
    # 1st: DIRTY -> calculate -> SAME_SPACE -> RR
    assert alloc(qos, balanced, 1).note == "round-robin: free space within qos_threshold_rr"
    # 2nd: not DIRTY and SAME_SPACE -> RR straight away (lod's early EAGAIN)
    assert alloc(qos, balanced, 1).note == "round-robin: free space balanced"
    # 3rd: OST1's avail changed (DIRTY): recalculated, no longer balanced -> QOS
    assert alloc(qos, snap({0: 6400, 1: 1000}), 1).note == ""
    assert rng.asked == [25600 + 4000]


def test_qos_penalties_reset_after_a_balanced_period():
    qos, rng = qos_with(30000, 12001, 0)
    alloc(qos, snap(HAND, HAND_OSS), 2)          # leaves OST2 609, OST3 540, b 1065
    assert alloc(qos, snap({0: 4000, 1: 4000, 2: 4000, 3: 4000}, HAND_OSS), 1).note \
        .startswith("round-robin")                # SAME_SPACE sets RESET
    alloc(qos, snap(HAND, HAND_OSS), 1)           # same time, so no ageing
    # RESET zeroed every penalty: the draw's total is the bare 40000 (36721 otherwise).
    assert rng.asked[-1] == 40000


def test_qos_with_no_space_on_any_active_ost_counts_as_same_space():
    # Every active OST has ba = 0, so none enters the min/max: ba_min keeps its initial
    # maximum (u64 -1) and ba_max 0, and (0 * 213) >> 8 = 0 < ba_min sets SAME_SPACE and
    # RESET. The next call with unchanged space takes the early exit to RR instead of
    # drawing among zero weights.
    qos, rng = qos_with()
    s = snap({0: 0, 1: 0})
    assert alloc(qos, s, 1).note.startswith("round-robin")
    assert alloc(qos, s, 1).note == "round-robin: free space balanced"
    assert rng.asked == []


def test_qos_uses_rr_when_fewer_candidates_than_stripes():
    # OST3 is DEGRADED: 3 QOS candidates for 4 stripes -> round-robin, which takes the
    # DEGRADED OST in its last pass.
    qos, rng = qos_with()
    placement = alloc(qos, snap(HAND, HAND_OSS, ost3=dict(flags=OstFlag.DEGRADED)), -1)
    assert placement.note == "round-robin: 3 QOS candidates for 4 stripes"
    assert sorted(placement.osts) == [0, 1, 2, 3]
    assert rng.asked == []


def test_qos_never_draws_a_degraded_ost():
    # OST3 (most space) is DEGRADED: the candidates are 0, 1, 2 (total 24000), and the
    # largest r lands on OST2.
    qos, rng = qos_with("last")
    placement = alloc(qos, snap(HAND, HAND_OSS, ost3=dict(flags=OstFlag.DEGRADED)), 1)
    assert placement.osts == (2,)
    assert placement.note == ""
    assert rng.asked == [24000]


def test_qos_uses_rr_with_fewer_than_two_active_osts():
    qos, _ = qos_with()
    placement = alloc(qos, snap({0: 1000, 1: 9000}, ost1=dict(active=False)), 1)
    assert placement.osts == (0,)
    assert placement.note == "round-robin: fewer than 2 active OSTs"


# -- statistics -------------------------------------------------------------------------

def test_qos_draw_frequencies_follow_weights_without_penalties():
    # qos_prio_free 100% -> prio_wide 0 -> every penalty is 0: weights are the bare ba.
    # ba = 4000, 4000, 4000, 20000 (total 32000): OST3 is hit by r in [12001, 31999],
    # p = 19999/32000 = 0.625; each other OST p ~= 0.125.
    # n = 4000 files: OST3 mean 2500, sd sqrt(4000*0.625*0.375) = 30.6 -> +-6 sd = +-184;
    # others mean 500, sd sqrt(4000*0.125*0.875) = 20.9 -> +-6 sd = +-126.
    qos = LustreQos(seed=7, qos_prio_free_pct=100)
    s = snap({0: 1000, 1: 1000, 2: 1000, 3: 5000})
    hits = Counter(alloc(qos, s, 1).osts[0] for _ in range(4000))
    assert 2316 <= hits[3] <= 2684
    for i in (0, 1, 2):
        assert 374 <= hits[i] <= 626


def test_qos_much_emptier_ost_gets_more_objects_with_default_penalties():
    # Default prio_free: penalties push later draws away from the last-used OST, but the
    # emptiest (5x the space) must still get clearly more than any other OST.
    qos = LustreQos(seed=3)
    s = snap({0: 1000, 1: 1000, 2: 1000, 3: 5000})
    hits = Counter(alloc(qos, s, 1).osts[0] for _ in range(4000))
    assert hits[3] > 2 * max(hits[0], hits[1], hits[2])


def test_qos_results_are_valid_placements():
    qos = LustreQos(seed=5)
    s = snap(HAND, HAND_OSS, ost1=dict(flags=OstFlag.DEGRADED), pools={"p": frozenset({1, 2, 3})})
    for count in (-1, 0, 1, 2, 3, 4, 9):
        for pool in (None, "p"):
            check_placement(s, alloc(qos, s, count, pool).osts, pool)


def test_balanced_space_declines_to_the_rr_sequence_at_every_call():
    """While the space QOS last read is balanced and the snapshot version does not move,
    every call declines (the first after reading the space, the next ones without) and
    places exactly as Lustre's RR with the same seed would, on every pool."""
    from lustre_alloc.mapper.policies.round_robin import RoundRobin
    from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster
    snap = make_uniform_cluster(5, 3, 1 << 30)
    snap.pools = {"p": frozenset({0, 4, 5, 9, 13})}
    snap.version = 7
    qos, rr = LustreQos(seed=3), RoundRobin(seed=3)
    for i in range(60):
        req = CreateRequest("j", [1, 2, 4, -1, 15][i % 5], pool=[None, "p"][i % 2])
        got, want = qos.allocate(snap, req), rr.allocate(snap, req)
        assert got.osts == want.osts and got.policy == "lustre_qos"
        why = "free space within qos_threshold_rr" if i == 0 else "free space balanced"
        assert got.note == "round-robin: " + why and qos.last_fallback_reason == why
