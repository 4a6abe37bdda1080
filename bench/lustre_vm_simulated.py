"""The simulator's prediction for a setup of the Lustre-VM placement bench
(bench/lustre_vm_placement.py), made from that setup's warm-up alone, to commit before its
rounds run and to put beside them afterwards:

    python bench/lustre_vm_simulated.py RUN/placement-slow-vdev.json [--seeds 5] [--write F]

It builds the setup as a scenario from what the warm-up measured and nothing else:

* the cluster: one OSS with the run's OST count, 2 GiB each (``guest-run.sh``
  ``--device-size``), the collectors' 2 s interval (``RealLustreStack.interval_s``) as the
  stats and statfs intervals. Each OST's write bandwidth is what its fsynced warm-up files
  give at the job's file size: per OST, ``seconds = a + MiB / B`` fitted by least squares to
  its 1 and 4 MiB files (``warmup_files``), then ``mib / (a + mib / B)``. A fsynced file on a
  ZFS OST pays a fixed cost per txg sync (``a``, the uberblock and label writes behind a
  slow vdev) besides its bytes; one bandwidth from 4 MiB files alone read the slowed OST at
  0.35 MiB/s where the job's 8 MiB files went several times faster (docs/lustre-vm.md);
* the OSD: the guest's (``LUSTRE_VM_OSD`` of the setup, ZFS by default), so the simulated
  collectors read what that OSD's do (a ZFS OST's writes timed by the OFD, not brw_stats;
  docs/simulator.md, "One statistics path");
* the warm-up: its files one after another, OSTs in turn (unmanaged, no bytes counted
  against the job);
* interference (``interference_ost`` in bench/lustre_vm_setups.toml): background load on
  that OST for the whole run, 8 MiB every ``8 / B`` s, the pace of a writer that always has
  one fsynced write in flight (the trace's background records load an OST and land nothing);
* then ``rounds`` jobs, one per round, each ``writers`` writers creating ``files`` files of
  ``mib`` MiB, stripe count 1, open loop at the pace of the median OST.

Modes, as the bench's: ``lustre`` is Lustre's allocator (``lustre_qos``), ``drain`` the
same with the slow OST deactivated (``ost_state = "deactivated"``: ``max_create_count=0``)
from the first job on, ``shim`` the default ``mcmf``, ``steer`` ``qos_steer`` with the
bench's steering keys, and the ``oracle`` beside them. Each is the mean job I/O time (first
create to last byte) over its rounds, as a ratio to ``lustre_qos`` in the same seed. What
the simulator does not model, and so cannot predict: ZFS's write-back (the job's writes land
in memory up to the dirty limit and are paid at fsync), the closed loop of the real writers
(a file on the slow OST delays that writer's next), and the emulated CPU the guest's
writers, collectors and mapper share.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.simulator.runner import run_seeds  # noqa: E402
from lustre_alloc.simulator.scenario import load_scenario  # noqa: E402
from lustre_alloc.simulator.seeds import interval  # noqa: E402
from lustre_alloc.traces.format import TraceRecord, write_trace  # noqa: E402

MIB = 1 << 20
POLICIES = ("lustre_qos", "mcmf", "qos_steer", "oracle")
SETUPS = ROOT / "bench" / "lustre_vm_setups.toml"
OST_SIZE_GIB = 2.0          # guest-run.sh: mkfs.lustre --device-size=2097152 (KiB)
INTERVAL_S = 2.0            # RealLustreStack.interval_s, the run's collectors


def _record(t: float, job: str, file_id: str, nbytes: int, ost: int | None = None) -> TraceRecord:
    return TraceRecord(round(t, 4), "write", job, file_id, nbytes, 1, MIB, ost, 1)


def fit_ost(files: list[list], ost: int) -> tuple[float, float]:
    """``(a s, B MiB/s)`` of ``seconds = a + MiB / B`` over ``ost``'s warm-up files
    (``[ost, MiB, seconds]``), least squares; ``a`` clipped at 0 (then ``B`` = MiB / s).

    Raises:
        ValueError: no file on ``ost``.
    """
    pts = [(m, s) for o, m, s in files if o == ost]
    if not pts:
        raise ValueError(f"warmup_files: no file on OST {ost}")
    mibs = np.array([p[0] for p in pts], float)
    secs = np.array([p[1] for p in pts], float)
    if len(set(mibs.tolist())) > 1:
        slope, a = np.polyfit(mibs, secs, 1)
        if a >= 0 and slope > 0:
            return float(a), float(1 / slope)
    return 0.0, float(mibs.sum() / secs.sum())


def job_bandwidths(run: dict) -> dict[int, float]:
    """Each OST's MiB/s for one of the job's files (the module's docstring)."""
    mib = run["args"]["mib"]
    osts = sorted({int(o) for o, _, _ in run["warmup_files"]})
    out = {}
    for o in osts:
        a, bw = fit_ost(run["warmup_files"], o)
        out[o] = mib / (a + mib / bw)
    return out


def scenario_files(run: dict, setup: dict, out: Path, drain: bool) -> Path:
    """Write the scenario (TOML) and its traces for ``run`` (a placement-<setup>.json) into
    ``out``; returns the TOML's path. ``drain``: the slow OST deactivated from the first
    job on. Raises KeyError naming a field the run lacks."""
    a = run["args"]
    rates = job_bandwidths(run)
    osts = len(rates)
    median = statistics.median(rates.values())
    warm = []
    t = 0.0
    for i, (o, m, secs) in enumerate(run["warmup_files"]):
        warm.append(_record(t, "warmup", f"warmup/f{i}", int(m * MIB)))
        t += secs
    warm_end = max(t, a["warmup_s"])
    worst_round_s = a["files"] * a["writers"] * a["mib"] / osts / min(rates.values())
    period = max(30.0, 3 * worst_round_s)
    rounds = a["rounds"]
    duration = warm_end + 10 + rounds * period
    jobs = []
    for r in range(rounds):
        start = warm_end + 10 + r * period
        for w in range(a["writers"]):
            for f in range(a["files"]):
                jobs.append(_record(start + f * a["mib"] / median, f"vmjob.{r}",
                                    f"job-{r}/w{w}-{f}", a["mib"] * MIB))
    jobs.sort(key=lambda x: x.timestamp_s)
    write_trace(out / "warmup.csv", warm)
    write_trace(out / "job.csv", jobs)
    background = ""
    if "interference_ost" in setup:
        o = int(setup["interference_ost"])
        step = 8 / rates[o]
        recs = [_record(k * step, "interferer", f"bg/{k}", 8 * MIB, ost=o)
                for k in range(int(duration / step) + 1)]
        write_trace(out / "background.csv", recs)
        background = '\n[[workload]]\ntrace = "background.csv"\nmanaged = false\n'
    event = ""
    if drain:
        event = (f'\n[[event]]\nat_s = {warm_end:.1f}\nkind = "ost_state"\n'
                 f'ost = {int(run["slow_ost"])}\nstate = "deactivated"\n')
    bw = ", ".join(f"{rates[k]:.3f}" for k in range(osts))
    # the guest's OSD: what the simulated collectors read (brw_stats or the OFD's clock)
    osd = setup.get("guest_env", {}).get("LUSTRE_VM_OSD", "zfs")
    steer = run.get("steer", {})
    toml = out / "lustre-vm.toml"
    toml.write_text(f"""name = "lustre-vm-{run.get('setup', 'placement')}"
description = "bench/lustre_vm_placement.py's setup, bandwidths fitted to its warm-up"
duration_s = {duration:.1f}
step_s = 0.05
seed = 1
policies = {json.dumps(["lustre_qos"] if drain else list(POLICIES))}

[cluster]
oss_count = 1
osts_per_oss = {osts}
ost_size_gib = {OST_SIZE_GIB}
ost_bandwidth_mib_s = [{bw}]
statfs_interval_s = {INTERVAL_S}
stats_interval_s = {INTERVAL_S}
osd = "{osd}"

[cluster.initial_fill]
mode = "explicit"
used_fraction = [{", ".join(["0.0"] * osts)}]

[unmanaged]
allocator = "round_robin"

[policy_params.qos_steer]
confirm_s = {steer.get("confirm_s", 10.0)}
max_fraction = {steer.get("max_fraction", 0.25)}

[[workload]]
trace = "warmup.csv"
managed = false

[[workload]]
trace = "job.csv"
{background}{event}""")
    return toml


def job_times(result) -> list[float]:
    """I/O time of each round's job (``vmjob.*``), seconds, in round order."""
    return [j.io_time_s for jid, j in sorted(result.jobs.items())
            if jid.startswith("vmjob.") and not j.unfinished]


def predict(run: dict, setup: dict, seeds: int, keep: Path | None = None) -> dict:
    """Each mode's job time over Lustre's (``lustre_qos``) per seed, with its interval."""
    rows: dict[str, list[float]] = {}
    for drain in (False, True):
        out = (keep / ("drain" if drain else "modes")) if keep else \
            Path(tempfile.mkdtemp(prefix="lustre-vm-sim-"))
        out.mkdir(parents=True, exist_ok=True)
        scenario = load_scenario(scenario_files(run, setup, out, drain))
        for results in run_seeds(scenario, seeds):
            for res in results:
                times = job_times(res)
                name = "drain" if drain else res.policy
                rows.setdefault(name, []).append(statistics.mean(times) if times else float("nan"))
    base = rows["lustre_qos"]
    modes = {"drain": "drain", "shim": "mcmf", "steer": "qos_steer", "oracle": "oracle"}
    pred = {}
    for mode, policy in modes.items():
        ratios = [x / b for x, b in zip(rows[policy], base)]
        ci = interval(ratios)
        pred[mode] = {"per_seed": [round(r, 3) for r in ratios], "mean": ci["mean"],
                      "ci95": ci["ci95"]}
    return {"setup": run.get("setup"), "job_mib_s": {str(k): round(v, 3) for k, v in
                                                     job_bandwidths(run).items()},
            "lustre_qos_job_s": [round(x, 2) for x in base], "ratio_to_lustre": pred}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("placement_json", type=Path, help="a run's $OUT/placement-<setup>.json")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=None, help="rounds to predict (default: the run's)")
    ap.add_argument("--out", type=Path, default=None, help="keep the scenarios here")
    ap.add_argument("--write", type=Path, default=None, help="write the prediction (JSON) here")
    args = ap.parse_args()
    run = json.loads(args.placement_json.read_text())
    if "warmup_files" not in run:
        raise SystemExit(f"{args.placement_json}: warmup_files: missing (a run before the "
                         "warm-up recorded each file)")
    if args.rounds:
        run["args"]["rounds"] = args.rounds
    setups = tomllib.loads(SETUPS.read_text())
    setup = setups.get(run.get("setup", ""), {})
    summary = predict(run, setup, args.seeds, args.out)
    summary["from"] = {"run": str(args.placement_json), "warmup_files": len(run["warmup_files"]),
                       "seeds": args.seeds, "rounds": run["args"]["rounds"]}
    text = json.dumps(summary, indent=1)
    if args.write:
        args.write.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
