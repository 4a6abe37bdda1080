"""Load on the live stack: 16 client processes allocating back to back for a few seconds
get zero errors and zero timeouts (p99 reported), and a short soak samples the mapper's and
the broker's RSS while the stack stays healthy (bench/live_load.py and bench/live_soak.py are
the long versions: 60 s, 10 minutes)."""
from __future__ import annotations

import time

import pytest

from lustre_alloc.livestack.load import rss_mib, run_load, start_background_load

pytestmark = pytest.mark.timeout(180)


def test_16_clients_zero_errors_p99_reported(live, tmp_path):
    lv = live()                                   # default primary: mcmf
    result = run_load(lv.stack.endpoints.mapper, tmp_path / "load", clients=16, seconds=4.0)
    print(f"16 clients x 4 s: {result.requests} requests ({result.rate_per_s:.0f}/s), "
          f"p50 {result.p50_us:.0f} us, p99 {result.p99_us:.0f} us, max {result.max_us:.0f} us, "
          f"{result.fallbacks} fallback replies")
    assert result.requests > 16
    assert (result.errors, result.timeouts) == (0, 0)
    assert result.p99_us > 0
    assert all(p.poll() is None for p in lv.stack.procs.values())


def test_short_soak_samples_rss_and_stays_healthy(live, tmp_path):
    lv = live(policy="round_robin")
    stack = lv.stack
    clients = start_background_load(stack.endpoints.mapper, tmp_path / "soak", 4, 6.0, 0.002)
    samples = []
    try:
        for _ in range(7):
            samples.append((rss_mib(stack.procs["mapper"].pid), rss_mib(stack.procs["broker"].pid)))
            time.sleep(1.0)
    finally:
        for c in clients:
            c.wait(60)
    assert all(c.returncode == 0 for c in clients)
    assert all(m > 0 and b > 0 for m, b in samples)
    assert all(p.poll() is None for p in stack.procs.values())
    # a loose bound for a few seconds (warm-up included); the 10-minute soak prints the ratio
    assert samples[-1][0] < 2 * samples[0][0] and samples[-1][1] < 2 * samples[0][1]
    assert stack.metrics()['lustre_alloc_mapper_stale_servers{fsname="demofs"}'] == 0
