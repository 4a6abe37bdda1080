"""Allocation load on the live stack: 16 client processes against the real mapper, which is
fed by real collectors over emulated Lustre servers through the real broker (all on
127.0.0.1, ``lustre_alloc/livestack/stack.py``), for 60 s.

Printed: requests, allocations/s, errors, timeouts, fallback replies, client-side round trip
p50/p99/max, and the mapper's and broker's RSS at the end. Prints; never asserts timings.

    .venv/bin/python bench/live_load.py [--clients 16] [--seconds 60] [--policy mcmf]
        [--scenario paper-32ost]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.simulator.cluster import build_cluster  # noqa: E402
from lustre_alloc.livestack.load import rss_mib, run_load  # noqa: E402
from lustre_alloc.livestack.stack import EmulatorPump, LiveStack  # noqa: E402
from lustre_alloc.livestack.emulator import EmulatedCluster  # noqa: E402
from lustre_alloc.simulator.scenario import load_scenario  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--policy", default="mcmf")
    p.add_argument("--scenario", default="paper-32ost")
    p.add_argument("--interval", type=float, default=1.0, help="collector interval, s")
    p.add_argument("--expected-mib", type=int, default=64,
                   help="expected_bytes of each request, MiB (64)")
    args = p.parse_args()
    scenario = load_scenario(args.scenario)
    work = Path(tempfile.mkdtemp(prefix="live-load-"))
    emu = EmulatedCluster(build_cluster(scenario.cluster, scenario.seed), work / "servers")
    pump = EmulatorPump(emu, None, args.interval / 2).start()
    stack = LiveStack(work, emu, interval_s=args.interval, policy=args.policy, log_level="warning")
    try:
        stack.start()
        r = run_load(stack.endpoints.mapper, work / "load", clients=args.clients,
                     seconds=args.seconds, expected_bytes=args.expected_mib << 20)
        mapper_rss, broker_rss = (rss_mib(stack.procs[n].pid) for n in ("mapper", "broker"))
    finally:
        pump.stop()
        stack.stop()
    print(f"live stack: {len(emu.osts)} OSTs on {len(emu.oss_names)} emulated OSSes, "
          f"collector interval {args.interval} s, policy {args.policy}; work dir {work}")
    print(f"{'clients':>7} {'seconds':>7} {'requests':>9} {'alloc/s':>8} {'errors':>6} "
          f"{'timeouts':>8} {'fallback':>8} {'p50 us':>8} {'p99 us':>8} {'max us':>8} "
          f"{'mapper MiB':>10} {'broker MiB':>10}")
    print(f"{r.clients:>7} {r.seconds:>7.0f} {r.requests:>9} {r.rate_per_s:>8.0f} {r.errors:>6} "
          f"{r.timeouts:>8} {r.fallbacks:>8} {r.p50_us:>8.0f} {r.p99_us:>8.0f} {r.max_us:>8.0f} "
          f"{mapper_rss:>10.1f} {broker_rss:>10.1f}")
    for kind, n in sorted(r.error_kinds.items(), key=lambda kv: -kv[1]):
        print(f"  error replies: {n} x {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
