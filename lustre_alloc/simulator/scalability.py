"""The paper's scalability study (Paul et al. 2017, Section IV-C, Fig. 16 and 17).

Clusters of 160 (20 OSS), 480 (60), 800 (100), 1024 (128) and 3600 (450) OSTs, each
under every requested policy, with the workload scaled to the cluster: one *group* of
the paper's three applications (IOR, HACC-IO, TPA, :mod:`lustre_alloc.traces.generators` with their
32-OST defaults) per 32 OSTs, each group with its own seeds and job ids, so the load
per OST is the same at every size. The network is the flow-level LNet model
(:mod:`lustre_alloc.simulator.network.model`, ``model = "flow"``): 10 GbE client and OSS links as in the
paper's real setup, disks shared max-min jointly with the links. Per (size, policy):

* mean I/O bandwidth: all bytes moved / summed transfer time (Fig. 17);
* allocation execution time per request: wall time of the policy's decision, µs,
  mean and p99 (Fig. 16; the paper's MCMF includes its Markov model, so does ours);
* balance: OST used max/mean and Jain's index at the end; max/mean over OSTs and over
  OSSes of the bytes served (read + written) during the run; OSS CPU max/mean (mean
  over steps).

One command writes ``scalability.csv``/``.json``, ``fig16_alloc_time.png`` and
``fig17_bandwidth.png`` with the paper's published numbers beside ours::

    python -m lustre_alloc.simulator.scalability [--sizes 160,480,800,1024,3600] [--policy P ...]
                                    [--duration S] [--jobs N] [--out DIR]

(also ``lustre-alloc-sim scale``). The paper prints only one number of these figures
in its text, MCMF +54.5% mean bandwidth over round-robin at 800 OSTs; of Fig. 16 it
says round-robin decides faster and the gap shrinks as OSTs grow.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.policies.registry import POLICIES, SIMULATION_ONLY
from lustre_alloc.simulator.engine import Simulation
from lustre_alloc.simulator.sweep import run_tasks
from lustre_alloc.simulator.metrics import jain_index, max_mean_ratio

SIZES: tuple[tuple[int, int], ...] = ((160, 20), (480, 60), (800, 100), (1024, 128), (3600, 450))
"""(OSTs, OSSes) of Fig. 17's caption."""
STUDY_POLICIES = ("round_robin", "lustre_qos", "random", "mcmf")
OSTS_PER_GROUP = 32
"""OSTs per workload group: the paper's 32-OST setup ran one copy of the three apps."""
PAPER = {"mcmf_gain_over_rr_percent": {800: 54.5}}
"""The numbers the paper's text gives for Fig. 16/17 (Section IV-C)."""
PAPER_FIG16 = ("round-robin takes less time than MCMF (Markov + MCMF) per request; the "
               "difference shrinks as OSTs increase")
DEFAULT_DURATION_S = 600.0
IOR_PROCS, IOR_BLOCK = 16, 4 << 30
"""IOR per group: 16 files of 4 GiB per iteration (the generator's 64 x 1 GiB bytes and
operation rate in a quarter of the creates: the mapper's policies are Python and a create
costs up to ~35 ms at 3600 OSTs, so creates bound the sweep's wall time)."""
HACC_RANKS_PER_FILE = 64
"""HACC-IO per group: 64 ranks per file, 64 files of 16 GiB per 1 TiB checkpoint (the
generator's default is 8; same bytes, an eighth of the creates, as for IOR)."""
MIB = float(1 << 20)


LMT_DB = "pkg:lustre_alloc_data/nersc-pytokio/snx11025_2018-01-28.sqlite3"
"""The NERSC snx11025 LMT database the heterogeneous study takes its OST spread from."""


def scale_scenario_toml(osts: int, osses: int, *, duration_s: float = DEFAULT_DURATION_S,
                        policies: Sequence[str] = STUDY_POLICIES, seed: int = 2017,
                        network: str = "flow", hetero: bool = False) -> str:
    """The TOML text of one study scenario (``scale-<osts>``).

    Cluster: ``osts // osses`` OSTs per OSS (8 in all of the paper's sizes), 4 TiB OSTs at
    300 MiB/s (a 2017 HDD RAID6 OST), a production-like uneven fill (10% of OSTs 70%
    full, the rest 20-50%) so that Lustre's QOS allocator is active. Network: 10 GbE
    client and OSS links, 4 client nodes per OSS, each job on 16 of them. Workload:
    ``ceil(osts / 32)`` groups of IOR + HACC-IO + TPA (seeds and job ids per group;
    IOR and HACC-IO with fewer, larger files than the generators' defaults, same bytes:
    :data:`IOR_PROCS`, :data:`HACC_RANKS_PER_FILE`); each group's HACC-IO checkpoint
    starts at its own time in the first half of the run.

    ``hetero``: the measured heterogeneity on top: each OST's bandwidth is 300 MiB/s times
    a value drawn (seeded) from the per-OST spread of NERSC snx11025's LMT database
    (lifetime bytes served per OST / median, 0.97-1.16; :mod:`lustre_alloc.simulator.targets`).
    """
    if osts % osses:
        raise ValueError(f"{osts} OSTs do not divide over {osses} OSSes")
    groups = math.ceil(osts / OSTS_PER_GROUP)
    lines = [
        f'name = "scale-{osts}{"-hetero" if hetero else ""}"',
        f'description = "scalability study (Fig. 16/17): {osts} OSTs on {osses} OSSes, '
        f'{groups} groups of IOR + HACC-IO + TPA"',
        f"duration_s = {duration_s:g}",
        f"seed = {seed}",
        f"policies = [{', '.join(repr(p).replace(chr(39), chr(34)) for p in policies)}]",
        "",
        "[cluster]",
        f"oss_count = {osses}",
        f"osts_per_oss = {osts // osses}",
        "ost_size_gib = 4096",
        (f'ost_bandwidth_mib_s = {{ derived = "lmt:{LMT_DB}", statistic = "lifetime_bytes", '
         f'median = 300, seed = {seed} }}' if hetero else "ost_bandwidth_mib_s = 300"),
        "",
        "[cluster.initial_fill]",
        'mode = "generated"',
        f"hot_osts = {max(1, osts // 10)}",
        "hot_fraction = 0.7",
        "cold_fraction = [0.2, 0.5]",
        "",
        "[network]",
        f'model = "{network}"',
    ]
    if network in ("flow", "ns3"):
        lines += [f"client_nodes = {4 * osses}", "nodes_per_job = 16"]
    for g in range(groups):
        first_ckpt = 30 + (g * 97) % max(1, int(duration_s // 2))
        for k, app in enumerate(("ior", "hacc", "tpa")):
            lines += ["", "[[workload]]", f'generator = "{app}"', f"seed = {1000 * g + 11 + k}",
                      f'jobid = "{app}.g{g}"']
            if app == "ior":
                lines.append(f"params = {{ num_procs = {IOR_PROCS}, block_size = {IOR_BLOCK} }}")
            elif app == "hacc":
                # Independent jobs: checkpoints staggered over the first half of the run.
                lines.append(f"params = {{ ranks_per_file = {HACC_RANKS_PER_FILE}, "
                             f"first_checkpoint_s = {first_ckpt} }}")
    return "\n".join(lines) + "\n"


@dataclass
class StudyRow:
    """One (size, policy) result. Bandwidth MiB/s, times µs, wall seconds."""
    osts: int
    osses: int
    policy: str
    mean_io_bandwidth_mib_s: float
    alloc_us_mean: float
    alloc_us_p99: float
    creates: int
    failed_creates: int
    ost_max_mean_end: float
    ost_jain_end: float
    oss_cpu_max_mean_mean: float
    ost_served_max_mean: float
    oss_served_max_mean: float
    records: int
    wall_s: float
    world: str = "uniform"


def _study_task(task: tuple, report=None) -> StudyRow:
    """One run of the study as a sweep task (:mod:`lustre_alloc.simulator.sweep`)."""
    row = _run_one(*task)
    if report is not None:
        report(1.0, 1.0)
    return row


def _run_one(toml_text: str, osts: int, osses: int, policy: str, world: str = "uniform") -> StudyRow:
    from lustre_alloc.simulator.network.model import make_network
    from lustre_alloc.simulator.runner import prepare, scenario_policy
    from lustre_alloc.simulator.scenario import load_scenario
    from lustre_alloc.simulator.workload import scenario_records
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / f"scale-{osts}.toml"
        p.write_text(toml_text)
        sc = load_scenario(p)
        cluster = prepare(sc)
        sim = Simulation(sc, cluster, scenario_policy(sc, policy), scenario_records(sc),
                         make_network(sc.network, **sc.network_params))
        r = sim.run()
    moved = sum(a.bytes_written + a.bytes_read for a in r.apps.values())
    io_time = sum(a.io_time_s for a in r.apps.values())
    alloc = r.alloc_ns / 1e3 if len(r.alloc_ns) else np.zeros(1)
    oss_served = np.bincount(cluster.ost_oss, sim.ost_served_bytes, minlength=len(cluster.oss_names))
    return StudyRow(
        osts=osts, osses=osses, policy=policy,
        mean_io_bandwidth_mib_s=round(moved / io_time / MIB, 2) if io_time > 0 else 0.0,
        alloc_us_mean=round(float(alloc.mean()), 1),
        alloc_us_p99=round(float(np.percentile(alloc, 99)), 1),
        creates=int(r.counters.get("creates", 0)),
        failed_creates=int(sum(v for k, v in r.counters.items() if k.startswith("create_failed"))),
        ost_max_mean_end=round(float(max_mean_ratio(sim.used)), 4),
        ost_jain_end=round(float(jain_index(sim.used)), 4),
        oss_cpu_max_mean_mean=round(float(r.oss_cpu_max_mean.mean()), 3),
        ost_served_max_mean=round(float(max_mean_ratio(sim.ost_served_bytes)), 3),
        oss_served_max_mean=round(float(max_mean_ratio(oss_served)), 3),
        records=r.records, wall_s=round(r.wall_s, 1), world=world)


def run_study(sizes: Sequence[tuple[int, int]] = SIZES, policies: Sequence[str] = STUDY_POLICIES,
              *, duration_s: float = DEFAULT_DURATION_S, jobs: int = 2, seed: int = 2017,
              network: str = "flow", progress=None, hetero: bool = False,
              scheduler: str | None = None) -> list[StudyRow]:
    """Run every (size, policy); rows sorted by size then the given policy order.

    Runs are tasks of a sweep (:mod:`lustre_alloc.simulator.sweep`: here with ``jobs`` 1, else on a
    local Dask cluster of ``jobs`` workers or on ``scheduler``), largest cluster first;
    ``progress`` is called with a run's label as it finishes.
    """
    known = set(POLICIES) | set(SIMULATION_ONLY)
    unknown = [p for p in policies if p not in known]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; known: {', '.join(sorted(known))}")
    world = "hetero" if hetero else "uniform"
    tasks = [(scale_scenario_toml(o, s, duration_s=duration_s, policies=policies, seed=seed,
                                  network=network, hetero=hetero), o, s, p, world)
             for o, s in sorted(sizes, reverse=True) for p in policies]
    labels = [f"{o} OSTs {p}" for _, o, _, p, _ in tasks]
    done = (lambda label, d, total: progress(label) if d >= total else None) if progress else None
    rows = run_tasks(_study_task, tasks, labels, jobs=jobs, scheduler=scheduler, progress=done)
    order = {p: i for i, p in enumerate(policies)}
    return sorted(rows, key=lambda r: (r.osts, order[r.policy]))


def gains(rows: Sequence[StudyRow], policy: str, base: str) -> dict[int, float]:
    """Mean-bandwidth gain of ``policy`` over ``base`` per OST count, percent."""
    by = {(r.osts, r.policy): r.mean_io_bandwidth_mib_s for r in rows}
    return {o: round(100.0 * (by[(o, policy)] / by[(o, base)] - 1.0), 1)
            for o in sorted({r.osts for r in rows})
            if (o, policy) in by and (o, base) in by and by[(o, base)] > 0}


def write_outputs(rows: Sequence[StudyRow], out: Path, figures: bool = True) -> list[Path]:
    """``scalability.csv``, ``scalability.json`` and (optionally) the two figures."""
    import csv
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "scalability.csv", out / "scalability.json"]
    with open(paths[0], "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(asdict(rows[0])))
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
    policies = list(dict.fromkeys(r.policy for r in rows))
    summary = {"rows": [asdict(r) for r in rows], "paper": {
        "mcmf_gain_over_rr_percent": PAPER["mcmf_gain_over_rr_percent"], "fig16": PAPER_FIG16},
        "gains_percent": {f"{p}_over_{b}": gains(rows, p, b)
                          for p in policies for b in ("round_robin", "lustre_qos")
                          if p != b and b in policies}}
    paths[1].write_text(json.dumps(summary, indent=1))
    if figures:
        paths += _figures(rows, out)
    return paths


def _figures(rows: Sequence[StudyRow], out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    policies = list(dict.fromkeys(r.policy for r in rows))
    sizes = sorted({r.osts for r in rows})
    styles = {"round_robin": ("o", "-"), "lustre_qos": ("s", "--"), "random": ("^", ":"),
              "mcmf": ("D", "-"), "mcmf_flow": ("v", "--")}
    paths = []
    for fname, key, ylabel, title in (
            ("fig16_alloc_time.png", "alloc_us_mean", "allocation time per request (µs, mean)",
             "Execution time vs OSTs (cf. paper Fig. 16)"),
            ("fig17_bandwidth.png", "mean_io_bandwidth_mib_s", "mean I/O bandwidth (MiB/s)",
             "Performance vs OSTs (cf. paper Fig. 17)")):
        fig, ax = plt.subplots(figsize=(7, 4))
        for p in policies:
            pts = sorted((r.osts, getattr(r, key)) for r in rows if r.policy == p)
            m, ls = styles.get(p, ("x", "-."))
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker=m, ls=ls, label=p)
        if key == "mean_io_bandwidth_mib_s":
            g = gains(rows, "mcmf", "round_robin") if "mcmf" in policies else {}
            for o, paper in PAPER["mcmf_gain_over_rr_percent"].items():
                ours = f", ours {g[o]:+.1f}%" if o in g else ""
                ax.annotate(f"paper: MCMF +{paper}% over RR{ours}", xy=(o, ax.get_ylim()[1]),
                            xytext=(0, -14), textcoords="offset points", ha="left", fontsize=8)
        else:
            ax.set_yscale("log")
            ax.text(0.01, 0.02, f"paper: {PAPER_FIG16}", transform=ax.transAxes, fontsize=7)
        ax.set(xlabel="number of OSTs", ylabel=ylabel, title=title, xscale="log")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        ax.legend(fontsize=8)
        fig.tight_layout()
        paths.append(out / fname)
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


def table_lines(rows: Sequence[StudyRow]) -> list[str]:
    """The study as a Markdown table, with gains over RR and QOS and the paper's number."""
    policies = list(dict.fromkeys(r.policy for r in rows))
    g_rr = {p: gains(rows, p, "round_robin") for p in policies}
    g_qos = {p: gains(rows, p, "lustre_qos") for p in policies}
    head = ("| OSTs (OSS) | policy | mean I/O MiB/s | vs RR | vs QOS | paper MCMF vs RR | "
            "alloc µs mean / p99 | OST used max/mean end | OST served max/mean | "
            "OSS served max/mean | OSS CPU max/mean | creates | wall s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        paper = PAPER["mcmf_gain_over_rr_percent"].get(r.osts) if r.policy == "mcmf" else None
        vr = g_rr[r.policy].get(r.osts) if r.policy != "round_robin" else None
        vq = g_qos[r.policy].get(r.osts) if r.policy != "lustre_qos" else None
        lines.append(
            f"| {r.osts} ({r.osses}) | {r.policy} | {r.mean_io_bandwidth_mib_s:.1f} | "
            f"{'' if vr is None else f'{vr:+.1f}%'} | {'' if vq is None else f'{vq:+.1f}%'} | "
            f"{'' if paper is None else f'+{paper}%'} | {r.alloc_us_mean:.0f} / {r.alloc_us_p99:.0f} | "
            f"{r.ost_max_mean_end:.3f} | {r.ost_served_max_mean:.2f} | {r.oss_served_max_mean:.2f} | "
            f"{r.oss_cpu_max_mean_mean:.3f} | {r.creates} | {r.wall_s:.0f} |")
    return lines


def default_policies() -> list[str]:
    """The paper's four (those registered) first, then every other registered policy."""
    return ([p for p in STUDY_POLICIES if p in POLICIES]
            + [p for p in POLICIES if p not in STUDY_POLICIES])


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"160,800"`` -> the (OSTs, OSSes) pairs of :data:`SIZES` (or ``O:S`` for others)."""
    known = dict(SIZES)
    out = []
    for tok in filter(None, (t.strip() for t in text.split(","))):
        if ":" in tok:
            o, s = tok.split(":", 1)
            out.append((int(o), int(s)))
        elif int(tok) in known:
            out.append((int(tok), known[int(tok)]))
        else:
            raise ValueError(f"size {tok}: not one of the paper's ({', '.join(str(o) for o, _ in SIZES)}); "
                             f"give OSTS:OSSES")
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The study's command-line options (shared by ``lustre-alloc-sim scale``)."""
    ap.add_argument("--sizes", default=",".join(str(o) for o, _ in SIZES),
                    help="OST counts (paper's: 160,480,800,1024,3600) or OSTS:OSSES pairs")
    ap.add_argument("--policy", action="append", metavar="POLICY",
                    help="policy (repeatable; default: every registered policy, "
                         "round_robin, lustre_qos, random, mcmf first)")
    ap.add_argument("--duration", type=float, default=DEFAULT_DURATION_S,
                    help=f"simulated seconds per run (default {DEFAULT_DURATION_S:g})")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="runs in parallel processes (default: min(2, cores))")
    ap.add_argument("--network", default="flow", help="network model (default flow)")
    ap.add_argument("--scheduler", metavar="ADDRESS", default=None,
                    help="run on this Dask scheduler instead of local workers")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default results/scalability, results/scalability-hetero)")
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--hetero", action="store_true",
                    help="the measured heterogeneity: per-OST bandwidth from the NERSC LMT spread")


def run_cli(args: argparse.Namespace) -> int:
    """Run the study from parsed arguments; prints the table; returns the exit code."""
    policies = args.policy or default_policies()
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as e:
        print(f"scalability: error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    rows = run_study(sizes, policies, duration_s=args.duration, jobs=args.jobs,
                     network=args.network, hetero=args.hetero, scheduler=args.scheduler,
                     progress=lambda label: print(f"  done: {label}", flush=True))
    out = args.out or Path("results") / ("scalability-hetero" if args.hetero else "scalability")
    paths = write_outputs(rows, out, figures=not args.no_figures)
    print("\n".join(table_lines(rows)))
    print(f"paper, Fig. 16: {PAPER_FIG16}")
    print(f"{len(rows)} runs, {args.duration:g} s simulated each, {time.perf_counter() - t0:.0f} s wall; "
          f"wrote {', '.join(str(p) for p in paths)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m lustre_alloc.simulator.scalability``."""
    ap = argparse.ArgumentParser(prog="python -m lustre_alloc.simulator.scalability",
                                 description=__doc__.split("\n")[0])
    add_arguments(ap)
    return run_cli(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
