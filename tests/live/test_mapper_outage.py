"""kill -9 of the mapper while applications create files under the shim: no create fails,
creates during the outage fall back within the client's timeout, and the restarted mapper
restores its learned state and serves layouts again."""
from __future__ import annotations

import os
import time

import pytest

from .conftest import FALLBACK_REASONS, READY_TIMEOUT_S
from tests.support import wait_for

pytestmark = pytest.mark.timeout(180)
TIMEOUT_MS = 100
SLACK_US = 400_000  # scheduling on a loaded 2-core machine, on top of the timeout
LEASE_S = 2.0       # the mapper's default layout_lease_s: a leased layout is used no longer


def test_mapper_kill9_no_create_fails_fallback_then_restored(live):
    lv = live(policy_params={"mcmf": {"alike_to_lustre": False}})   # the mapper's own layouts
    stack = lv.stack
    files, period = 360, 0.025          # 9 s of creates
    proc = lv.writer("app", files, period, timeout_ms=TIMEOUT_MS)

    # healthy creates from the mapper's primary, and a periodic save of its learned state
    wait_for(lambda: lv.record.exists() and sum(
        r["policy"] == "mcmf" for r in lv.records()) >= 20, 30, "20 mcmf layouts")
    wait_for(lambda: stack.state_file.exists(), 10, "the mapper's periodic state save")
    saved_before = stack.state_file.stat().st_size
    t_kill = stack.kill("mapper")
    # an outage long enough to judge: creates that asked the stopped mapper and fell back
    wait_for(lambda: sum(float(r["ts"]) > t_kill + 0.05 and r["result"] == "default"
                         and r["reason"] != "mapper_backoff" for r in lv.records()) >= 5,
             30, "creates falling back while the mapper is down")
    t_restart = time.time()
    stack.start_mapper()
    stack.wait_ready(READY_TIMEOUT_S)
    t_ready = time.time()
    result = lv.writer_result("app", proc)

    assert result["returncode"] == 0, result
    assert result["failed_creates"] == 0 and result["creates"] == files, result
    assert len(os.listdir(lv.data / "app")) == files
    recs = lv.records()
    assert len(recs) == files                      # every create went through the shim

    during = [r for r in recs if t_kill + 0.05 < float(r["ts"]) < t_restart]
    assert during, "no create during the outage"
    for r in during:
        if r["result"] == "layout":     # leased before the kill, used within its lifetime
            assert r["lease"] and float(r["ts"]) < t_kill + LEASE_S, r
            continue
        assert r["result"] == "default" and r["reason"] in FALLBACK_REASONS, r
        assert float(r["mapper_us"]) <= TIMEOUT_MS * 1000 + SLACK_US, r
    asked = [r for r in during if r["result"] == "default" and r["reason"] != "mapper_backoff"]
    assert asked, "no create asked the stopped mapper"

    after = [r for r in recs if float(r["ts"]) > t_ready]
    assert any(r["result"] == "layout" and r["policy"] == "mcmf" for r in after), \
        "the restarted mapper never placed a file"

    # the restarted mapper loaded the state saved before the kill
    events = [e.get("event") for e in stack.log_events("mapper")]
    starts = [i for i, e in enumerate(events) if e == "mapper_start"]
    assert len(starts) == 2
    loaded = [i for i, e in enumerate(events) if e == "state_loaded"]
    assert len(loaded) == 1 and starts[0] < loaded[0] < starts[1], events  # fresh, then restored
    assert saved_before > 0
    print(f"outage: {len(during)} creates fell back "
          f"({sum(r['reason'] == 'mapper_backoff' for r in during)} by back-off), "
          f"max fallback wait {max(float(r['mapper_us']) for r in asked) / 1000:.1f} ms; "
          f"mapper ready {t_ready - t_restart:.2f} s after restart")
