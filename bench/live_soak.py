"""RSS of the mapper and the broker over a soak of the live stack (default 10 minutes):
the real broker, mapper and collectors over emulated Lustre servers on 127.0.0.1, with
client processes allocating at a steady pace the whole time.

Prints a table of (elapsed, mapper RSS, broker RSS, requests, unique memory (USS) of the
mapper's planner child process) every ``--every`` seconds, then the
growth ratios last/first and last/(sample after the first minute, once warmed up). Prints;
never asserts.

    .venv/bin/python bench/live_soak.py [--minutes 10] [--every 30] [--clients 4]
        [--pause 0.002] [--policy mcmf]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from lustre_alloc.simulator.cluster import build_cluster  # noqa: E402
from lustre_alloc.livestack.load import rss_mib, start_background_load  # noqa: E402
from lustre_alloc.livestack.stack import EmulatorPump, LiveStack  # noqa: E402
from lustre_alloc.livestack.emulator import EmulatedCluster  # noqa: E402
from lustre_alloc.simulator.scenario import load_scenario  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--every", type=float, default=30.0, help="seconds between RSS samples")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--pause", type=float, default=0.002, help="seconds between a client's requests")
    p.add_argument("--policy", default="mcmf")
    p.add_argument("--scenario", default="paper-32ost")
    p.add_argument("--interval", type=float, default=1.0, help="collector interval, s")
    args = p.parse_args()
    scenario = load_scenario(args.scenario)
    work = Path(tempfile.mkdtemp(prefix="live-soak-"))
    emu = EmulatedCluster(build_cluster(scenario.cluster, scenario.seed), work / "servers")
    pump = EmulatorPump(emu, None, args.interval / 2).start()
    stack = LiveStack(work, emu, interval_s=args.interval, policy=args.policy, log_level="warning")
    seconds = args.minutes * 60
    rows = []
    try:
        stack.start()
        clients = start_background_load(stack.endpoints.mapper, work / "soak", args.clients,
                                        seconds, args.pause)
        print(f"soak: {len(emu.osts)} OSTs, {args.clients} clients, {args.minutes:g} min, "
              f"policy {args.policy}; work dir {work}")
        print(f"{'elapsed s':>9} {'mapper MiB':>10} {'broker MiB':>10} {'requests':>9} "
              f"{'planner MiB':>11}")
        t0 = time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            m = stack.metrics()
            reqs = int(sum(v for k, v in m.items()
                           if k.startswith("lustre_alloc_mapper_requests_total")))
            mapper_pid = stack.procs["mapper"].pid
            row = (elapsed, rss_mib(mapper_pid), rss_mib(stack.procs["broker"].pid), reqs,
                   sum(c.memory_full_info().uss for c in
                       psutil.Process(mapper_pid).children(recursive=True)) / (1 << 20))
            rows.append(row)
            print(f"{row[0]:>9.0f} {row[1]:>10.1f} {row[2]:>10.1f} {row[3]:>9} {row[4]:>11.1f}",
                  flush=True)
            if elapsed >= seconds:
                break
            time.sleep(min(args.every, max(0.0, seconds - elapsed)))
        for c in clients:
            c.wait(120)
    finally:
        pump.stop()
        stack.stop()
    first = rows[0]
    warm = next((r for r in rows if r[0] >= 60), rows[0])
    last = rows[-1]
    print(f"growth mapper: last/first {last[1] / first[1]:.3f}, last/after-1-min "
          f"{last[1] / warm[1]:.3f}; broker: last/first {last[2] / first[2]:.3f}, "
          f"last/after-1-min {last[2] / warm[2]:.3f}; planner process: last/after-1-min "
          f"{last[4] / warm[4] if warm[4] else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
