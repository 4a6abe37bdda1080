"""Protocol v2 leases on the mapper: layouts leased ahead count as pending load
like any placed list, come off the books when returned unused or when their lifetime ends,
are bounded per lease and per client, are revoked when an OST of theirs becomes unusable,
and v1 keeps being served beside them."""
from __future__ import annotations

import errno
import shutil

import msgpack
import pytest

from lustre_alloc.common.curve import CurveClient, generate_keys
from lustre_alloc.mapper.policies.placement import CreateRequest, Placement
from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.client import LeaseRefused, MapperClient
from lustre_alloc.mapper.service.leases import LeaseBook
from lustre_alloc.mapper.service.wire import decode_v2, encode_lease_request

from .conftest import make_service
from .test_mds_view import fed_by_mds, mds_body
from tests.support import wait_for

GIB = 1 << 30
PLACES = {"mcmf": {"alike_to_lustre": False}}
"""mcmf deciding leases on the static cluster's alike OSTs (by default it leaves them to
Lustre's allocator: test_alike_osts_leave_a_class_to_lustre_for_one_lifetime)."""
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def mcmf():
    # solved in rounds (no plans ahead): every layout's booking is visible at once
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False, policy_params=PLACES,
                       lease_max_layouts=16, lease_peer_quota=40)
    yield svc
    svc.stop()


def _load(svc) -> dict[int, float]:
    """Pending bytes per OST: what was handed out (predicted lists kept aside)."""
    with svc.lock:
        return svc.policy.primary.pending.bytes_by_ost()


def test_a_lease_is_decided_and_booked_like_creates_and_unused_layouts_come_back(mcmf):
    svc = mcmf
    with MapperClient(svc.endpoint, timeout_s=5) as c:
        lease = c.lease(6, "app.1", 2, expected_bytes=GIB, path="/lustre/run")
        assert len(lease.layouts) == 6 and lease.policy == "mcmf"
        assert all(len(osts) == 2 == len(set(osts)) for osts in lease.layouts)
        assert 0 < lease.lease_ms <= 2000 and lease.revoke == ()
        booked = _load(svc)
        assert sum(booked.values()) == pytest.approx(6 * GIB)
        # two used, four returned: the four come off the books
        assert c.release([(lease.id, 2)]) == ["ok"]
        assert sum(_load(svc).values()) == pytest.approx(2 * GIB)
        assert c.release([(lease.id, 2)]) == ["unknown"]          # once only
        assert c.alloc("app.1", 2).osts                            # v1 beside v2
    m = svc.metrics
    assert m.leased_layouts.labels("granted")._value.get() == 6
    assert m.leased_layouts.labels("used")._value.get() == 2
    assert m.leased_layouts.labels("released")._value.get() == 4
    assert m.requests.labels("lease")._value.get() == 1


def test_leased_layouts_are_the_lists_the_policy_hands_out_per_create():
    # round-robin (same seed): a lease of four layouts is the four lists four creates get,
    # rotated (LeaseBook.add: by the lease's id)
    got = []
    for leasing in (True, False):
        svc = make_service(static_cluster="4x2", policy="round_robin", seed=3)
        try:
            with MapperClient(svc.endpoint, timeout_s=5) as c:
                got.append(list(c.lease(4, "app.1", 2, path="/lustre/run").layouts) if leasing
                           else [c.alloc("app.1", 2).osts for _ in range(4)])
        finally:
            svc.stop()
    k = got[1].index(got[0][0])
    assert got[0] == got[1][k:] + got[1][:k] and len({o for osts in got[0] for o in osts}) >= 6


def test_grants_are_bounded_per_lease_and_per_client_and_others_are_unaffected(tmp_path):
    # clients are told apart by their CURVE keys (without CURVE: by address)
    keys, allowed = tmp_path / "keys", tmp_path / "allowed"
    allowed.mkdir()
    for name in ("mapper", "greedy", "other"):
        generate_keys(keys, name)
        shutil.copy(keys / f"{name}.key", allowed)
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False, policy_params=PLACES,
                       lease_max_layouts=16, lease_peer_quota=40,
                       serve_curve_secret_key=str(keys / "mapper.key_secret"),
                       serve_curve_authorized_keys=str(allowed))
    curve = {n: CurveClient(str(keys / f"{n}.key_secret"), str(keys / "mapper.key"))
             for n in ("greedy", "other")}
    try:
        with MapperClient(svc.endpoint, timeout_s=5, curve=curve["greedy"]) as greedy, \
                MapperClient(svc.endpoint, timeout_s=5, curve=curve["other"]) as other:
            sizes = [len(greedy.lease(1_000_000, "app.1", 1, path="/lustre/a").layouts)
                     for _ in range(3)]
            assert sizes == [16, 16, 8]                            # lease max, then quota 40
            with pytest.raises(LeaseRefused) as full:
                greedy.lease(1_000_000, "app.1", 1, path="/lustre/a")
            assert full.value.errno == errno.EDQUOT and "40" in full.value.reason
            # the greedy client still creates, per create (v1); the other gets its own
            assert greedy.alloc("app.1", 1).osts
            assert len(other.lease(10, "app.2", 1, path="/lustre/b").layouts) == 10
        assert svc.metrics.leases.labels("quota")._value.get() == 1
    finally:
        svc.stop()


def test_a_client_that_never_returns_holds_nothing_past_one_lifetime():
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False, policy_params=PLACES,
                       layout_lease_s=0.3)
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            lease = c.lease(8, "app.1", 2, expected_bytes=GIB, path="/lustre/run")
            assert lease.lease_ms == 300
            assert sum(_load(svc).values()) == pytest.approx(8 * GIB)
        # the client is gone; within one lifetime (plus the loop's expiry check) all is back
        wait_for(lambda: sum(_load(svc).values()) < 1, what="expired lease un-booked",
                 timeout_s=0.3 + 1.0)
        assert svc.metrics.leases.labels("expired")._value.get() == 1
        assert svc.metrics.leased_layouts.labels("expired")._value.get() == 8
    finally:
        svc.stop()


def test_lease_lifetime_is_bounded_by_the_plans_ttl():
    svc = make_service(static_cluster="4x2", policy="mcmf", layout_lease_s=30,
                       policy_params={"mcmf": {"plan_ttl_s": 0.5, "alike_to_lustre": False}})
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            assert c.lease(2, "app.1", 1).lease_ms == 500
    finally:
        svc.stop()


def test_shadow_and_scope_refuse_leases_with_what_the_client_should_do():
    svc = make_service(static_cluster="4x2", policy="round_robin",
                       scope={"shadow": False, "exclude_paths": ["/lustre/scratch"]})
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            with pytest.raises(LeaseRefused) as out:
                c.lease(4, "app.1", 1, path="/lustre/scratch/run")
            assert out.value.errno == errno.EPERM and out.value.retry_ms == 2000
            assert not out.value.per_create
            assert len(c.lease(4, "app.1", 1, path="/lustre/home/run").layouts) == 4
    finally:
        svc.stop()
    svc = make_service(static_cluster="4x2", policy="round_robin", scope={"shadow": True})
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            with pytest.raises(LeaseRefused) as shadow:
                c.lease(4, "app.1", 1, path="/lustre/run")
            assert shadow.value.per_create and shadow.value.errno == errno.EPERM
    finally:
        svc.stop()


def test_v2_ping_says_the_mapper_leases_and_bad_v2_frames_name_the_field(static_service):
    with MapperClient(static_service.endpoint, timeout_s=5) as c:
        pong = c.request(msgpack.packb({"v": 2, "op": "ping", "id": 7}), 7)
        assert pong["v"] == 2 and pong["op"] == "pong"
        for frame, what in (({"count": 0}, "count 0"), ({"count": "x"}, "'count'"),
                            ({"op": "alloc"}, "'components'"), ({"op": "report"}, "protocol v2")):
            body = msgpack.unpackb(encode_lease_request(9, 4, "app.1", 1, 1 << 20))
            body.update(frame)
            reply = c.request(msgpack.packb(body), 9)
            assert not reply["ok"] and reply["errno"] == errno.EINVAL and what in reply["error"]
        bad = c.request(msgpack.packb({"v": 2, "op": "release", "id": 3,
                                       "leases": [[1, -1]]}), 3)
        assert bad["errno"] == errno.EINVAL and "'leases'" in bad["error"]
        # a file a release names must be one name in the lease's directory
        for files, what in (([[1, 0, "../etc/passwd"]], "'files'"), ([[1, 0, "a/b"]], "'files'"),
                            ([[1, 0, ".."]], "'files'"), ([[1, 0, "x" * 256]], "'files'"),
                            ([[1, -1, "f"]], "'files'"), ([[0, 0, "f"]], "'files'"),
                            ([[1, 0, "f"]] * 1025, "'files'"), ([], "no lease and no file")):
            bad = c.request(msgpack.packb({"v": 2, "op": "release", "id": 4, "leases": [],
                                           "files": files}), 4)
            assert bad["errno"] == errno.EINVAL and what in bad["error"], files
            assert "\n" not in bad["error"]
        assert c.ping() == "round_robin"                           # still serving


def test_a_lease_using_an_ost_that_became_unusable_is_revoked_on_the_next_reply():
    with fed_by_mds() as (svc, publish):
        with MapperClient(svc.endpoint, timeout_s=2) as c:
            wait_for(lambda: publish(mds_body()) or svc.store.ost_count == 4, what="state")
            held = c.lease(4, "app.1", 1, path="/lustre/run")
            assert sorted(o for osts in held.layouts for o in osts) == [0, 1, 2, 3]
            publish(mds_body(inactive={3}))
            wait_for(lambda: not svc.store.snapshot.osts[3].active, what="OST 3 inactive")
            nxt = c.lease(4, "app.1", 1, path="/lustre/run")
            assert nxt.revoke == (held.id,)                        # it held OST 3
            assert all(3 not in osts for osts in nxt.layouts)      # and nothing new uses it
            assert c.lease(1, "app.1", 1, path="/lustre/run").revoke == ()   # named once


# ---------------------------------------------------------------------- the book alone
def test_book_returns_only_the_holders_leases_and_expires_the_rest_in_order():
    now = [100.0]
    book = LeaseBook(lease_s=2.0, max_layouts=8, peer_quota=10, clock=lambda: now[0])
    create = CreateRequest("app.1", 1, 1 << 20)
    a = book.add("alice", "", create, [Placement((i,), "rr") for i in range(3)], version=1)
    b = book.add("bob", "", create, [Placement((3,), "rr")], version=1, lifetime_s=5.0)
    assert (book.held("alice"), book.grantable("alice", 100)) == (3, 7)
    assert book.release("bob", a.id, 0) is None                   # not bob's
    back = book.release("alice", a.id, 1)
    # the unused layouts are the lease's after its first (the lease is rotated by its id)
    assert back is not None and back.layouts == a.layouts[1:] and book.held("alice") == 0
    assert sorted(a.layouts) == [(0,), (1,), (2,)]
    now[0] = 104.0
    assert book.expire() == []
    now[0] = 105.0
    gone = book.expire()
    assert [g.lease.id for g in gone] == [b.id] and gone[0].layouts == ((3,),)
    assert len(book) == 0 and book.layouts_held() == 0


def test_decode_v2_keeps_the_v1_field_rules():
    req = decode_v2(msgpack.unpackb(encode_lease_request(5, 3, "app.1", 2, 1 << 20, GIB,
                                                         "/lustre/d", "flash")), 5)
    assert (req.op, req.lease_count, req.version) == ("lease", 3, 2)
    assert req.create == CreateRequest("app.1", 2, 1 << 20, GIB, "flash", "/lustre/d")
    with pytest.raises(wire.WireError) as bad:
        decode_v2(msgpack.unpackb(encode_lease_request(5, 3, "app.1", 2, 1000)), 5)
    assert bad.value.errno == errno.EINVAL and "stripe_size 1000" in bad.value.reason


class Broken:
    """A primary that answers with an unusable, duplicated OST list."""
    name = "broken"

    def allocate(self, snapshot, request):
        from lustre_alloc.mapper.policies.placement import Placement
        return Placement((0, 0, 99), self.name)


def _fallback_share_alert(registry) -> float:
    """LustreAllocFallbacksRising's expression (deploy/prometheus/lustre-alloc.rules.yml) on
    counters that started at 0: the increase ratio is the rate ratio over any window."""
    import re
    from pathlib import Path
    import yaml
    rules = yaml.safe_load((Path(__file__).resolve().parents[2]
                            / "deploy/prometheus/lustre-alloc.rules.yml").read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"]
               if r.get("alert") == "LustreAllocFallbacksRising"]
    num, den = re.findall(r"rate\((lustre_alloc_mapper_[a-z_]+)(\{[^}]*\})?\[", rule["expr"])
    assert num == ("lustre_alloc_mapper_layouts_total", '{result="fallback"}')
    assert den == ("lustre_alloc_mapper_layouts_total", "")
    threshold = float(re.search(r">\s*([0-9.]+)", rule["expr"]).group(1))
    fallback = registry.get_sample_value("lustre_alloc_mapper_layouts_total",
                                         {"result": "fallback"})
    total = fallback + registry.get_sample_value("lustre_alloc_mapper_layouts_total",
                                                 {"result": "ok"})
    return fallback / total - threshold


def test_a_leased_layout_the_check_refuses_is_replaced_and_counted_as_a_fallback():
    """The one decision path: a leased layout the placement check refuses is replaced by the
    fallback's (reason ``check``), counted as per-create ones are, and the shipped alert on
    the fallbacks' share sees lease traffic."""
    svc = make_service(static_cluster="4x2", policy="round_robin")
    try:
        with MapperClient(svc.endpoint) as c:
            healthy = c.lease(8, "j", 2)
            assert len(healthy.layouts) == 8
            assert _fallback_share_alert(svc.metrics.registry) < 0        # quiet
            svc.policy.primary = Broken()
            lease = c.lease(8, "j", 3)
        assert len(lease.layouts) == 8 and lease.policy == "lustre_qos"
        for osts in lease.layouts:
            assert len(osts) == 3 == len(set(osts)) and set(osts) <= set(range(8))
        reg = svc.metrics.registry
        assert reg.get_sample_value("lustre_alloc_mapper_fallbacks_total",
                                    {"reason": "check"}) == 8
        assert reg.get_sample_value("lustre_alloc_mapper_check_violations_total") == 8
        assert reg.get_sample_value("lustre_alloc_mapper_layouts_total",
                                    {"result": "fallback"}) == 8
        assert _fallback_share_alert(reg) > 0                              # fires
        assert svc.path.check_violations == 8
    finally:
        svc.stop()


def test_round_robin_leases_held_at_once_start_apart_and_one_alone_keeps_the_order():
    book = LeaseBook(lease_s=2.0, max_layouts=64, peer_quota=64)
    create = CreateRequest("app.1", 1, 1 << 20)
    window = [Placement((i,), "round_robin") for i in range(4)]
    held = [book.add("p", "", create, window, version=1) for _ in range(4)]
    assert sorted(lease.layouts[0] for lease in held) == [(0,), (1,), (2,), (3,)]
    for lease in held:                       # every one given back: the next is alone
        book.release("p", lease.id, 1)
    assert book.add("p", "", create, window, version=1).layouts[0] == (0,)
    # the flow's lists come cheapest first: never rotated
    flow = [Placement((i,), "mcmf") for i in range(4)]
    assert book.add("p", "", create, flow, version=1).layouts[0] == (0,)


def test_alike_osts_leave_a_class_to_lustre_for_one_lifetime():
    """The default mcmf on alike OSTs: the lease is refused with ``allocator: "lustre"``
    for one lifetime (the client creates plainly meanwhile); nothing is decided or
    booked, and the answer is counted. Per-create requests still get layouts."""
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False,
                       layout_lease_s=1.5)
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            with pytest.raises(LeaseRefused) as left:
                c.lease(8, "app.1", 2, expected_bytes=GIB, path="/lustre/run")
            assert left.value.allocator == "lustre" and left.value.retry_ms == 1500
            assert left.value.errno == errno.EAGAIN and "round_robin" in left.value.reason
            assert left.value.per_create is False
            assert sum(_load(svc).values()) == 0
            assert len(c.alloc("app.1", 2).osts) == 2
        assert svc.metrics.leases.labels("lustre")._value.get() == 1
        assert svc.metrics.leases.labels("granted")._value.get() == 0
    finally:
        svc.stop()
