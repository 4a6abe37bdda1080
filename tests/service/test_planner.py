"""The service's background planner (lustre_alloc/mapper/service/background_planner.py): requests are answered
from lists it planned, over real sockets, and every answer is a valid layout."""
from __future__ import annotations

import time

from lustre_alloc.mapper.service.client import MapperClient
from tests.service.conftest import make_service


def test_requests_are_answered_from_plans_the_background_thread_made():
    # the flow on every round (the default answers even load with Lustre's RR, unplanned)
    svc = make_service(static_cluster="4x2", policy="mcmf",
                       policy_params={"mcmf": {"regime": False}})
    try:
        assert svc.background_planner is not None and not svc.policy.primary.planner.inline
        seen = []
        # Requests until one is answered from a plan the background thread made (an event, not
        # a count): under a loaded CI the thread may not run during the first requests.
        deadline = time.monotonic() + 60
        with MapperClient(svc.endpoint) as c:
            k = 0
            while k < 60 or (svc.background_planner.plans.stats["hits"] == 0 and time.monotonic() < deadline):
                layout = c.alloc(f"job{k % 3}", 2, expected_bytes=(k % 4 + 1) << 20)
                assert len(set(layout.osts)) == 2 and set(layout.osts) <= set(range(8))
                seen.append(layout.policy)
                k += 1
        stats = svc.background_planner.plans.stats
        assert stats["planned"] > 0 and stats["hits"] > 0
        assert svc.background_planner.errors == 0 and set(seen) == {"mcmf"}
    finally:
        svc.stop()


def test_no_plan_ahead_solves_every_request_in_a_round():
    svc = make_service(static_cluster="4x2", policy="mcmf", plan_ahead=False)
    try:
        with MapperClient(svc.endpoint) as c:
            for k in range(5):
                c.alloc("j", 2)
        assert svc.background_planner is None and svc.policy.primary.plans is None
    finally:
        svc.stop()
