"""Expansion at plan level: how long until new OSTs reach the mean fill, ours vs lfs_migrate.

The simulator cannot show this for a real file system: its initial fill comes from
``lfs df`` (used KiB per OST), not from files, so only the files written during a run
can move (docs/rebalance.md). Here the planner runs on the real state instead:

* OSTs: Edison snx11025, snapshot 0 of ``sample_ost-fullness.txt.gz`` (24 OSTs of
  84.5 TiB, 65-82% full, pytokio), plus 6 new empty OSTs of the same size (the
  ``expansion-25pct`` event), all at 700 MiB/s (the scenario's Sonexion 1600 figure).
* Files (an assumption, no real size distribution is shipped): each OST's used space as
  stripe-count-1 files with log-normal sizes, median 1 GiB, sigma 1.5.
* Ours: ``plan_migration`` at the budget; the time is the plan's estimate (each OST
  serves its migrations in plan order at budget x bandwidth, reads + writes, Eq. 21).
* Naive: ``lfs find --ost <OSTs above the mean> | sort by size | lfs_migrate -y``: the
  largest files first until the bytes equal the excess above the mean, one file at a
  time (lfs_migrate is sequential), each at most budget x bandwidth: time = bytes /
  (budget x 700 MiB/s). Its destinations are chosen by QOS, which favours the emptiest
  OSTs, so at best all its bytes land on the new OSTs.

Prints, per budget: plan time (and the floor: numpy sort of the same sizes), bytes and
files moved, estimated hours until the new OSTs reach the mean, fill max/mean after.
Usage: ``python bench/rebalance_expansion.py [--budget 0.2 --budget 0.5]``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from lustre_alloc_data import resource_path  # noqa: E402
from lustre_alloc.rebalance.plan import FileTable, MigrationOsts, PlanTargets, plan_migration  # noqa: E402
from lustre_alloc.traces.lfs_df import read_lfs_df  # noqa: E402

GIB = float(1 << 30)
MIB = float(1 << 20)
BW = 700 * MIB
NEW = 6


def build(seed: int = 2018) -> tuple[MigrationOsts, FileTable]:
    df = read_lfs_df(resource_path("pkg:lustre_alloc_data/nersc-pytokio/sample_ost-fullness.txt.gz"))
    fs = df.snapshots[0].filesystems["snx11025"]
    total = np.array([t.kbytes_total for t in fs.osts] + [fs.osts[0].kbytes_total] * NEW, float)
    used_kib = np.array([t.kbytes_used for t in fs.osts] + [0] * NEW, float)
    n = len(total)
    rng = np.random.default_rng(seed)
    sizes, osts = [], []
    for i in range(n - NEW):
        target = used_kib[i] * 1024
        draw = np.floor(rng.lognormal(np.log(GIB), 1.5, int(target / (3.1 * GIB) * 1.3) + 10))
        keep = draw[np.cumsum(draw) <= target]
        sizes.append(keep)
        osts.append(np.full(len(keep), i))
    size = np.concatenate(sizes)
    ost = np.concatenate(osts)
    m = len(size)
    table = MigrationOsts(index=np.arange(n), kbytes_total=total, kbytes_used=used_kib,
                     rate_bytes_s=np.full(n, BW), can_receive=np.ones(n, bool),
                     can_read=np.ones(n, bool), draining=np.zeros(n, bool))
    files = FileTable(ids=[""] * m, size_bytes=size, ost_ptr=np.arange(m + 1), ost_index=ost,
                      access_bytes_s=np.zeros(m), stripe_size=np.full(m, 1 << 20))
    return table, files


def naive(table: MigrationOsts, files: FileTable, tol: float) -> tuple[float, int]:
    """Bytes and files the largest-first lfs_migrate moves."""
    cap = table.kbytes_total * 1024
    used = table.kbytes_used * 1024
    mean = used.sum() / cap.sum()
    over = used / cap > mean * (1 + tol)
    excess = float((used - mean * cap)[over].sum())
    on = over[files.ost_index]
    s = np.sort(files.size_bytes[on])[::-1]
    k = int(np.searchsorted(np.cumsum(s), excess)) + 1
    return float(s[:k].sum()), k


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, action="append")
    args = ap.parse_args(argv)
    table, files = build()
    print(f"{table.count} OSTs ({NEW} new), {files.count} files, "
          f"{files.size_bytes.sum() / (1 << 50):.2f} PiB")
    print("| budget | planner | plan s (floor sort s) | TiB moved | files moved | "
          "h to reach the mean | fill max/mean after |")
    print("|---|---|---|---|---|---|---|")
    for b in args.budget or [0.2, 0.5, 1.0]:
        t0 = time.perf_counter()
        np.sort(files.size_bytes)
        floor = time.perf_counter() - t0
        for label, largest in (("ours (Algorithm 1 order)", False), ("ours, move_largest", True)):
            t0 = time.perf_counter()
            plan = plan_migration(table, files, PlanTargets(budget_fraction=b, weight_load=0.0,
                                                            move_largest=largest))
            dt = time.perf_counter() - t0
            s = plan.summary
            print(f"| {b:g} | {label} | {dt:.2f} ({floor:.3f}) | "
                  f"{s.bytes_written / (1 << 40):.1f} | {s.files_moved} | "
                  f"{s.duration_s / 3600:.1f} | {s.fill_max_mean_after:.3f} |")
        nb, nf = naive(table, files, 0.02)
        print(f"| {b:g} | lfs_migrate, largest first, sequential | - | {nb / (1 << 40):.1f} | "
              f"{nf} | {nb / (b * BW) / 3600:.1f} | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
