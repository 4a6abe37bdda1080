"""Benchmark: one MCMF flow round, 32..3600 OSTs x 4..256 requests.

For each size it times, in the same run and on the same random cluster state:

* ``dense``: the naive round (every request -> every OST arc), built and solved with
  OR-Tools (the baseline the issue measured at ~80 ms for 3600 OSTs x 32 requests);
* ``pruned``: the production round (exact candidate pruning, lustre_alloc.mapper.flow.network);
* ``policy``: ``McmfPolicy.allocate_batch`` end to end (snapshot -> arrays -> network ->
  solve -> ordered OST lists), prediction off so every request is solved, on a snapshot
  seen for the first time;
* ``warm``: the same on a versioned snapshot the policy has already seen (the mapper's
  case between two statistics samples: the per-OST arrays are kept);
* ``plan``: the background planner's round (``McmfPolicy.plan``) making as many 4-stripe
  lists as there are requests, warm (the queues emptied between repeats; above 8 lists
  one aggregated request with the per-OST slot cap, ``lustre_alloc.mapper.flow.ost_lists``), and
  whether its optimum equals that of today's round on the same input, one dense request
  per list (``same``);
* ``networkx``: the pruned network solved by networkx (the paper's solver), where it
  finishes in reasonable time (skipped above ``--nx-max-arcs`` arcs; printed as "-").

Requests ask for 4 stripes of 1 MiB with 1 GiB expected. Prints median milliseconds per
round and the ratios dense/pruned and networkx/OR-Tools. Timings are measurements, not
assertions. Usage: ``python bench/flow_round.py [--repeat 5] [--quick]``.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstState  # noqa: E402
from bench.experiments.costs import ConvexCost  # noqa: E402
from lustre_alloc.mapper.flow.network import RoundRequest  # noqa: E402
from lustre_alloc.mapper.flow.ost_lists import build_network  # noqa: E402
from lustre_alloc.mapper.flow.solver import solve_networkx, solve_ortools  # noqa: E402
from lustre_alloc.mapper.policies.mcmf import McmfPolicy  # noqa: E402
from lustre_alloc.mapper.policies.placement import CreateRequest  # noqa: E402
from lustre_alloc.mapper.state.arrays import OstTable, ost_arrays  # noqa: E402

OSTS_PER_OSS = 8
TOTAL_KIB = 8 << 30


def snapshot(n_osts: int, seed: int) -> ClusterSnapshot:
    rng = random.Random(seed)
    osts = []
    for i in range(n_osts):
        avail = int(TOTAL_KIB * rng.uniform(0.2, 0.9))
        osts.append(OstState(i, f"oss{i // OSTS_PER_OSS}", TOTAL_KIB, avail, avail,
                             write_latency_s=rng.uniform(0.002, 0.02), sample_time_s=0.0))
    osses = {o.oss: OssState(o.oss, rng.uniform(5, 60), rng.uniform(10, 50), rng.uniform(0, 30))
             for o in osts}
    return ClusterSnapshot(osts, osses, time_s=1.0)


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--nx-max-arcs", type=int, default=60_000)
    ap.add_argument("--osts", help="comma-separated OST counts (default 32,160,800,3600)")
    ap.add_argument("--requests", help="comma-separated requests per round")
    args = ap.parse_args()
    sizes = [32, 160] if args.quick else [32, 160, 800, 3600]
    counts = [4, 32] if args.quick else [4, 16, 32, 64, 128, 256]
    if args.osts:
        sizes = [int(x) for x in args.osts.split(",")]
    if args.requests:
        counts = [int(x) for x in args.requests.split(",")]
    print(f"{'OSTs':>5} {'reqs':>5} {'arcs dense':>10} {'arcs pruned':>11} {'dense ms':>9} "
          f"{'pruned ms':>9} {'policy ms':>9} {'warm ms':>8} {'plan ms':>8} {'same':>5} {'networkx ms':>11} {'dense/pruned':>12} {'nx/ortools':>10}")
    model = ConvexCost()
    for n in sizes:
        snap = snapshot(n, seed=n)
        for r in counts:
            reqs = [CreateRequest(f"job{k}", 4, 1 << 20, 1 << 30) for k in range(r)]
            table = OstTable.from_snapshot(snap)
            arrays = ost_arrays(table, table.indices())
            rreqs = [RoundRequest(min(4, n), 0) for _ in range(r)]
            masks = [np.ones(n, dtype=bool)]

            def solve(prune: bool):
                net = build_network(arrays, rreqs, masks, model, 1 << 20, 1 << 28, prune=prune)
                return net, solve_ortools(net)
            dense_ms, (dnet, dsol) = timed(lambda: solve(False), args.repeat)
            pruned_ms, (pnet, psol) = timed(lambda: solve(True), args.repeat)
            assert dnet.placement_cost(dsol.flows) == pnet.placement_cost(psol.flows)

            def policy_round():
                fresh = McmfPolicy(predict_k=0)
                return fresh.allocate_batch(snap, reqs)
            policy_ms, _ = timed(policy_round, args.repeat)
            snap.version = 0
            warm_policy = McmfPolicy(predict_k=0)
            warm_policy.allocate_batch(snap, reqs)
            warm_ms, _ = timed(lambda: warm_policy.allocate_batch(snap, reqs), args.repeat)
            planner = McmfPolicy(predict_k=0, plan_inline=False, plan_horizon_s=2.5,
                                 plan_max_depth=r)
            key = (None, min(4, n), 20, 14)          # 4 stripes of 1 MiB, 256 MiB each

            def plan_round():
                planner.plans.clear()
                for _ in range(r):
                    planner.plans.note(key, 1.0, 1 << 20, float(1 << 28))
                return planner.plan(snap)
            plan_round()
            plan_ms, made = timed(plan_round, args.repeat)
            # today's round on the same input: one request per list, dense
            dense_planner = McmfPolicy(predict_k=0, plan_inline=False, plan_horizon_s=2.5,
                                       plan_max_depth=r, prune=False,
                                       plan_aggregate_above=max(r, 8))
            for _ in range(r):
                dense_planner.plans.note(key, 1.0, 1 << 20, float(1 << 28))
            dense_planner.plan(snap)
            same = "yes" if dense_planner.last_solve_cost == planner.last_solve_cost else "NO"
            snap.version = None
            if pnet.n_arcs <= args.nx_max_arcs:
                nx_ms, nsol = timed(lambda: solve_networkx(pnet), 1)
                assert pnet.placement_cost(nsol.flows) == pnet.placement_cost(psol.flows)
                nx_cell, ratio = f"{nx_ms:11.1f}", f"{nx_ms / pruned_ms:10.0f}x"
            else:
                nx_cell, ratio = f"{'-':>11}", f"{'-':>10}"
            print(f"{n:5d} {r:5d} {dnet.n_arcs:10d} {pnet.n_arcs:11d} {dense_ms:9.2f} "
                  f"{pruned_ms:9.2f} {policy_ms:9.2f} {warm_ms:8.2f} {plan_ms:8.2f} {same:>5} {nx_cell} {dense_ms / pruned_ms:11.1f}x {ratio}")


if __name__ == "__main__":
    main()
