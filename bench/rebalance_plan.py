"""Benchmark: plan time of the rebalance planner, 1M files on 3600 OSTs.

The cluster: 3600 OSTs of 100 TiB at 1 GiB/s; 3240 hold the files (an expansion added
360 empty OSTs), a tenth of those are 10% fuller (drift). Files: 1M, log-normal sizes
(median 1 GiB), stripe count 1 (90%), 4 (8%) or 16 (2%), access rate proportional to
size with log-normal noise. Budget 20% of each OST's bandwidth.

Prints the median plan time, the floor (``numpy.sort`` of the same 1M sizes, timed in
the same run) and their ratio, plus the plan's balance. Timings are measurements, not
assertions; on the shared 2-core machine they are noisy, so compare ratios.
Usage: ``python bench/rebalance_plan.py [--files 1000000] [--osts 3600] [--repeat 3]``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from lustre_alloc.rebalance.plan import FileTable, MigrationOsts, PlanTargets, plan_migration  # noqa: E402

TIB_KIB = 100 * (1 << 30)          # 100 TiB in KiB


def build(n_files: int, n_osts: int, seed: int = 7) -> tuple[MigrationOsts, FileTable]:
    rng = np.random.default_rng(seed)
    old = int(n_osts * 0.9)
    k = rng.choice([1, 4, 16], size=n_files, p=[0.90, 0.08, 0.02])
    ptr = np.concatenate(([0], np.cumsum(k)))
    first = rng.integers(0, old, size=n_files)
    # Consecutive OSTs from a random start (what round-robin striping produces).
    stripe = np.arange(int(ptr[-1])) - np.repeat(ptr[:-1], k)
    osts = (np.repeat(first, k) + stripe) % old
    sizes = np.floor(rng.lognormal(np.log(1 << 30), 1.2, n_files))
    access = sizes * 1e-4 * rng.lognormal(0.0, 0.5, n_files)
    used = np.bincount(osts, np.repeat(sizes / k, k), minlength=n_osts) / 1024
    hot = rng.choice(old, size=old // 10, replace=False)
    used[hot] *= 1.10
    table = MigrationOsts(index=np.arange(n_osts), kbytes_total=np.full(n_osts, float(TIB_KIB)),
                     kbytes_used=used, rate_bytes_s=np.full(n_osts, float(1 << 30)),
                     can_receive=np.ones(n_osts, bool), can_read=np.ones(n_osts, bool),
                     draining=np.zeros(n_osts, bool))
    files = FileTable(ids=[""] * n_files, size_bytes=sizes, ost_ptr=ptr, ost_index=osts,
                      access_bytes_s=access, stripe_size=np.full(n_files, 1 << 20))
    return table, files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--osts", type=int, default=3600)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    table, files = build(args.files, args.osts)
    targets = PlanTargets(budget_fraction=0.2)
    plan_s, floor_s = [], []
    plan = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        np.sort(files.size_bytes)
        floor_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        plan = plan_migration(table, files, targets)
        plan_s.append(time.perf_counter() - t0)
    p, f = statistics.median(plan_s), statistics.median(floor_s)
    s = plan.summary
    print(f"files={args.files} osts={args.osts} repeat={args.repeat}")
    print(f"plan_s={p:.3f}  floor_sort_s={f:.4f}  ratio={p / f:.0f}x  (target: plan <= 10 s)")
    print(f"moved {s.files_moved} files, {s.bytes_written / (1 << 40):.1f} TiB; "
          f"fill max/mean {s.fill_max_mean_before:.3f} -> {s.fill_max_mean_after:.3f}; "
          f"load max/mean {s.load_max_mean_before:.3f} -> {s.load_max_mean_after:.3f}; "
          f"unplaced {s.files_unplaced}; est. duration {s.duration_s / 3600:.1f} h at 20%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
