"""The mcmf policy: prediction + flow, stragglers, infeasible rounds, persistence."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lustre_alloc.mapper.state.cluster_state import OstState, make_uniform_cluster
from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.state.ost_health import check_placement, is_usable, pool_members, resolve_stripe_count
from lustre_alloc.mapper.policies.placement import CreateRequest, InvalidRequestError, NoSpaceError
from lustre_alloc.mapper.policies.registry import make_policy
from lustre_alloc.mapper.flow.stragglers import find_stragglers
from tests.mapper.test_policy_invariants import SETTINGS, clusters, requests

GIB_KIB = 1 << 20
MIB = 1 << 20


def cluster(oss=4, per=2, total_gib=100, used_gib=None):
    used = {i: u * GIB_KIB for i, u in (used_gib or {}).items()}
    return make_uniform_cluster(oss, per, total_gib * GIB_KIB, used)


@SETTINGS
@given(snapshot=clusters(), reqs=requests)
def test_mcmf_keeps_health_and_pool_rules(snapshot, reqs):
    policy = make_policy("mcmf")
    for step, (count, pool) in enumerate(reqs):
        snapshot.time_s = 10.0 * step
        request = CreateRequest("job", count, pool=pool, expected_bytes=4 * MIB)
        if pool == "nosuch":
            with pytest.raises(InvalidRequestError):
                policy.allocate(snapshot, request)
            continue
        usable = [o for o in pool_members(snapshot, pool) if is_usable(o)]
        # Room for a stripe: >= 1 MiB available; surely room even after what this
        # policy placed before (<= 6 x 4 MiB): >= 64 MiB.
        some_room = [o for o in usable if o.kbytes_avail * 1024 >= MIB]
        surely = [o for o in usable if o.kbytes_avail * 1024 >= 64 * MIB]
        wanted = resolve_stripe_count(count, len(usable)) if usable else 0
        if not some_room:
            with pytest.raises(NoSpaceError):
                policy.allocate(snapshot, request)
            continue
        try:
            placement = policy.allocate(snapshot, request)
        except NoSpaceError:
            assert not surely
            continue
        check_placement(snapshot, placement.osts, pool)
        assert min(wanted, len(surely)) <= len(placement.osts) <= min(wanted, len(some_room))


def test_mcmf_fills_the_emptiest_osts_first_and_spreads_over_osses():
    snap = cluster(used_gib={0: 50, 1: 50, 2: 50, 3: 50})   # oss0, oss1 hold full OSTs
    # the flow on every round (the default rule hands even load to Lustre's RR)
    placement = make_policy("mcmf", regime=False).allocate(
        snap, CreateRequest("a", 4, expected_bytes=4 << 30))
    assert set(placement.osts) == {4, 5, 6, 7}
    # Stripe order alternates between the two servers.
    osses = [snap.osts[i].oss for i in placement.osts]
    assert osses[0] != osses[1] and osses[2] != osses[3]


def test_mcmf_spreads_one_applications_files_like_round_robin():
    snap = cluster()
    policy = make_policy("mcmf", predict_k=0)
    firsts = [policy.allocate(snap, CreateRequest("ior", 1, expected_bytes=MIB)).osts[0]
              for _ in range(8)]
    assert sorted(firsts) == list(range(8))


def test_straggler_ost_is_left_out():
    snap = cluster()
    for o in snap.osts:
        o.write_latency_s = 0.010
    snap.osts[6].write_latency_s = 0.200
    assert find_stragglers(snap.osts) == {6}
    policy = make_policy("mcmf")
    placement = policy.allocate(snap, CreateRequest("a", -1))
    assert 6 not in placement.osts and len(placement.osts) == 7
    assert policy.last_stragglers == {6}


def test_straggler_rule_needs_peers_and_caps_the_share_excluded():
    osts = [OstState(i, "o", 1, 1, 1, write_latency_s=lat) for i, lat in enumerate([0.01, 1.0, 1.0])]
    assert find_stragglers(osts) == set()                       # fewer than 4 peers
    osts = [OstState(i, "o", 1, 1, 1, write_latency_s=0.01 if i < 5 else 1.0 + i) for i in range(8)]
    assert find_stragglers(osts) == {6, 7}                       # the slowest 25% of 8
    with pytest.raises(ValueError):
        find_stragglers(osts, factor=1.0)


def test_request_that_does_not_fit_is_clipped_and_says_so():
    snap = cluster(oss=2, per=2, total_gib=1)
    for o in snap.osts[1:]:
        o.kbytes_avail = o.kbytes_free = 512          # less than one 1 MiB stripe
    placement = make_policy("mcmf").allocate(snap, CreateRequest("a", 4))
    assert placement.osts == (0,)
    assert placement.note.startswith("clipped: stripe count 4 -> 1")


def test_no_room_anywhere_is_enospc():
    snap = cluster(oss=2, per=1, total_gib=1)
    for o in snap.osts:
        o.kbytes_avail = o.kbytes_free = 10
    with pytest.raises(NoSpaceError):
        make_policy("mcmf").allocate(snap, CreateRequest("a", 1))


def learn(policy, snap, job, n, size=8 * MIB, stripes=2):
    out = []
    for k in range(n):
        snap.time_s = float(k)
        out.append(policy.allocate(snap, CreateRequest(job, stripes, expected_bytes=size)))
    return out


def test_predicted_lists_answer_the_next_requests_at_once():
    snap = cluster()
    policy = McmfPolicy(predict_k=4, regime=False)
    placements = learn(policy, snap, "ior", 40)
    assert policy.stats["predicted_hits"] > 20
    assert any(p.note == "predicted" for p in placements)
    for p in placements:
        check_placement(snap, p.osts, None)
        assert len(p.osts) == 2


def test_predicted_list_is_not_used_when_an_ost_became_unusable():
    snap = cluster()
    policy = McmfPolicy(predict_k=4, regime=False)
    learn(policy, snap, "ior", 20)
    cached = policy.kept_lists["ior"][0].osts
    snap.osts[cached[0]].active = False
    snap.time_s = 20.0
    placement = policy.allocate(snap, CreateRequest("ior", 2, expected_bytes=8 * MIB))
    assert cached[0] not in placement.osts and placement.note != "predicted"


def test_batch_answers_each_request_and_isolates_bad_ones():
    snap = cluster()
    out = McmfPolicy().allocate_batch(snap, [CreateRequest("a", 2), CreateRequest("b", 3, pool="nope"),
                                             CreateRequest("c", 3)])
    assert len(out[0].osts) == 2 and len(out[2].osts) == 3
    assert isinstance(out[1], InvalidRequestError)
    assert not set(out[0].osts) & set(out[2].osts)     # one round spreads both requests


def test_networkx_solver_gives_placements_of_the_same_shape():
    snap = cluster(used_gib={i: i for i in range(8)})
    reqs = [CreateRequest(f"j{k}", 1 + k % 3, expected_bytes=(k + 1) << 30) for k in range(6)]
    a = McmfPolicy(solver="ortools").allocate_batch(snap, reqs)
    b = McmfPolicy(solver="networkx").allocate_batch(snap, reqs)
    # Ties allow different optimal lists (their costs are equal: tests/mapper/test_flow.py).
    assert [len(p.osts) for p in a] == [len(p.osts) for p in b] == [r.stripe_count for r in reqs]
    for p in b:
        check_placement(snap, p.osts, None)


def test_learned_state_survives_save_and_load(tmp_path):
    snap = cluster()
    policy = McmfPolicy()
    learn(policy, snap, "hacc", 30)
    path = policy.save_state(tmp_path / "markov.state")
    fresh = McmfPolicy()
    assert fresh.predictor.predict("hacc", 2, MIB, 8, 8) == []
    fresh.load_state(path)
    assert fresh.predictor.predict("hacc", 2, MIB, 8, 8) == policy.predictor.predict("hacc", 2, MIB, 8, 8)


def test_gate_falls_back_to_lustre_qos_when_the_mds_is_busy():
    snap = cluster()
    gated = GatedPolicy(McmfPolicy(), make_policy("lustre_qos"))
    snap.mds_cpu_percent = 69.0
    assert gated.allocate(snap, CreateRequest("a", 2)).policy == "mcmf"
    snap.mds_cpu_percent = 70.0
    p = gated.allocate(snap, CreateRequest("a", 2))
    assert (p.policy, p.fallback) == ("lustre_qos", "mds_cpu")
    assert gated.fallbacks["mds_cpu"] == 1


def test_gate_falls_back_when_statistics_are_stale():
    snap = cluster()
    for o in snap.osts:
        o.sample_time_s = 0.0
    gated = GatedPolicy(McmfPolicy(), make_policy("round_robin"), max_sample_age_s=10.0)
    snap.time_s = 5.0
    assert gated.allocate(snap, CreateRequest("a", 1)).fallback == ""
    snap.time_s = 11.0
    assert gated.allocate(snap, CreateRequest("a", 1)).fallback == "stale"


def test_gate_falls_back_when_the_primary_raises_a_bug():
    class Broken:
        name = "broken"

        def allocate(self, snapshot, request):
            raise RuntimeError("solver bug")
    gated = GatedPolicy(Broken(), make_policy("round_robin"))
    p = gated.allocate(cluster(), CreateRequest("a", 1))
    assert (p.policy, p.fallback) == ("round_robin", "error")


def test_unknown_solver_and_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="solver"):
        McmfPolicy(solver="simplex")
    with pytest.raises(ValueError, match="predict_k"):
        McmfPolicy(predict_k=-1)


def test_predicted_lists_reserve_their_osts_for_other_applications():
    snap = cluster()
    # Without plan queues: the other application's request must go through a round
    # (a list planned before the kept lists existed may share their OSTs).
    policy = McmfPolicy(predict_k=4, plan_ahead=False, regime=False)
    learn(policy, snap, "ior", 20, stripes=1)
    kept = {i for entry in policy.kept_lists["ior"] for i in entry.osts}
    assert kept and all(policy.reserved_stripes[i] >= 1 for i in kept)
    assert set(policy.predicted_load()) >= kept
    # Another application's one-stripe file goes to an OST nobody has reserved.
    other = policy.allocate(snap, CreateRequest("hacc", 1, expected_bytes=8 * MIB))
    assert other.osts[0] not in kept


def test_announced_bytes_never_turn_into_enospc():
    # 100 requests announcing 1 GiB each on 8 OSTs of 1 GiB, none written yet: the
    # announcements raise costs but the OSTs still have room, so every create is placed.
    snap = cluster(total_gib=1)
    policy = McmfPolicy(predict_k=0)
    for k in range(100):
        snap.time_s = float(k)
        assert len(policy.allocate(snap, CreateRequest(f"j{k}", 2, expected_bytes=1 << 30)).osts) == 2


def test_a_versioned_snapshot_is_rederived_only_when_its_version_moves():
    snap = cluster()
    snap.version = 0
    policy = McmfPolicy(predict_k=0)
    policy.allocate(snap, CreateRequest("a", 1))
    view = policy.views.view(snap)
    policy.allocate(snap, CreateRequest("a", 1))
    assert policy.views.view(snap) is view                 # same version: kept
    for o in snap.osts[:7]:
        o.active = False
    snap.changed()                                    # the producer says so
    assert policy.allocate(snap, CreateRequest("a", 1)).osts == (7,)
    assert policy.views.view(snap) is not view


def test_an_unversioned_snapshot_is_never_cached():
    snap = cluster()                                  # version None: mutate freely
    policy = McmfPolicy(predict_k=0)
    policy.allocate(snap, CreateRequest("a", 1))
    for o in snap.osts[1:]:
        o.active = False
    assert policy.allocate(snap, CreateRequest("a", 1)).osts == (0,)
