"""The simulator's prediction for the Lustre-VM placement run (bench/lustre_vm_placement.py),
to put beside the ratio Lustre gave:

    python bench/lustre_vm_simulated.py RUN/placement.json [--seeds 5]

It builds the same setup as a scenario, from what that run measured and nothing else:

* the cluster: one OSS with the run's OST count, 2 GiB each (``guest-run.sh``
  ``--device-size``), each OST's write bandwidth the median MiB/s of its 4 MiB fsynced
  writes during the run's warm-up (``warmup_mib_s``), the collectors' 2 s interval
  (``lustre_alloc.livestack.real_lustre.RealLustreStack``) as the stats and statfs intervals;
* the warm-up: 4 MiB files one after another for ``warmup_s``, placed by Lustre's own
  round-robin (the run pinned them with ``lfs setstripe -i`` in OST order; unmanaged here),
  so the mapper has seen every OST;
* then ``rounds`` jobs, one per round, each ``writers`` writers creating ``files`` files of
  ``mib`` MiB, stripe count 1. The trace is open loop: a writer's next file starts
  ``mib`` / (median OST MiB/s) after its previous one, the pace it keeps on an unloaded OST
  (the run's writers are closed loop: a file on the slow OST delays that writer's next).

Policies: Lustre's allocator (``lustre_qos``, what the run's "lustre" rounds used), the
default ``mcmf`` (what the shim asked), ``round_robin`` and the ``oracle``. The result is
each policy's mean job I/O time (first create to last byte, :func:`lustre_alloc.simulator.report.user_metrics`)
and ``mcmf / lustre_qos`` per seed, beside the run's measured ratio. The simulator's OSTs
slow every write by their bandwidth, and its collectors see that in the I/O times; on the
ZFS OSTs of the run the delay fell on later txg I/O that brw_stats does not show
(docs/lustre-vm.md), which is what a gap between the two numbers means.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.simulator.report import user_jobs  # noqa: E402
from lustre_alloc.simulator.runner import run_seeds  # noqa: E402
from lustre_alloc.simulator.scenario import load_scenario  # noqa: E402
from lustre_alloc.simulator.seeds import interval  # noqa: E402
from lustre_alloc.traces.format import TraceRecord, write_trace  # noqa: E402

MIB = 1 << 20
POLICIES = ("lustre_qos", "round_robin", "mcmf", "oracle")
OST_SIZE_GIB = 2.0          # guest-run.sh: mkfs.lustre --device-size=2097152 (KiB)
INTERVAL_S = 2.0            # RealLustreStack.interval_s, the run's collectors


def _record(t: float, job: str, file_id: str, nbytes: int) -> TraceRecord:
    return TraceRecord(round(t, 4), "write", job, file_id, nbytes, 1, MIB, None, 1)


def scenario_files(run: dict, out: Path) -> Path:
    """Write the scenario (TOML) and its two traces for ``run`` (a placement.json) into
    ``out``; returns the TOML's path. Raises KeyError naming a field the run lacks."""
    a = run["args"]
    rates = {int(k): float(v) for k, v in run["warmup_mib_s"].items()}
    osts = len(rates)
    median = statistics.median(rates.values())
    warm, t, i = [], 0.0, 0
    while t < a["warmup_s"]:                       # one file after another, OSTs in turn
        warm.append(_record(t, "warmup", f"warmup/f{i}", 4 * MIB))
        t += 4 / rates[i % osts]
        i += 1
    worst_round_s = a["files"] * a["writers"] * a["mib"] / osts / min(rates.values())
    period = max(30.0, 3 * worst_round_s)
    jobs = []
    for r in range(a["rounds"]):
        start = a["warmup_s"] + 10 + r * period
        for w in range(a["writers"]):
            for f in range(a["files"]):
                jobs.append(_record(start + f * a["mib"] / median, f"vmjob.{r}",
                                    f"job-{r}/w{w}-{f}", a["mib"] * MIB))
    jobs.sort(key=lambda x: x.timestamp_s)
    write_trace(out / "warmup.csv", warm)
    write_trace(out / "job.csv", jobs)
    bw = ", ".join(f"{rates[k]:.3f}" for k in range(osts))
    toml = out / "lustre-vm.toml"
    toml.write_text(f"""name = "lustre-vm-placement"
description = "bench/lustre_vm_placement.py's setup, bandwidths measured in its warm-up"
duration_s = {a["warmup_s"] + 10 + a["rounds"] * period:.1f}
step_s = 0.05
seed = 1
policies = {json.dumps(list(POLICIES))}

[cluster]
oss_count = 1
osts_per_oss = {osts}
ost_size_gib = {OST_SIZE_GIB}
ost_bandwidth_mib_s = [{bw}]
statfs_interval_s = {INTERVAL_S}
stats_interval_s = {INTERVAL_S}

[cluster.initial_fill]
mode = "explicit"
used_fraction = [{", ".join(["0.0"] * osts)}]

[unmanaged]
allocator = "round_robin"

[[workload]]
trace = "warmup.csv"
managed = false

[[workload]]
trace = "job.csv"
""")
    return toml


def job_times(result) -> list[float]:
    """I/O time of each round's job (``vmjob.*``), seconds, in round order."""
    return [j.io_time_s for jid, j in sorted(result.jobs.items())
            if jid.startswith("vmjob.") and not j.unfinished]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("placement_json", type=Path, help="a run's $OUT/placement.json")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="keep the scenario here")
    args = ap.parse_args()
    run = json.loads(args.placement_json.read_text())
    if "warmup_mib_s" not in run:
        raise SystemExit(f"{args.placement_json}: warmup_mib_s: missing (a run before the "
                         "warm-up measured each OST)")
    out = args.out or Path(tempfile.mkdtemp(prefix="lustre-vm-sim-"))
    out.mkdir(parents=True, exist_ok=True)
    scenario = load_scenario(scenario_files(run, out))
    per_seed = run_seeds(scenario, args.seeds)
    rows: dict[str, list[float]] = {p: [] for p in POLICIES}
    files_on: dict[str, list] = {p: [] for p in POLICIES}
    for results in per_seed:
        for res in results:
            times = job_times(res)
            rows[res.policy].append(statistics.mean(times) if times else float("nan"))
            files_on[res.policy].append(len(user_jobs(res)))
    ratios = [m / q for m, q in zip(rows["mcmf"], rows["lustre_qos"])]
    ci = interval(ratios)
    measured = run.get("ratio_shim_over_lustre", {})
    summary = {
        "warmup_mib_s": run["warmup_mib_s"],
        "job_io_time_s_mean": {p: [round(x, 3) for x in v] for p, v in rows.items()},
        "simulated_mcmf_over_lustre_qos": {"per_seed": [round(r, 3) for r in ratios],
                                            "mean": ci["mean"], "ci95": ci["ci95"]},
        "simulated_oracle_over_lustre_qos": round(statistics.mean(
            o / q for o, q in zip(rows["oracle"], rows["lustre_qos"])), 3),
        "measured_shim_over_lustre": measured,
        "scenario": str(out),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
