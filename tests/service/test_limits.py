"""The client bounds of lustre_alloc.mapper.service.limits, deterministic (a fake clock): per-peer request
rate, new-application budget and ownership cap (past them: one overflow id per peer),
expected_bytes clipped to the pool's usable free space; and the job-id limit on the wire."""
from __future__ import annotations

import errno

import pytest

from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.predictor.markov import MarkovPredictor
from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.limits import ExpectedBytesClip, PeerLimits, overflow_job, peer_of
from lustre_alloc.mapper.state.cluster_state import OstFlag, make_uniform_cluster


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_request_rate_is_a_token_bucket_per_peer():
    clock = Clock()
    limits = PeerLimits(requests_per_s=10, request_burst=5, new_apps_per_min=60, max_apps=10,
                        clock=clock)
    assert [limits.admit("ip:10.0.0.1") for _ in range(7)] == [True] * 5 + [False] * 2
    assert limits.admit("ip:10.0.0.2")            # another peer is not affected
    clock.t += 0.35                                # 3.5 tokens back
    assert [limits.admit("ip:10.0.0.1") for _ in range(4)] == [True] * 3 + [False]
    assert limits.rate_limited == 3


def test_new_applications_per_peer_are_budgeted_and_capped():
    clock = Clock()
    predictor = MarkovPredictor(max_apps=100)
    limits = PeerLimits(0, 1, new_apps_per_min=3, max_apps=5, clock=clock)
    tracked = predictor.__contains__

    def ask(peer, job):
        name = limits.job_for(peer, job, tracked)
        predictor.observe(name, 1 << 20)
        return name
    jobs = [ask("key:A", f"a.{i}") for i in range(5)]
    assert jobs[:3] == ["a.0", "a.1", "a.2"] and jobs[3:] == [overflow_job("key:A")] * 2
    assert ask("key:A", "a.1") == "a.1"            # known jobs are always themselves
    assert ask("key:B", "b.0") == "b.0"            # budgets are per peer
    clock.t += 60                                  # refilled: 3 more, but the cap is 5
    assert [ask("key:A", f"a.{i}") for i in range(5, 9)] == ["a.5", "a.6", overflow_job("key:A"),
                                                              overflow_job("key:A")]
    predictor.forget("a.0")                        # evicted by others: the share frees up
    clock.t += 60
    assert ask("key:A", "a.9") == "a.9"
    assert limits.overflowed == 4


def test_peer_identity_prefers_the_curve_key_then_the_address():
    assert peer_of("Zk3...", "10.0.0.1", b"\x00\x01") == "key:Zk3..."
    assert peer_of(None, "10.0.0.1", b"\x00\x01") == "ip:10.0.0.1"
    assert peer_of(None, None, b"\x00\x01") == "id:0001"


def test_expected_bytes_is_clipped_to_the_pools_usable_free_space():
    snap = make_uniform_cluster(2, 2, kbytes_total=1 << 20)        # 4 OSTs of 1 GiB
    for o in snap.osts:
        o.kbytes_avail = 1 << 19                                    # 512 MiB each
    snap.osts[3].flags = OstFlag.NOPRECREATE                        # drained: not counted
    snap.pools = {"two": frozenset({0, 1})}
    clip = ExpectedBytesClip()
    assert clip.clip(snap, 1, None, (1 << 63) - 1) == 3 * (1 << 29)
    assert clip.clip(snap, 1, "two", 1 << 40) == 2 * (1 << 29)
    assert clip.clip(snap, 1, "two", 1 << 20) == 1 << 20
    assert clip.clip(snap, 1, "nope", 1 << 40) == 1 << 40           # the policy answers EINVAL
    assert clip.clipped == 2


@pytest.mark.parametrize("job, ok", [("j" * 255, True), ("j" * 256, False),
                                     ("é" * 127, True), ("é" * 128, False)])
def test_job_ids_longer_than_the_shims_255_bytes_are_refused(job, ok):
    frame = wire.encode_request(7, job, 1, 1 << 20)
    if ok:
        assert wire.decode_request(frame).create.jobid == job
    else:
        with pytest.raises(wire.WireError) as exc:
            wire.decode_request(frame)
        assert exc.value.errno == errno.EINVAL and "255" in exc.value.reason


def test_an_admitted_job_the_predictor_has_not_learned_yet_costs_no_second_token():
    """Learning runs in the planner's thread: a job admitted moments ago is not tracked yet,
    and its next creates must not spend the peer's new-application budget again."""
    limits = PeerLimits(0, 1, new_apps_per_min=2, max_apps=5, clock=Clock())
    never = lambda job: False                                     # noqa: E731
    assert [limits.job_for("key:A", "a.0", never) for _ in range(10)] == ["a.0"] * 10
    assert limits.job_for("key:A", "a.1", never) == "a.1"         # the second token
    assert limits.job_for("key:A", "a.2", never) == overflow_job("key:A")
    assert limits.overflowed == 1
