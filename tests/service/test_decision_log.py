"""The sampled decision log: why a file went where it did, rate-limited."""
from __future__ import annotations

import logging

from lustre_alloc.mapper.explain.last_decisions import DecisionRecord
from lustre_alloc.mapper.policies.placement import CreateRequest, Placement
from lustre_alloc.mapper.service.client import MapperClient
from lustre_alloc.mapper.service.decision_record import DecisionLog
from lustre_alloc.mapper.state.placement_errors import NoSpaceError

from .conftest import make_service


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def test_budget_per_second_and_what_a_line_says(caplog):
    clock = Clock()
    d = DecisionLog(2.0, clock)
    req = CreateRequest(jobid="ior.1", stripe_count=2, path="/lustre/f", pool="flash")
    placed_rec = DecisionRecord.of("scratch", "place", req,
                                   Placement((3, 5), "mcmf", note="planned"), 7)
    refused_rec = DecisionRecord.of("scratch", "place", req, NoSpaceError("no usable OST"), 8)
    priced = {"chosen_expected_s": 0.5, "cheapest": [{"ost": 1, "expected_s": 0.25}]}
    with caplog.at_level(logging.INFO, logger="lustre_alloc.mapper.decisions"):
        written = [d.record(placed_rec, lambda r: priced) for _ in range(10)]
        clock.t += 1.0                                   # one second refills two lines
        written += [d.record(refused_rec) for _ in range(3)]
    assert written == [True, True] + [False] * 8 + [True, True, False]
    assert d.suppressed == 9 and d.written == 4
    placed, refused = caplog.records[0], caplog.records[2]
    assert (placed.event, placed.fsname, placed.jobid, placed.path, placed.pool) == \
        ("decision", "scratch", "ior.1", "/lustre/f", "flash")
    assert placed.osts == [3, 5] and placed.policy == "mcmf" and placed.state_version == 7
    assert placed.expected_s == 0.5 and placed.alternatives == [{"ost": 1, "expected_s": 0.25}]
    assert refused.errno == NoSpaceError.errno and refused.suppressed_before == 8
    assert refused.mode == "refused"
    assert DecisionLog(0.0, clock).record(placed_rec) is False


def test_the_service_logs_sampled_decisions(caplog):
    svc = make_service(static_cluster="4x2", policy="round_robin", decision_log_per_s=5.0)
    import time
    try:
        with caplog.at_level(logging.INFO, logger="lustre_alloc.mapper.decisions"):
            with MapperClient(svc.endpoint, timeout_s=2.0) as c:
                t0 = time.monotonic()
                for i in range(40):
                    c.alloc("app.1", 2, path=f"/lustre/f{i}")
                took_s = time.monotonic() - t0
    finally:
        svc.stop()
    lines = [r for r in caplog.records if getattr(r, "event", "") == "decision"]
    # a burst of 5, then 5 a second
    assert 5 <= len(lines) <= 5 + 5 * took_s + 1 and lines[0].path == "/lustre/f0"
    assert len(lines[0].osts) == 2 and lines[0].policy == "round_robin"
    # priced on the state it was decided on: the chosen list and the cheapest OSTs
    assert lines[0].expected_s > 0 and len(lines[0].alternatives) == 3
    assert svc.desk.log.suppressed == 40 - len(lines)
