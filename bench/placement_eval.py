"""Placement evaluation: jobs' I/O time under mcmf variants vs Lustre's allocators.

One command per scenario (docs/history.md, "Job I/O time"); prints a Markdown table
and writes ``<out>/<scenario>.json``::

    python bench/placement_eval.py paper-32ost --duration 14400
    python bench/placement_eval.py scale-800 --duration 600
    python bench/placement_eval.py SCENARIO --variant 'rate=mcmf_flow:{"cost_model": "rate"}'
    python bench/placement_eval.py straggler-ost --seeds 5      # mean +- 95% interval
    python bench/placement_eval.py fail-slow-drives --variant 'warm=mcmf:{"warm_start": true}'
    python bench/placement_eval.py --all --resume --doc docs/placement-eval/tables.md

``--all`` runs every bundled world and the scalability study (:data:`SCALE_WORLDS`) with
the default variants (:data:`DEFAULT_VARIANTS`: RR, QOS, random, mcmf, mcmf_flow,
oracle), saves each world's result in :data:`RESULTS_DIR` (committed) and rewrites the
generated section of ``--doc`` (between :data:`DOC_BEGIN` and :data:`DOC_END`) after each
world, so an interrupted run leaves every finished world's table in place; ``--resume``
keeps the saved result of a world already measured with the same variants and seeds;
``--update --variant ...`` re-measures only those variants (same labels, the saved seeds
and duration) and puts their rows in place of the saved ones, the heading naming the
commit they were measured on (:func:`replace_variants`).

``SCENARIO`` is a bundled scenario name or TOML path, or ``scale-<OSTs>`` (uniform) or
``scale-<OSTs>-hetero`` (the LMT-measured OST spread) for the scalability study's
scenario of that size (:func:`lustre_alloc.simulator.scalability.scale_scenario_toml`,
8 OSTs per OSS). Scenario parameters are never changed here; ``--duration`` only cuts
the run short.

Per variant: the user's metric as the simulator's report computes it
(:func:`lustre_alloc.simulator.report.user_metrics`): job I/O time (first I/O to last byte) mean, and
the same per I/O phase (a generator's job runs all day; its checkpoints and iterations
are its phases): mean, p99 and the slowest phase; mean I/O bandwidth (all bytes
moved over summed transfer time, the simulator's figure); OST used max/mean at hour 4
(or at the end of shorter runs); OST-hours below the ENOSPC watermark at the hourly
samples and bytes lost to ENOSPC. The simulator runs the mapper's own policies.

``--seeds N`` runs every variant under the scenario's seed + 0..N-1
(:meth:`lustre_alloc.simulator.scenario.Scenario.with_seed_offset`: cluster draws, workload jitter,
the policies' randomness) and each cell is the mean over the seeds +- the half-width of its
95% interval (Student's t, :func:`lustre_alloc.simulator.seeds.interval`); "vs RR" is the mean of the
per-seed relative differences, marked ``n.s.`` when its interval includes zero
(``--base LABEL`` compares with another variant, e.g. ``mcmf`` for ``mcmf+lease``). With an
``oracle`` variant and round-robin, "headroom" is each seed's
:func:`lustre_alloc.simulator.report.headroom_captured` on phase mean and p99, averaged over the seeds
where the oracle gains at least 2% of RR's time (their number in brackets when fewer).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.simulator.leasing import LeasedCreates, leased
from lustre_alloc.simulator.sweep import run_tasks
from lustre_alloc.simulator.metrics import max_mean_ratio
from lustre_alloc.simulator.report import user_metrics

DEFAULT_VARIANTS = (
    ("round_robin", "round_robin", {}),
    ("lustre_qos", "lustre_qos", {}),
    ("random", "random", {}),
    ("mcmf", "mcmf", {}),
    ("mcmf_flow", "mcmf_flow", {}),
    ("oracle", "oracle", {}),
)
"""(label, policy, parameters) of the default variants. ``mcmf_flow`` is the flow deciding
every request in its own round, without the switch to Lustre's RR (``regime = false``), so
``mcmf`` against ``mcmf_flow`` is what the switch costs or earns. Until the third
run the default mcmf was the flow with plan queues, and this row was ``mcmf_noplan`` (the
same without plan queues). The predictor has no row: it is off by default
(``predict_k = 0``), and no bundled world announces a file size to learn from
(docs/placement.md)."""
WARM_START = "warm_start"
"""A variant parameter that is not the policy's: ``{"warm_start": true}`` first runs the
world with its state at t = 0 held all day (the day before, :func:`lustre_alloc.simulator.events.held_at_start`:
no onset still to come is seen), saves the policy's learned state to a file
(``PersistsState.save_state``), and starts the measured run from that file, as a mapper
that was already running restarts with its ``state_file``."""
TRUE_SIZES = "true_sizes"
"""A variant parameter that is not the policy's: ``{"true_sizes": true}`` makes every
managed create announce its file's final size (size hint ``"final"``,
:func:`lustre_alloc.simulator.file_sizes.final_sizes`): a reference no real create can give, the ceiling
of what knowing sizes could buy (simulation only, like the oracle)."""
CLOSE_SIZES = "close_sizes"
"""A variant parameter that is not the policy's: ``{"close_sizes": true}`` makes every
workload's shim report its files' sizes at close (size hint ``"at_close"``, the shim's
``LUSTRE_ALLOC_SIZES=1``)."""
SIZE_VARIANTS = (
    ("round_robin", "round_robin", {}),
    ("mcmf", "mcmf", {}),
    ("mcmf job_stats sizes", "mcmf", {"size_from_job_stats": True}),
    ("mcmf true sizes (ref)", "mcmf", {TRUE_SIZES: True}),
    ("oracle", "oracle", {}),
)
"""``--sizes``: mcmf without sizes (the default: the shim's creates announce none), at its job's
bytes written per file created from job_stats (``size_from_job_stats``), with each
file's true size (:data:`TRUE_SIZES`), and the oracle."""
RESULTS_DIR = Path(__file__).resolve().parents[1] / "docs" / "placement-eval"
"""Where ``--all`` keeps each world's saved result (``<world>.json``), committed beside the
doc so that ``--all --render --doc`` regenerates its tables from a fresh clone."""


def _scenario(name: str, duration: float | None):
    from lustre_alloc.simulator.scenario import load_scenario
    if name.startswith("scale-"):
        from lustre_alloc.simulator.scalability import SIZES, scale_scenario_toml
        parts = name.split("-")
        osts = int(parts[1])
        osses = dict(SIZES).get(osts, osts // 8)
        d = tempfile.mkdtemp()
        p = Path(d) / f"{name}.toml"
        p.write_text(scale_scenario_toml(osts, osses, duration_s=duration or 600.0,
                                         hetero=parts[-1] == "hetero"))
        return load_scenario(p)
    sc = load_scenario(name)
    if duration:
        from dataclasses import replace
        sc = replace(sc, duration_s=float(duration))
    return sc


def _with_params(sc, policy: str, params: dict):
    """``sc`` with the variant's parameters over its ``[policy_params.<policy>]`` table
    (the policy's own name for ``<policy>+lease``; ``fallback`` and the gate's keys
    included, as :func:`lustre_alloc.mapper.policies.registry.build_policy` reads them)."""
    if not params:
        return sc
    from dataclasses import replace
    own, _ = leased(policy)
    tables = dict(sc.policy_params)
    if own in ("mcmf", "mcmf_flow"):       # a variant names experiments flat, for brevity
        from lustre_alloc.mapper.policies.mcmf.params import ADMIN_SETTINGS, EXPERIMENTAL_TABLE
        flat = dict(params)
        params = {k: flat.pop(k) for k in list(flat) if k in ADMIN_SETTINGS
                  or k in ("fallback", "mds_cpu_limit_percent")}
        if flat:
            base = tables.get(own, {})
            params[EXPERIMENTAL_TABLE] = {**base.get(EXPERIMENTAL_TABLE, {}), **flat}
    tables[own] = {**tables.get(own, {}), **params}
    return replace(sc, policy_params=tables)


def run_variant(scenario: str, duration: float | None, label: str, policy: str,
                params: dict, seed_offset: int = 0) -> dict:
    """One variant's run under the scenario's seed + ``seed_offset``; a dict of the
    table's figures."""
    from lustre_alloc.simulator.cluster import KIB, MIB
    from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy
    own = {k: v for k, v in params.items() if k not in (WARM_START, TRUE_SIZES, CLOSE_SIZES)}
    sc = _with_params(_scenario(scenario, duration).with_seed_offset(seed_offset), policy, own)
    hint = "final" if params.get(TRUE_SIZES) else "at_close" if params.get(CLOSE_SIZES) else None
    if hint:
        from dataclasses import replace
        sc = replace(sc, workloads=tuple(replace(w, size_hint=hint) for w in sc.workloads))
    cluster = prepare(sc)
    placing = scenario_policy(sc, policy)
    warm_s = 0.0
    if params.get(WARM_START):
        t_warm = time.perf_counter()
        _warm_start(sc, policy, placing)
        warm_s = time.perf_counter() - t_warm
    sim = build_simulation(sc, cluster, placing)
    t0 = time.perf_counter() - warm_s         # wall_s counts the day before too
    r = sim.run()
    outer = sim.policy
    inner = _inner(outer)
    extra = {"policy_stats": dict(inner.stats) if isinstance(inner, McmfPolicy) else {},
             "lease_stats": dict(outer.stats) if isinstance(outer, LeasedCreates) else {},
             "app_accuracy": ({k: [round(v, 1) for v in hn] for k, hn in inner.prediction_gate.accuracy.items()}
                              if isinstance(inner, McmfPolicy) else {})}
    um = user_metrics(r)
    mine = {k: j for k, j in r.jobs.items() if not j.background}
    moved = sum(a.bytes_written + a.bytes_read for a in r.apps.values())
    io_time = sum(a.io_time_s for a in r.apps.values())
    h = min(4, len(r.hours) - 1)
    used_h = r.ost_used_hourly[h] if h >= 1 else sim.used
    low = np.maximum(1, (r.ost_capacity_bytes // KIB).astype(np.int64) >> 20) * MIB
    below = int((r.ost_free_hourly[1:] < low[None, :]).sum())
    below += int(((r.ost_capacity_bytes - sim.used) < low).sum())
    return {
        "variant": label, "policy": policy, "params": params, "seed": sc.seed,
        "jobs": um["jobs"], "jobs_unfinished": um["jobs_unfinished"],
        "job_io_mean_s": um["job_io_time_s_mean"] or 0.0,
        "job_io_p99_s": um["job_io_time_s_p99"] or 0.0,
        "job_io_max_s": um["slowest_job_io_time_s"] or 0.0,
        "slowdown_mean": um["job_slowdown_mean"],
        "phases": um["phases"], "phase_io_mean_s": um["phase_io_time_s_mean"] or 0.0,
        "phase_io_p99_s": um["phase_io_time_s_p99"] or 0.0,
        "phase_io_p50_s": um["phase_io_time_s_p50"] or 0.0,
        "phase_io_max_s": um["slowest_phase_io_time_s"] or 0.0,
        "phase_slowdown_mean": um["phase_slowdown_mean"],
        "file_write_p50_s": um["file_write_s_p50"], "file_write_p99_s": um["file_write_s_p99"],
        "file_read_p50_s": um["file_read_s_p50"],
        "file_write_mean_s": float(r.file_write_s.mean()) if len(r.file_write_s) else 0.0,
        "unfinished_transfers": int(r.counters.get("transfers_unfinished", 0)),
        "bandwidth_mib_s": moved / io_time / MIB if io_time > 0 else 0.0,
        "ost_max_mean_h4": float(max_mean_ratio(used_h)), "hour_of_max_mean": h if h >= 1 else None,
        "ost_max_mean_end": float(max_mean_ratio(sim.used)),
        "oss_cpu_max_mean": float(r.oss_cpu_max_mean.mean()),
        "ost_samples_below_watermark": below,
        "bytes_lost_enospc": float(r.counters.get("bytes_lost_enospc", 0.0)),
        "creates": int(r.counters.get("creates", 0)),
        "failed_creates": int(sum(v for k, v in r.counters.items() if k.startswith("create_failed"))),
        "notes": dict(r.notes), "wall_s": time.perf_counter() - t0,
        "job_io_s": {k: round(j.io_time_s, 1) for k, j in sorted(mine.items())}, **extra,
    }


def _inner(policy):
    """The placement policy inside the leases and the MDS CPU gate."""
    inner = policy.policy if isinstance(policy, LeasedCreates) else policy
    return inner.primary if isinstance(inner, GatedPolicy) else inner


def _warm_start(sc, policy: str, placing) -> None:
    """:data:`WARM_START`: run the day before into a fresh ``policy`` and load the state
    file it saves into ``placing``'s policy.

    Raises:
        SystemExit: the policy keeps no learned state (one line naming it).
    """
    from lustre_alloc.mapper.policies.placement import PersistsState
    from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy
    before = scenario_policy(sc, policy)
    if not isinstance(_inner(before), PersistsState):
        raise SystemExit(f"{WARM_START}: policy {policy!r} keeps no learned state")
    build_simulation(sc, prepare(sc), before, held_at_start=True).run()
    with tempfile.TemporaryDirectory() as d:
        path = _inner(before).save_state(Path(d) / "mapper-state.json")
        _inner(placing).load_state(path)


def parse_variant(text: str) -> tuple[str, str, dict]:
    """``label=policy:{json params}`` or ``label=policy`` or ``policy``."""
    label, _, rest = text.partition("=")
    if not rest:
        rest = label
    policy, _, js = rest.partition(":")
    try:
        params = json.loads(js) if js else {}
    except json.JSONDecodeError as e:
        raise SystemExit(f"--variant {text!r}: parameters are not JSON: {e}")
    return label, policy, params


def table(rows: list[dict], base: str = "round_robin") -> list[str]:
    """Markdown table; changes relative to the ``base`` variant."""
    ref = next((r for r in rows if r["variant"] == base), None)
    out = ["| variant | jobs | job I/O mean s | vs RR | phases | phase mean s | vs RR "
           "| phase p50 s | phase p99 s | vs RR | slowest phase s | MiB/s | vs RR | OST max/mean h4 "
           "| end | OSS CPU max/mean | below watermark | failed creates |",
           "|" + "---|" * 18]
    for r in rows:
        def rel(key):
            if ref is None or not ref[key]:
                return "-"
            return f"{100 * (r[key] / ref[key] - 1):+.1f}%"
        p50 = f"{r['phase_io_p50_s']:.1f}" if "phase_io_p50_s" in r else "-"
        out.append(
            f"| {r['variant']} | {r['jobs']} | {r['job_io_mean_s']:.1f} | {rel('job_io_mean_s')} "
            f"| {r['phases']} | {r['phase_io_mean_s']:.1f} | {rel('phase_io_mean_s')} "
            f"| {p50} | {r['phase_io_p99_s']:.1f} "
            f"| {rel('phase_io_p99_s')} | {r['phase_io_max_s']:.1f} "
            f"| {r['bandwidth_mib_s']:.1f} | {rel('bandwidth_mib_s')} "
            f"| {r['ost_max_mean_h4']:.3f} | {r['ost_max_mean_end']:.3f} "
            f"| {r['oss_cpu_max_mean']:.3f} | {r['ost_samples_below_watermark']} "
            f"| {r['failed_creates']} |")
    return out


SEED_COLUMNS = (("job_io_mean_s", "job I/O mean s", 1), ("job_io_p99_s", "job I/O p99 s", 1),
                ("job_io_max_s", "slowest job s", 1), ("phase_io_mean_s", "phase mean s", 1),
                ("phase_io_p99_s", "phase p99 s", 1), ("phase_io_max_s", "slowest phase s", 1),
                ("bandwidth_mib_s", "MiB/s", 1), ("jobs_unfinished", "unfinished jobs", 1),
                ("ost_max_mean_end", "OST max/mean end", 3))
"""(row key, column title, decimals) of the seeds table; "vs <base>" follows the time and
bandwidth columns."""
VS_BASE = ("job_io_mean_s", "phase_io_mean_s", "phase_io_p99_s", "bandwidth_mib_s")

SCALE_WORLDS = tuple(f"scale-{n}{h}" for n in (160, 800, 3600) for h in ("", "-hetero"))
"""The scalability study's worlds in ``--all`` (160, 800 and 3600 OSTs, uniform
and with the LMT-measured spread)."""
DOC_BEGIN = "<!-- placement_eval --all: begin (generated; do not edit by hand) -->"
DOC_END = "<!-- placement_eval --all: end -->"


def over_seeds(per_seed: list[list[dict]], base: str = "round_robin",
               oracle: str = "oracle", rr: str = "round_robin") -> list[dict]:
    """Each variant's figures over the seeds (``per_seed[k]``: the rows of seed offset
    ``k``, every seed the same variants): per :data:`SEED_COLUMNS` key an
    :func:`lustre_alloc.simulator.seeds.interval`; ``vs_base[key]``: the interval of the per-seed
    relative difference from the ``base`` variant (a fraction) with ``includes_zero``
    (empty for ``base`` itself); ``headroom_mean`` and ``headroom_p99``: the interval of
    each seed's headroom captured over ``rr``, over the seeds where it is defined (its
    ``n``: the oracle gains >= 2% of RR's time there); None without an ``oracle`` and
    ``rr`` variant or where no seed defines it."""
    from lustre_alloc.simulator.report import headroom_captured
    from lustre_alloc.simulator.seeds import interval
    seeds = [{r["variant"]: r for r in rows} for rows in per_seed]
    out = []
    for lab in [r["variant"] for r in per_seed[0]]:
        rows = [s[lab] for s in seeds]
        agg: dict = {"variant": lab, "policy": rows[0]["policy"], "seeds": len(rows),
                     "jobs": rows[0]["jobs"], "base": base, "vs_base": {}}
        for key, _, _ in SEED_COLUMNS:        # None: a result saved before the column existed
            agg[key] = interval([r[key] for r in rows]) if all(key in r for r in rows) else None
        if lab != base and all(base in s for s in seeds):
            for key in VS_BASE:
                d = interval([s[lab][key] / s[base][key] - 1 for s in seeds if s[base][key]])
                d["includes_zero"] = d["ci95"] is None or abs(d["mean"]) <= d["ci95"]
                agg["vs_base"][key] = d
        for hk, key in (("headroom_mean", "phase_io_mean_s"), ("headroom_p99", "phase_io_p99_s")):
            h = ([headroom_captured(s[rr][key], s[lab][key], s[oracle][key]) for s in seeds]
                 if all(rr in s and oracle in s for s in seeds) else [])
            h = [v for v in h if v is not None]
            agg[hk] = interval(h) if h else None
        out.append(agg)
    return out


def _pm(iv: dict | None, nd: int) -> str:
    """``mean ± ci95`` of an interval; ``-`` when absent."""
    if not iv or iv["mean"] is None:
        return "-"
    return f"{iv['mean']:.{nd}f}" + (f" ± {iv['ci95']:.{nd}f}" if iv["ci95"] is not None else "")


def seeds_table(agg: list[dict]) -> list[str]:
    """Markdown table of :func:`over_seeds` rows: mean ± 95% interval per cell."""
    base = agg[0]["base"] if agg else "round_robin"
    head = ["variant"]
    for key, title, _ in SEED_COLUMNS:
        head.append(title)
        if key in VS_BASE:
            head.append("vs RR" if base == "round_robin" else f"vs {base}")
    head.append("headroom mean / p99")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in agg:
        cells = [f"{r['variant']} ({r['seeds']} seeds)"]
        for key, _, nd in SEED_COLUMNS:
            cells.append(_pm(r[key], nd))
            if key in VS_BASE:
                d = r["vs_base"].get(key)
                cells.append("-" if d is None or d["mean"] is None else
                             f"{100 * d['mean']:+.1f}%" + (" n.s." if d["includes_zero"] else ""))
        hm, hp = r["headroom_mean"], r["headroom_p99"]
        fewer = [iv["n"] for iv in (hm, hp) if iv and iv["n"] < r["seeds"]]
        cells.append(f"{_pm(hm, 2)} / {_pm(hp, 2)}" + (f" ({max(fewer)} seeds)" if fewer else ""))
        out.append("| " + " | ".join(cells) + " |")
    return out


def _variant_task(task: tuple, report=None) -> dict:
    """One variant under one seed as a sweep task (:mod:`lustre_alloc.simulator.sweep`)."""
    return run_variant(*task)


def _git_head() -> str:
    import subprocess
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def evaluate(scenario: str, variants: list[tuple[str, str, dict]], seeds: int, base: str,
             duration: float | None, jobs: int, scheduler: str | None) -> list | dict:
    """Every variant under ``seeds`` seeds of one world: the rows of one seed (a list) or
    ``{"per_seed", "aggregate", "commit", "wall_s"}``."""
    t0 = time.perf_counter()
    commit = _git_head()            # the code that runs (HEAD may move during a long sweep)
    tasks = [(scenario, duration, lab, pol, par, k)
             for k in range(seeds) for lab, pol, par in variants]
    labels = [lab if k == 0 else f"{lab}#{k}" for k in range(seeds) for lab, _, _ in variants]
    rows = run_tasks(_variant_task, tasks, labels, jobs=max(1, jobs), scheduler=scheduler)
    n = len(variants)
    per_seed = [rows[k * n:(k + 1) * n] for k in range(seeds)]
    if seeds == 1:
        return per_seed[0]
    return {"per_seed": per_seed, "aggregate": over_seeds(per_seed, base),
            "commit": commit, "wall_s": round(time.perf_counter() - t0, 1),
            "duration_s": duration}


def slim(result: list | dict) -> list | dict:
    """``result`` without each row's per-job I/O times (``job_io_s``): what ``--all`` keeps
    in :data:`RESULTS_DIR` (a busy day's would be 0.9 MB a world); a single world's run
    keeps them."""
    if not isinstance(result, dict):
        return result
    per_seed = [[{k: v for k, v in row.items() if k != "job_io_s"} for row in rows]
                for rows in result["per_seed"]]
    return {**result, "per_seed": per_seed}


def replace_variants(saved: dict, fresh: dict, base: str = "round_robin",
                     where: str = "saved result") -> dict:
    """``saved`` with the rows of ``fresh``'s variants put in place of its own, seed by
    seed, and its aggregate recomputed (:func:`over_seeds`); the other variants' rows and
    ``commit`` are kept, and ``updated`` maps each replaced label to the commit it was
    measured on (``fresh["commit"]``). Both are :func:`evaluate` results under the same
    seeds.

    Raises:
        SystemExit: one line naming ``where`` and the label or seed that does not match
            (a variant the saved result lacks, or other seeds)."""
    labels = [r["variant"] for r in fresh["per_seed"][0]]
    if [rows[0]["seed"] for rows in saved["per_seed"]] != [rows[0]["seed"] for rows in fresh["per_seed"]]:
        raise SystemExit(f"{where}: measured under other seeds than the update")
    per_seed = []
    for old, new in zip(saved["per_seed"], fresh["per_seed"]):
        by_label = {r["variant"]: r for r in new}
        missing = sorted(set(by_label) - {r["variant"] for r in old})
        if missing:
            raise SystemExit(f"{where}: has no variant {missing[0]!r} to replace")
        per_seed.append([by_label.get(r["variant"], r) for r in old])
    updated = {**saved.get("updated", {}), **{lab: fresh.get("commit", "unknown") for lab in labels}}
    return {**saved, "per_seed": per_seed, "aggregate": over_seeds(per_seed, base),
            "updated": updated}


def all_worlds() -> list[str]:
    """Every bundled world, then the scalability study's (:data:`SCALE_WORLDS`)."""
    from lustre_alloc.simulator.scenario import SCENARIO_DIR
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml")) + list(SCALE_WORLDS)


def _done(path: Path, variants: list[tuple[str, str, dict]], seeds: int) -> bool:
    """``path`` holds a saved result of exactly these variants under ``seeds`` seeds."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    per_seed = saved.get("per_seed") if isinstance(saved, dict) else None
    return (bool(per_seed) and len(per_seed) == seeds
            and [r["variant"] for r in per_seed[0]] == [lab for lab, _, _ in variants])


def doc_block(out: Path, worlds: list[str]) -> list[str]:
    """The generated section: each world's seeds table from ``<out>/<world>.json``, with
    the commit and seeds it was measured on; worlds without a result are listed."""
    lines, missing = [DOC_BEGIN, ""], []
    for world in worlds:
        path = out / f"{Path(world).stem}.json"
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            missing.append(world)
            continue
        if not isinstance(saved, dict):
            missing.append(world)
            continue
        dur = saved.get("duration_s")
        lines += [f"**`{world}`** ({len(saved['per_seed'])} seeds"
                  + (f", cut to {dur:g} s" if dur else ", the scenario's duration")
                  + f"; commit {saved.get('commit', 'unknown')}" + _updated_note(saved) + "):", ""]
        lines += render(saved) + [""]
    if missing:
        lines += ["Not yet measured with `--all`: " + ", ".join(f"`{w}`" for w in missing)
                  + ".", ""]
    return lines + [DOC_END]


def _updated_note(saved: dict) -> str:
    """``; mcmf, mcmf_flow re-measured on <commit>`` for a result's replaced variants
    (:func:`replace_variants`), grouped by commit; empty when none."""
    by_commit: dict[str, list[str]] = {}
    for lab, commit in saved.get("updated", {}).items():
        by_commit.setdefault(commit, []).append(lab)
    return "".join(f"; {', '.join(labs)} re-measured on {c}" for c, labs in by_commit.items())


def write_doc_block(doc: Path, block: list[str]) -> None:
    """Replace the text between :data:`DOC_BEGIN` and :data:`DOC_END` in ``doc``.

    Raises:
        SystemExit: ``doc`` lacks either marker (one line naming the file)."""
    text = doc.read_text()
    if DOC_BEGIN not in text or DOC_END not in text:
        raise SystemExit(f"{doc}: no generated section (the lines {DOC_BEGIN!r} and "
                         f"{DOC_END!r})")
    head, rest = text.split(DOC_BEGIN, 1)
    _, tail = rest.split(DOC_END, 1)
    doc.write_text(head + "\n".join(block) + tail)


def _register_lost_cost_models() -> None:
    """``cost_model = "convex"`` or ``"paper"`` in a ``--variant`` (bench/experiments/costs.py;
    known in this process, so such a variant runs with ``--jobs 1``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.experiments.costs import register
    register()


def main(argv: list[str] | None = None) -> int:
    _register_lost_cost_models()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario", nargs="?", help="a world (omit with --all)")
    ap.add_argument("--all", action="store_true",
                    help="every bundled world and the scalability study at 160/800/3600 OSTs")
    ap.add_argument("--worlds", default=None,
                    help="with --all: a comma-separated list instead of every world")
    ap.add_argument("--resume", action="store_true",
                    help="with --all: skip worlds whose saved result has these variants and seeds")
    ap.add_argument("--update", action="store_true",
                    help="with --all and --variant: measure only these variants and put their "
                         "rows in place of the saved result's own (its other rows kept)")
    ap.add_argument("--doc", type=Path, default=None,
                    help="with --all: rewrite this file's generated section after each world "
                         "(e.g. docs/placement.md)")
    ap.add_argument("--duration", type=float, default=None, help="seconds (default: the scenario's)")
    ap.add_argument("--variant", action="append", default=None,
                    help="label=policy:{json params}; repeatable (default: RR, QOS, random, "
                         "mcmf, mcmf_flow, oracle)")
    ap.add_argument("--sizes", action="store_true",
                    help="the size variants (SIZE_VARIANTS: mcmf without sizes, with predicted "
                         "sizes, with true sizes, the oracle) instead of the default ones")
    ap.add_argument("--seeds", type=int, default=5,
                    help="seeds per variant (default 5; 1: the one-seed table)")
    ap.add_argument("--base", default="round_robin",
                    help="the variant the 'vs' columns compare with (default round_robin)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--scheduler", default=None, help="a running Dask scheduler's address")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR,
                    help=f"where results are saved (default {RESULTS_DIR.relative_to(RESULTS_DIR.parents[1])})")
    ap.add_argument("--render", action="store_true",
                    help="print the table of <out>/<scenario>.json without running (with --all: "
                         "every world's, written into --doc if given)")
    args = ap.parse_args(argv)
    if args.all == bool(args.scenario):
        ap.error("give a scenario or --all")
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    if args.update and (not (args.all and args.variant) or args.render or args.resume):
        ap.error("--update needs --all and the --variant rows to re-measure (not --render "
                 "or --resume)")
    if args.all and args.seeds < 2:
        ap.error("--all reports intervals: --seeds must be at least 2")
    variants = ([parse_variant(v) for v in args.variant] if args.variant else
                list(SIZE_VARIANTS) if args.sizes else list(DEFAULT_VARIANTS))
    if args.all:
        worlds = args.worlds.split(",") if args.worlds else all_worlds()
        if args.render:             # no run: the saved results' section (into --doc if given)
            block = doc_block(args.out, worlds)
            if args.doc is not None:
                write_doc_block(args.doc, block)
            print("\n".join(block))
            return 0
        args.out.mkdir(parents=True, exist_ok=True)
        for world in worlds:
            path = args.out / f"{Path(world).stem}.json"
            if args.resume and _done(path, variants, args.seeds):
                print(f"{world}: kept {path}")
            elif args.update:
                try:
                    saved = json.loads(path.read_text())
                except (OSError, ValueError) as e:
                    raise SystemExit(f"{path}: no saved result to update ({e})") from None
                result = evaluate(world, variants, len(saved["per_seed"]), args.base,
                                  saved.get("duration_s"), args.jobs, args.scheduler)
                path.write_text(json.dumps(slim(replace_variants(saved, result, args.base, str(path))),
                                           indent=1, default=str))
                print(f"{world}: {', '.join(lab for lab, _, _ in variants)} re-measured, "
                      f"wall {result['wall_s']:.0f} s")
            else:
                result = evaluate(world, variants, args.seeds, args.base, args.duration,
                                  args.jobs, args.scheduler)
                path.write_text(json.dumps(slim(result), indent=1, default=str))
                print(f"{world}: {args.seeds} seeds, wall {result['wall_s']:.0f} s")
            if args.doc is not None:
                write_doc_block(args.doc, doc_block(args.out, worlds))
        return 0
    stem = Path(args.scenario).stem
    if args.render:
        print("\n".join(render(json.loads((args.out / f"{stem}.json").read_text()))))
        return 0
    t0 = time.perf_counter()
    result = evaluate(args.scenario, variants, args.seeds, args.base, args.duration,
                      args.jobs, args.scheduler)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1, default=str))
    dur = f", {args.duration:g} s" if args.duration else ""
    print(f"{args.scenario}{dur}, {args.seeds} seed(s) (wall {time.perf_counter() - t0:.0f} s)")
    print("\n".join(render(result)))
    return 0


def render(result: list | dict) -> list[str]:
    """The table of a saved result: one seed's rows (:func:`table`) or several seeds'
    (:func:`seeds_table`)."""
    if isinstance(result, list):
        return table(result)
    base = result["aggregate"][0]["base"] if result["aggregate"] else "round_robin"
    return seeds_table(over_seeds(result["per_seed"], base))      # today's aggregation


if __name__ == "__main__":
    sys.exit(main())
