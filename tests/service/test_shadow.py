"""Shadow mode on the mapper: decide as usual, book the choice as a live one until the shim
reports Lustre's layout (then Lustre's replaces it), count nothing as placed, answer "use
Lustre's allocator", pair each decision with the layout the shim reports."""
from __future__ import annotations

import errno

import pytest

from lustre_alloc.mapper.service.client import MapperClient, MapperError, ShadowDecision
from lustre_alloc.mapper.service import wire

from .conftest import make_service

GIB = 1 << 30


@pytest.fixture
def shadow_mcmf():
    # every request solved in its round (no lists planned ahead): a decision sees what
    # was booked just before it
    svc = make_service(static_cluster="4x2", policy="mcmf", scope={"shadow": True},
                       plan_ahead=False)
    yield svc
    svc.stop()


def _shadow(c: MapperClient, i: int, **kw) -> ShadowDecision:
    with pytest.raises(ShadowDecision) as got:
        c.alloc("app.1", 2, expected_bytes=GIB, path=f"/lustre/run/f{i}", **kw)
    return got.value


@pytest.mark.parametrize("plan_ahead", [False, True])
def test_shadow_decides_as_live_and_sends_the_shim_to_lustre(plan_ahead):
    lists = {}
    for shadow in (True, False):
        svc = make_service(static_cluster="4x2", policy="mcmf", scope={"shadow": shadow},
                           plan_ahead=plan_ahead)
        try:
            with MapperClient(svc.endpoint, timeout_s=5) as c:
                if shadow:
                    decisions = [_shadow(c, i) for i in range(12)]
                    _shadow_counts(svc, decisions)
                    lists[shadow] = [d.osts for d in decisions]
                else:
                    lists[shadow] = [c.alloc("app.1", 2, expected_bytes=GIB,
                                             path=f"/lustre/run/f{i}").osts for i in range(12)]
            load = svc.policy.primary.predicted_load()
            # unreported shadow decisions stay booked as live ones are
            assert sum(load.values()) == pytest.approx(12 * GIB, rel=0.01)
        finally:
            svc.stop()
    # so the shadow lists are the lists this mapper hands out live, not piled on the OSTs
    # that were cheapest at the start
    assert lists[True] == lists[False]
    assert len({i for osts in lists[True] for i in osts}) == 8


def _shadow_counts(svc, decisions) -> None:
    for d in decisions:
        # an old shim sees an error reply (EPERM) and uses Lustre's allocator
        assert d.errno == errno.EPERM and d.policy == "mcmf" and len(d.osts) == 2
    assert len({d.token for d in decisions}) == 12 and all(d.token > 0 for d in decisions)
    # nothing is counted as placed
    assert sum(svc.metrics.stripes.get(svc.store.fsname, {}).values()) == 0
    assert svc.metrics.requests.labels("shadow")._value.get() == 12
    assert svc.metrics.requests.labels("ok")._value.get() == 0


def test_reports_pair_both_choices_and_book_lustres_layout(shadow_mcmf):
    svc = shadow_mcmf
    with MapperClient(svc.endpoint, timeout_s=5) as c:
        d0 = _shadow(c, 0)
        assert c.report(d0.token, list(d0.osts), 1 << 20) == "ok"      # Lustre agreed
        # Lustre's stripes are pending now (in place of the mapper's own booking, the same
        # OSTs here): the next decision goes elsewhere
        assert set(svc.policy.primary.predicted_load()) == set(d0.osts)
        d1 = _shadow(c, 1)
        assert not set(d1.osts) & set(d0.osts)
        lustre = list(d0.osts)                          # Lustre piles onto the same two
        assert c.report(d1.token, lustre, 1 << 20) == "ok"
        assert c.report(d1.token, lustre, 1 << 20) == "duplicate"
        assert c.report(d1.token + 10**9, [0], 1 << 20) == "unknown"
        with pytest.raises(MapperError) as bad:
            c.report(d1.token, [3, 3], 1 << 20)
        assert bad.value.errno == errno.EINVAL and "twice" in bad.value.reason
        assert c.ping() == "mcmf"                                       # still serving
    # d1's own choice came off the books when Lustre's layout was reported
    load = svc.policy.primary.predicted_load()
    assert set(load) == set(d0.osts) and load[d0.osts[0]] == pytest.approx(GIB)
    with svc.lock:
        rep = svc.desk.shadow_report(3600)
    assert (rep["decisions"], rep["reported"], rep["unreported"]) == (2, 2, 0)
    assert rep["same_osts"] == 0.5 and rep["shared_stripes"] == 0.5
    assert rep["ledger"]["duplicate"] == 1 and rep["ledger"]["unknown"] == 1
    assert (rep["mapper"]["osts_used"], rep["lustre"]["osts_used"]) == (4, 2)
    assert rep["mapper"]["stripes_max_over_mean"] == 1.0
    assert rep["lustre"]["stripes_max_over_mean"] == 2.0
    assert svc.metrics.shadow_reports.labels("ok")._value.get() == 2


def test_shadow_per_file_system_and_scope_still_applies():
    svc = make_service(static_cluster="4x2", policy="round_robin",
                       scope={"fsnames": {"static": "shadow"}, "exclude_paths": ["/lustre/tmp"]})
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            d = _shadow(c, 0)
            assert d.policy == "round_robin"
            with pytest.raises(MapperError) as out:
                c.alloc("app.1", 1, path="/lustre/tmp/x")
            assert not isinstance(out.value, ShadowDecision) and out.value.errno == errno.EPERM
    finally:
        svc.stop()


def test_report_frames_are_validated():
    ok = wire.decode_request(wire.encode_report(7, 99, [4, 2], 1 << 20, "scratch"))
    assert ok.op == "report" and ok.report == wire.ShadowReport(99, (4, 2), 1 << 20)
    assert ok.fsname == "scratch"
    for token, osts, size, field in ((0, [1], 1 << 20, "shadow"), (5, [], 1 << 20, "osts"),
                                     (5, [0x10000], 1 << 20, "osts"),
                                     (5, [1], 1000, "stripe_size")):
        with pytest.raises(wire.WireError) as e:
            wire.decode_request(wire.encode_report(7, token, osts, size))
        assert e.value.errno == errno.EINVAL and field in e.value.reason
