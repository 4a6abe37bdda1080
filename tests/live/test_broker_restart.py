"""kill -9 and restart of the broker: the mapper marks the servers stale and answers from
its fallback meanwhile, never deciding on statistics older than two collector intervals;
the collectors and the mapper reconnect by themselves and the primary decides again."""
from __future__ import annotations

import threading
import time

import pytest

from lustre_alloc.mapper.service.client import MapperClient, MapperError, MapperTimeout

from tests.support import wait_for

from .conftest import INTERVAL_S, MAX_AGE_S, READY_TIMEOUT_S

pytestmark = pytest.mark.timeout(180)
RECEIPT_SLACK_S = 0.3
"""The mapper times a sample when it drains it from its socket (every 20 ms while idle):
a sample published just before the kill can be timed slightly after it."""


class Prober(threading.Thread):
    """Allocates every 20 ms and keeps (send time, receive time, policy, fallback)."""

    def __init__(self, endpoint: str):
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.replies: list[tuple[float, float, str, str]] = []
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with MapperClient(self.endpoint, timeout_s=5.0) as client:
            while not self.stop.is_set():
                t0 = time.time()
                try:
                    lay = client.alloc("probe.1", 2, 1 << 20, expected_bytes=1 << 30)
                except (MapperError, MapperTimeout) as exc:
                    self.failures.append(repr(exc))
                else:
                    self.replies.append((t0, time.time(), lay.policy, lay.fallback))
                time.sleep(0.02)


def test_broker_kill9_servers_go_stale_then_everyone_reconnects(live):
    lv = live(policy="round_robin")  # no round budget: "" vs "stale" is the only switch
    stack = lv.stack
    collectors = {n: p.pid for n, p in stack.procs.items() if n.startswith("collector-")}
    prober = Prober(stack.endpoints.mapper)
    prober.start()
    def replies_since(t: float, fallback: str, count: int = 1) -> list:
        found = [r for r in prober.replies if r[0] > t and r[3] == fallback]
        return found if len(found) >= count else []
    try:
        wait_for(lambda: replies_since(0.0, "", 20), 30, "the primary answering the prober")
        t_kill = stack.kill("broker")
        t_stale = wait_for(lambda: replies_since(t_kill, "stale"), 30,
                           "stale replies after the kill")[0][1]
        # an outage long enough to judge: replies sent after the stale limit has passed
        wait_for(lambda: replies_since(t_kill + MAX_AGE_S + RECEIPT_SLACK_S, "stale", 20), 30,
                 "fallback replies through the outage")
        t_restart = time.time()
        stack.start_broker()
        t_back = wait_for(lambda: replies_since(t_restart, ""), READY_TIMEOUT_S,
                          "the primary again after the restart")[0][1]
        wait_for(lambda: [r for r in prober.replies if r[0] > t_back][19:], 30,
                 "replies after the primary came back")
    finally:
        prober.stop.set()
        prober.join(10)

    assert prober.failures == []
    assert all(p.poll() is None for n, p in stack.procs.items() if n.startswith("collector-"))
    assert {n: p.pid for n, p in stack.procs.items() if n.startswith("collector-")} == collectors
    # No decision by the primary on statistics older than 2 intervals: after the last sample
    # (at most the kill), only the fallback answers once 2 intervals have passed.
    late_primary = [r for r in prober.replies
                    if t_kill + MAX_AGE_S + RECEIPT_SLACK_S < r[0] < t_restart and r[3] == ""]
    assert late_primary == []
    outage = [r for r in prober.replies if t_kill + MAX_AGE_S + RECEIPT_SLACK_S < r[0] < t_restart]
    assert outage and all(r[3] == "stale" and r[2] == "lustre_qos" for r in outage)
    # the stale rule switched on within 2 intervals (+ slack for a loaded machine)
    assert t_stale - t_kill < MAX_AGE_S + 5.0
    after = [r for r in prober.replies if r[0] > t_back]
    assert after and all(r[3] == "" and r[2] == "round_robin" for r in after)
    # every server publishes again through the new broker (the primary needed only some)
    wait_for(lambda: stack.metrics()['lustre_alloc_mapper_stale_servers{fsname="demofs"}'] == 0,
             30, "no stale server after the restart")
    print(f"broker outage: stale after {t_stale - t_kill:.2f} s (limit {MAX_AGE_S} s), "
          f"primary again {t_back - t_restart:.2f} s after the broker restart "
          f"(interval {INTERVAL_S} s); {len(outage)} fallback replies, 0 errors")
