"""Collector CPU% and RSS on a fixture tree with 8 OSTs (paper Section IV-A2: the OSS
publisher stays under 1% CPU and 12 MB).

Builds a temporary proc/sys tree whose 8 OSTs are symlinks to the 4 OSTs of the real Lustre
2.10.1 fixture, runs ``lustre-alloc-collector`` against an in-process broker at each interval,
and samples the collector process with psutil. Prints a table; asserts nothing.

    .venv/bin/python bench/collector_overhead.py [--duration 60] [--intervals 1,5]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lustre_alloc.collectors.broker import Broker  # noqa: E402
from lustre_alloc.collectors.subscriber import Subscriber  # noqa: E402

HPE = ROOT / "tests/fixtures/lustre/hpe-lustre-2.10.1"
SRC_OSTS = ["lustrefs-OST0000", "lustrefs-OST0002", "lustrefs-OST0004", "lustrefs-OST0006"]


def build_tree(root: Path, n_osts: int = 8) -> Path:
    """proc/sys tree with ``n_osts`` OSTs linked to the fixture's (files read in place)."""
    lustre = root / "proc/fs/lustre"
    (lustre / "obdfilter").mkdir(parents=True)
    (lustre / "osd-zfs").mkdir()
    for i in range(n_osts):
        src = SRC_OSTS[i % len(SRC_OSTS)]
        name = f"bench-OST{i:04x}"
        os.symlink(HPE / "proc/fs/lustre/obdfilter" / src, lustre / "obdfilter" / name)
        os.symlink(HPE / "proc/fs/lustre/osd-zfs" / src, lustre / "osd-zfs" / name)
    (root / "proc/sys").mkdir(parents=True)
    os.symlink(HPE / "proc/sys/lnet", root / "proc/sys/lnet")
    (root / "sys/fs").mkdir(parents=True)
    os.symlink(HPE / "sys/fs/lustre", root / "sys/fs/lustre")
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60.0, help="seconds measured per run")
    ap.add_argument("--intervals", default="1,5", help="comma-separated intervals, s")
    ap.add_argument("--osts", type=int, default=8)
    args = ap.parse_args()
    intervals = [float(x) for x in args.intervals.split(",")]
    with tempfile.TemporaryDirectory() as tmp, \
            Broker("tcp://127.0.0.1:*", "tcp://127.0.0.1:*", "tcp://127.0.0.1:*") as broker:
        tree = build_tree(Path(tmp), args.osts)
        sub = Subscriber(broker.endpoints.backend, None).start()
        procs = {}
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for interval in intervals:  # run concurrently: each is measured on its own process
            for compress in (False,):
                cmd = [sys.executable, "-m", "lustre_alloc.collectors.cli", "--role", "oss", "--root", str(tree),
                       "--broker", broker.endpoints.frontend, "--interval", str(interval),
                       "--host", f"bench-{interval:g}s", "--source", "files", "--compress",
                       "--log-level", "warning"]
                procs[interval] = subprocess.Popen(cmd, env=env)
        try:
            time.sleep(3.0)  # imports and first sample
            ps = {i: psutil.Process(p.pid) for i, p in procs.items()}
            cpu0 = {i: sum(p.cpu_times()[:2]) for i, p in ps.items()}
            rss_max = {i: 0 for i in ps}
            received: dict[str, int] = {}
            while sub.recv(0.05) is not None:  # drop the warm-up samples
                pass
            t0 = time.monotonic()
            while time.monotonic() - t0 < args.duration:
                for i, p in ps.items():
                    rss_max[i] = max(rss_max[i], p.memory_info().rss)
                s = sub.recv(0.5)
                if s is not None:
                    received[s.host] = received.get(s.host, 0) + 1
            elapsed = time.monotonic() - t0
            cpu = {i: sum(p.cpu_times()[:2]) - cpu0[i] for i, p in ps.items()}
            uss = {i: p.memory_full_info().uss for i, p in ps.items()}
        finally:
            for p in procs.values():
                p.terminate()
                p.wait(10)
            sub.close()
        bytes_per_msg = broker.stats.bytes_in / max(1, broker.stats.messages_in)
    print(f"collector overhead: {args.osts} OSTs (2.10.1 fixture), {elapsed:.0f} s measured, "
          f"zlib on, {bytes_per_msg:.0f} B/sample on the wire")
    print(f"{'interval s':>10} {'samples':>8} {'CPU %':>7} {'RSS MB':>7} {'USS MB':>7} "
          f"{'CPU target':>10} {'RSS target':>10}")
    for i in intervals:
        pct = 100.0 * cpu[i] / elapsed
        target = "<= 0.5%" if i >= 5 else "(paper <=1%)"
        print(f"{i:>10g} {received.get(f'bench-{i:g}s', 0):>8} {pct:>7.2f} "
              f"{rss_max[i] / 2**20:>7.1f} {uss[i] / 2**20:>7.1f} {target:>10} {'<= 40 MB':>10}")
    for i in intervals:
        print(f"ratio CPU/target at {i:g} s: {100.0 * cpu[i] / elapsed / (0.5 if i >= 5 else 1.0):.2f}; "
              f"RSS/40 MB: {rss_max[i] / 2**20 / 40:.2f}")


if __name__ == "__main__":
    main()
