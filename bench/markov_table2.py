"""Reproduce Table II of Paul et al. 2017: Markov chain order vs accuracy and execution time.

Two inputs:

1. The paper-like collective trace: the IOR, HACC-IO and TPA generators
   (``lustre_alloc.traces.generators.GENERATORS``) run together for ``--duration-s`` (default 24 h, the
   paper's Section IV-A3 length), merged by time, once per seed (``--seeds``, default
   1 2 3: the paper averages three runs).
2. Real per-operation write sizes: the DXT_POSIX records of PyDarshan's shipped logs
   (``lustre_alloc.traces.darshan_import.dxt_write_sizes``); every (rank, file) sequence is one
   application.

Each request is fed to :class:`lustre_alloc.mapper.predictor.markov.MarkovPredictor` exactly as the mapper does
(``observe`` then ``predict(k)``). A request is a trace ``write`` record (its bytes) or a
``read`` record (0 bytes, Section III-B); deletes are not requests. Metrics (defined in
docs/predictor.md, "Accuracy"):

* ``acc@1``: of the requests the predictor had a prediction for, the share whose state
  (their bytes quantised with the mu/sd the prediction was made with) equals the
  predicted next state. ``acc@k``: the same for the prediction made k requests earlier.
* ``bytes err``: sum |predicted bytes - actual bytes| / sum actual bytes (step 1).
* ``cover``: share of requests that had a step-1 prediction (an application needs
  order + 1 requests first).
* ``time``: wall seconds spent in observe + predict over the whole input (mean of the
  runs), and the same per request in microseconds. The paper's trace length is not
  given, so only the ratios across orders compare with the paper's seconds.
* ``persist``: acc@1 of predicting "same state as the last request", and its bytes error
  (``err``); ``mean``: the same for the application's running mean of its requests so far
  (the simplest baselines, scored on the requests the chain predicted).

A third input is the one the mapper learns from by default: each file's size when it is
closed (the shim's close reports, docs/client.md), per application in creation order, from
the generated trace (:func:`lustre_alloc.simulator.file_sizes.final_sizes`) and from the 162 HACC-IO jobs
of the TOKIO summary (one application; each job's 4096 files of its bytes / 4096).

Usage: ``.venv/bin/python bench/markov_table2.py [--duration-s S] [--seeds 1 2 3] [--k 4]``
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lustre_alloc.mapper.predictor.markov import MarkovPredictor  # noqa: E402
from lustre_alloc.mapper.predictor.markov_states import assign_state  # noqa: E402

PAPER_TABLE_II = {  # order: (execution time s, accuracy %), Paul et al. 2017 Table II
    1: (0.01, 65.6), 2: (0.02, 78.7), 3: (0.15, 95.5), 4: (1.0, 96.3),
    5: (2.6, 96.8), 6: (3.8, 97.2), 7: (5.6, 97.5), 8: (8.0, 97.8),
}
OSTS = 32
"""OSTs of the paper's simulated system (Section IV-A3), the usable-OST ceiling here."""

Request = tuple[str, int, int]   # job id, write bytes, stripe size


@dataclass
class Score:
    requests: int = 0
    predicted: int = 0
    hits1: int = 0
    persist_hits: int = 0
    mean_hits: int = 0
    persist_err: float = 0.0
    mean_err: float = 0.0
    predicted_k: int = 0
    hits_k: int = 0
    abs_err: float = 0.0
    actual: float = 0.0
    seconds: float = 0.0

    def add(self, o: "Score") -> None:
        for f in self.__dataclass_fields__:
            setattr(self, f, getattr(self, f) + getattr(o, f))


def generator_requests(duration_s: float, seed: int) -> list[Request]:
    """The IOR + HACC-IO + TPA collective trace as (job, bytes, stripe size) requests."""
    from lustre_alloc.traces.format import merge_traces
    from lustre_alloc.traces.generators import GENERATORS
    streams = [fn(duration_s, seed + 1000 * i) for i, fn in enumerate(GENERATORS.values())]
    out: list[Request] = []
    stripe: dict[str, int] = {}
    for r in merge_traces(streams):
        if r.op == "write":
            stripe[r.jobid] = r.stripe_size
            out.append((r.jobid, r.bytes, r.stripe_size))
        elif r.op == "read":
            out.append((r.jobid, 0, stripe.get(r.jobid, 1 << 20)))
    return out


def closed_file_requests(duration_s: float, seed: int) -> list[Request]:
    """Each generated file's size at close, per application in creation order."""
    from lustre_alloc.simulator.file_sizes import final_sizes
    from lustre_alloc.traces.format import merge_traces
    from lustre_alloc.traces.generators import GENERATORS
    streams = [list(fn(duration_s, seed + 1000 * i)) for i, fn in enumerate(GENERATORS.values())]
    sizes = final_sizes(r for st in streams for r in st)
    out: list[Request] = []
    seen: set[str] = set()
    for r in merge_traces(streams):
        if r.op == "write" and r.file_id and r.file_id not in seen:
            seen.add(r.file_id)
            out.append((r.jobid, sizes[r.file_id], r.stripe_size))
    return out


def hacc_requests() -> list[Request]:
    """The TOKIO summary's 162 hacc_io_write jobs, as one application's closed files: each
    job's first 64 files (its bytes over its files each), jobs in time order."""
    import csv
    import gzip
    path = Path(__file__).resolve().parent.parent / \
        "lustre_alloc_data/nersc-pytokio/hacc_io_jobs_summary.csv.gz"
    with gzip.open(path, "rt", newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: float(r["_datetime_start"]))
    out: list[Request] = []
    for r in rows:
        files = int(float(r["darshan_biggest_write_api_files"]))
        size = int(float(r["darshan_biggest_write_api_bytes"])) // max(files, 1)
        out.extend(("hacc_io_write", size, 1 << 20) for _ in range(64))
    return out


def dxt_requests() -> tuple[list[Request], list[str]]:
    """Every (rank, file) DXT_POSIX write sequence of the shipped logs, one app each."""
    from lustre_alloc.traces.darshan_import import dxt_write_sizes, shipped_logs
    out: list[Request] = []
    used = []
    for name, path in sorted(shipped_logs().items()):
        try:
            seqs = dxt_write_sizes(path)
        except Exception as exc:  # a log PyDarshan cannot read: report, go on
            print(f"  skipped {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if seqs:
            used.append(f"{name} ({len(seqs)} sequences, {sum(map(len, seqs.values()))} writes)")
        for key, sizes in seqs.items():
            out.extend((f"{name}:{key}", x, 1 << 20) for x in sizes)
    return out, used


def run(requests: Iterable[Request], order: int, k: int, **config) -> Score:
    """Feed requests to a fresh predictor; score its predictions (timing only the predictor)."""
    p = MarkovPredictor(order=order, max_apps=100_000, **config)
    s = Score()
    # per job: request count, last bytes, and predictions awaiting their request:
    # due request number -> (state, bytes, mu, sd)
    count: dict[str, int] = {}
    last: dict[str, int] = {}
    total: dict[str, int] = {}          # per job: bytes so far (the running mean's sum)
    due1: dict[str, tuple] = {}
    duek: dict[str, deque] = {}
    clock = time.perf_counter
    elapsed = 0.0
    for job, x, stripe_size in requests:
        n = count.get(job, 0) + 1
        count[job] = n
        s.requests += 1
        pend = due1.pop(job, None)
        if pend is not None:
            state, nbytes, mu, sd = pend
            s.predicted += 1
            actual_state = assign_state(x, mu, sd)
            s.hits1 += actual_state == state
            s.persist_hits += assign_state(last[job], mu, sd) == actual_state
            mean = total[job] / (n - 1)
            s.mean_hits += assign_state(int(mean), mu, sd) == actual_state
            s.abs_err += abs(nbytes - x)
            s.persist_err += abs(last[job] - x)
            s.mean_err += abs(mean - x)
            s.actual += x
        queue = duek.get(job)
        if queue and queue[0][0] == n:
            _, state, mu, sd = queue.popleft()
            s.predicted_k += 1
            s.hits_k += assign_state(x, mu, sd) == state
        t0 = clock()
        p.observe(job, x)
        preds = p.predict(job, k, stripe_size, OSTS, OSTS)
        elapsed += clock() - t0
        last[job] = x
        total[job] = total.get(job, 0) + x
        if preds:
            info = p.app_info(job)
            mu, sd = info.mean_bytes, info.sd_bytes
            due1[job] = (preds[0].state, preds[0].bytes, mu, sd)
            if len(preds) == k:
                duek.setdefault(job, deque()).append((n + k, preds[-1].state, mu, sd))
    s.seconds = elapsed
    return s


def score_seeds(make, args) -> tuple[dict[int, Score], int]:
    """Every order's score over ``make(duration_s, seed)`` for each seed, and the requests."""
    scores = {o: Score() for o in args.orders}
    total = 0
    for seed in args.seeds:
        reqs = make(args.duration_s, seed)
        total += len(reqs)
        for order in args.orders:
            scores[order].add(run(reqs, order, args.k, backoff=not args.no_backoff))
    return scores, total


def pct(a: float, b: float) -> str:
    return f"{100.0 * a / b:6.1f}" if b else "     -"


def print_table(title: str, scores: dict[int, Score], runs: int, k: int, paper: bool) -> None:
    print(f"\n{title}")
    head = (f"{'order':>5} | {'paper s':>7} {'paper %':>7} | {'time s':>7} {'us/req':>6} "
            f"{'acc@1':>6} {'acc@' + str(k):>6} {'bytes err':>9} {'cover':>6} {'persist':>7} "
            f"{'err':>6} {'mean':>6} {'err':>6}")
    print(head)
    print("-" * len(head))
    base = scores[min(scores)].seconds / runs
    for order, s in scores.items():
        ps, pa = PAPER_TABLE_II.get(order, (float("nan"), float("nan"))) if paper else ("", "")
        paper_cols = f"{ps:7.2f} {pa:7.1f}" if paper else f"{'':7} {'':7}"
        secs = s.seconds / runs
        print(f"{order:5d} | {paper_cols} | {secs:7.3f} {1e6 * s.seconds / s.requests:6.2f} "
              f"{pct(s.hits1, s.predicted)} {pct(s.hits_k, s.predicted_k)} "
              f"{pct(s.abs_err, s.actual):>9} {pct(s.predicted, s.requests)} "
              f"{pct(s.persist_hits, s.predicted):>7} {pct(s.persist_err, s.actual)} "
              f"{pct(s.mean_hits, s.predicted)} {pct(s.mean_err, s.actual)}")
    print(f"time ratio to order {min(scores)}: "
          + "  ".join(f"{o}: {(s.seconds / runs) / base:.2f}x" for o, s in scores.items())
          + ("   (paper: " + "  ".join(f"{o}: {PAPER_TABLE_II[o][0] / PAPER_TABLE_II[1][0]:.0f}x"
                                      for o in scores if o in PAPER_TABLE_II) + ")" if paper else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=86_400.0,
                    help="length of the generated trace, seconds (default 24 h)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--orders", type=int, nargs="+", default=list(range(1, 9)))
    ap.add_argument("--k", type=int, default=4, help="prediction horizon per request")
    ap.add_argument("--skip-dxt", action="store_true")
    ap.add_argument("--no-backoff", action="store_true",
                    help="unseen contexts go straight to order 0 (MarkovConfig.backoff=False)")
    args = ap.parse_args(argv)
    config = {"backoff": not args.no_backoff}
    print(f"predictor: MarkovPredictor defaults, {config}, k={args.k}")

    jobs = "IOR + HACC-IO + TPA"
    scores, total = score_seeds(generator_requests, args)
    print_table(f"Table II on the generated {jobs} trace ({args.duration_s:g} s, seeds "
                f"{' '.join(map(str, args.seeds))}: {total // len(args.seeds)} requests per run; "
                f"times are per run)", scores, len(args.seeds), args.k, paper=True)
    closed, n_closed = score_seeds(closed_file_requests, args)
    print_table(f"Files' sizes at close, generated {jobs} trace ({n_closed // len(args.seeds)} "
                f"files per run)", closed, len(args.seeds), args.k, paper=False)
    hacc = {o: run(hacc_requests(), o, args.k, **config) for o in args.orders}
    print_table("Files' sizes at close, the 162 measured hacc_io_write jobs (64 files each)",
                hacc, 1, args.k, paper=False)

    if not args.skip_dxt:
        reqs, used = dxt_requests()
        if not reqs:
            print("\nno DXT data in the shipped Darshan logs")
            return 0
        dscores = {o: Score() for o in args.orders}
        for _ in range(3):      # three runs, as the paper; only the time varies
            for order in args.orders:
                dscores[order].add(run(reqs, order, args.k, **config))
        print_table(f"Real per-operation write sizes, PyDarshan DXT: {'; '.join(used)}; "
                    f"{len(reqs)} requests; times are per run (mean of 3)",
                    dscores, 3, args.k, paper=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
