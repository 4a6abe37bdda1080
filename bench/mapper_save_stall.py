"""How long the mapper's request loop is held by a save of the learned state (4,096
applications): the old synchronous save (export + JSON + fsync + rename in the loop) against
the new one (lustre_alloc.mapper.service.persist: the loop only copies 256 applications per iteration, the
writer thread does the rest), and the copy of the OST rate memory taken at the start of a
save (lustre_alloc.mapper.speed.rate_memory, ``--osts`` OSTs, every table full). Ratios to a floor measured in the same run (the copy of one
application), repeated; report them with the machine's load, they are noisy when shared.

    PYTHONPATH=. python bench/mapper_save_stall.py [--apps 4096] [--osts 3600] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from lustre_alloc.mapper.speed.rate_memory import export_rate_memory
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.predictor.markov import MarkovPredictor
from lustre_alloc.mapper.predictor.markov_store import save_predictor
from lustre_alloc.mapper.service.persist import SlicedSnapshot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", type=int, default=4096)
    ap.add_argument("--osts", type=int, default=3600)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    p = MarkovPredictor(max_apps=args.apps)
    for i in range(args.apps):
        for size in (1 << 28, 1 << 28, 1 << 30, 1 << 26) * 4:
            p.observe(f"job.{i}", size)
    tracker = OstRateTracker()
    for i in range(args.osts):
        tracker.rate[i] = tracker.latency[i] = tracker.last_look[i] = 5e8 + i
    sync, slice_max, floor, memory = [], [], [], []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "state.json"
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            p.export_apps(["job.0"])
            floor.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            save_predictor(p, path)                     # what the loop used to wait for
            sync.append(time.perf_counter() - t0)
            snap = SlicedSnapshot(p, str(path))
            worst, done = 0.0, False
            while not done:                             # what the loop waits for now
                t0 = time.perf_counter()
                done = snap.step()
                worst = max(worst, time.perf_counter() - t0)
            slice_max.append(worst)
            t0 = time.perf_counter()
            SlicedSnapshot(p, str(path), {"ost_rates": export_rate_memory(tracker)})
            memory.append(time.perf_counter() - t0)
    f, s, w, m = (statistics.median(x) for x in (floor, sync, slice_max, memory))
    print(f"apps {args.apps}, repeat {args.repeat}, load average {os.getloadavg()[0]:.1f}")
    print(f"floor (copy one app)        {f * 1e6:9.1f} us   1x")
    print(f"loop held, synchronous save {s * 1e3:9.2f} ms   {s / f:,.0f}x floor")
    print(f"loop held, largest slice    {w * 1e3:9.2f} ms   {w / f:,.0f}x floor   "
          f"({s / w:.0f}x shorter than the synchronous save)")
    print(f"loop held, save begins      {m * 1e3:9.2f} ms   {m / f:,.0f}x floor   "
          f"(job ids listed, OST rate memory of {args.osts} OSTs copied)")


if __name__ == "__main__":
    main()
