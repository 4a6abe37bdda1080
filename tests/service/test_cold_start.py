"""A mapper is ready when it binds: what a first decision needs is built before the request
socket opens (``MapperService._prepare``), so the first create is not the slow one that
runs past the shim's 50 ms timeout. ``bench/first_request.py`` measures the time; these
tests check the order of things and that preparing decides nothing."""
from __future__ import annotations

import pytest

import lustre_alloc.mapper.policies.round_robin as round_robin_module
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.policies.lustre_qos import LustreQos
from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.policies.round_robin import RoundRobin
from lustre_alloc.mapper.service.client import MapperClient
from lustre_alloc.mapper.service.sockets import ServiceSockets
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster

from tests.service.conftest import make_service

GIB_KB = 1 << 20


class Counted:
    """Counts calls of a function or method it wraps."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str):
        self.calls = 0
        original = getattr(owner, name)

        def counted(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(owner, name, counted)


@pytest.fixture
def at_bind(monkeypatch):
    """Counters of the per-snapshot builds, and their values when the request socket binds."""
    counters = {"rates": Counted(monkeypatch, OstRateTracker, "update"),
                "rr_array": Counted(monkeypatch, round_robin_module, "build_rr_array")}
    seen: dict[str, int] = {}
    bind = ServiceSockets.bind

    def bind_and_look(self):
        seen.update({k: c.calls for k, c in counters.items()})
        return bind(self)
    monkeypatch.setattr(ServiceSockets, "bind", bind_and_look)
    return counters, seen


@pytest.mark.parametrize("kind", ["alloc", "lease"])
def test_the_first_request_finds_the_decision_state_built_before_the_socket_opened(at_bind,
                                                                                    kind):
    counters, seen = at_bind
    svc = make_service(static_cluster="8x4", policy="mcmf", plan_process=False,
                       policy_params={"mcmf": {"alike_to_lustre": False}})
    try:
        # built before the bind: speed estimates (the round view, the pricer) and the
        # round-robin arrays of the primary's regime and of the fallback
        assert seen["rates"] >= 2 and seen["rr_array"] >= 2
        with MapperClient(svc.endpoint, timeout_s=10) as c:
            if kind == "alloc":
                c.alloc("job1", 4)
            else:
                c.lease(4, "job1", 4)
        # ... and the first request rebuilt none of it (the snapshot did not change)
        assert {k: c.calls for k, c in counters.items()} == seen
    finally:
        svc.stop()


def test_the_planner_process_is_ready_when_the_request_socket_opens(monkeypatch):
    ready_at_bind: list[bool] = []
    bind = ServiceSockets.bind
    services = []

    def bind_and_look(self):
        planner = services[0].only().background_planner if services else None
        ready_at_bind.append(planner is not None and planner.worker is not None
                             and planner.worker.ready)
        return bind(self)
    monkeypatch.setattr(ServiceSockets, "bind", bind_and_look)
    from lustre_alloc.mapper.service.config import load_config
    from lustre_alloc.mapper.service.server import MapperService
    svc = MapperService(load_config(None, {"bind": "tcp://127.0.0.1:*", "log_level": "warning",
                                           "static_cluster": "4x2", "policy": "mcmf"}))
    services.append(svc)
    svc.start(timeout_s=60)
    try:
        assert ready_at_bind == [True]
    finally:
        svc.stop()


def imbalanced(osses: int = 4, per: int = 4):
    """A cluster whose OSTs' free space differs enough for QOS to weigh them."""
    return make_uniform_cluster(osses, per, 100 * GIB_KB,
                                {i: (i * 37 % 90) * GIB_KB for i in range(osses * per)})


@pytest.mark.parametrize("make", [lambda: RoundRobin(seed=3), lambda: LustreQos(seed=3),
                                  lambda: McmfPolicy(seed=3)],
                         ids=["round_robin", "lustre_qos", "mcmf"])
def test_preparing_decides_nothing(make):
    """A prepared policy places the next 40 files as an unprepared one does: preparing
    moves no round-robin cursor, draws no weighted choice, books no load."""
    snap_a, snap_b = imbalanced(), imbalanced()
    prepared, plain = make(), make()
    prepared.prepare(snap_a)
    requests = [CreateRequest(f"job{i % 3}", 1 + i % 4) for i in range(40)]
    got_prepared = [prepared.allocate(snap_a, r).osts for r in requests]
    got_plain = [plain.allocate(snap_b, r).osts for r in requests]
    assert got_prepared == got_plain


def test_round_robin_prepares_every_pool():
    snap = make_uniform_cluster(4, 2, 100 * GIB_KB)
    snap.pools = {"fast": frozenset({0, 2, 4, 6})}
    rr = RoundRobin()
    rr.prepare(snap)
    assert rr.state(None) is not None and rr.state("fast") is not None
    assert [i for i in rr.state("fast").array if i is not None] != []
