"""Placement's benefit on a real Lustre, against what an admin does by hand: a job writing
many files under Lustre's own allocator, under a hand drain of the slow OST
(``max_create_count=0`` on its OSP), under the shim with the mapper's default policy, and
under steering alone (the mapper drains through the MDS collector's agent; the job runs
without the shim); rounds interleaved, the modes' order rotated each round. Runs inside the
lustre-vm guest, one boot per set of guest settings (bench/lustre_vm_setups.toml):

    LUSTRE_VM_SLOW_OST=1:50 LUSTRE_VM_ZFS_DIRTY_MAX=16777216 \
        bash scripts/lustre-vm.sh run -- python /src/bench/lustre_vm_placement.py --setup slow-vdev
    LUSTRE_VM_ZFS_DIRTY_MAX=16777216 bash scripts/lustre-vm.sh run -- \
        python /src/bench/lustre_vm_placement.py --setup interference --setup control

Under software emulation absolute times mean nothing; the ratios to Lustre's time in the
same round and their spread are the result. Writes ``$OUT/placement-<setup>.json``
(rounds, ratios with their 95% interval, the signals table of bench/lustre_vm_signals.py).

The job: ``--writers`` processes at once, each writing ``--files`` files of ``--mib`` MiB
(stripe count 1, the file system's default) with an fsync before close; its time is the
wall time from the first create to the last close. Before the rounds, a warm-up writes to
every OST (``lfs setstripe -i``) for ``--warmup-s``, so the collectors have measured each.
Steering runs with ``confirm_s`` 10 s (its default, 120 s, is longer than this job) and
``max_fraction`` 0.25 (the default 0.1 of four OSTs allows none); both are printed in the
result. Also the shim's added time per create: ``--creates`` empty files with and without
the shim.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from lustre_alloc.livestack.real_lustre import RealLustreStack  # noqa: E402
from lustre_alloc.livestack.stack import read_metrics  # noqa: E402
from lustre_alloc.common.record_file import read_records  # noqa: E402
from lustre_vm_signals import Sampler, signal_table  # noqa: E402

SHIM = ROOT / "liblustre_alloc" / "liblustre_alloc.so"
SETUPS = ROOT / "bench" / "lustre_vm_setups.toml"
MODES = ("lustre", "drain", "shim", "steer")
STEER = {"mode": "off", "confirm_s": 10.0, "max_fraction": 0.25}
"""The bench's steering: off until a steer round (see the module's docstring)."""
JOBID_VAR = ""
"""Lustre's ``jobid_var`` for the setup ("" leaves the guest's, which keeps no job
statistics). ``--jobid-var procname_uid`` turns them on as sites run them (a batch
system's variable there): the mapper then learns each job's bytes per file
(lustre_alloc/mapper/state/job_sizes.py). A replicate of slow-vdev and control with them on
is in docs/lustre-vm.md."""
MAPPER = {"mds_cpu_limit_percent": 100.0, "round_budget_s": 0.25}
"""Two gates that read this guest, not an MDS: the MDS CPU gate (70 %) reads the whole
node's CPU, the job's writers' on this one-node file system (it sent 23 of 24 leases to
Lustre's allocator in a trial run); the round budget (10 ms) is wall time on a CPU emulated
10-25x slower (0.25 s: 25 x 10 ms). Their fallbacks are counted in the result."""
WRITER = """
import os, sys, time
d, n, size, me = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
buf = b'x' * (1 << 20)
for i in range(n):
    fd = os.open(f'{d}/{me}-{i}', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    for _ in range(size):
        os.write(fd, buf)
    os.fsync(fd)
    os.close(fd)
"""
INTERFERER = """
import os, sys
path = sys.argv[1]
buf = b'y' * (8 << 20)
fd = os.open(path, os.O_WRONLY)
off = 0
while True:
    os.pwrite(fd, buf, off)
    os.fsync(fd)
    off = (off + len(buf)) % (256 << 20)
"""


def job(directory: Path, writers: int, files: int, mib: int, env: dict[str, str]) -> float:
    """Seconds from the start of ``writers`` writer processes to the last one's end."""
    directory.mkdir(parents=True)
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(directory), str(files),
                               str(mib), f"w{k}"], env=env) for k in range(writers)]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a writer failed ({p.returncode})")
    return time.monotonic() - t0


def osts_of(directory: Path) -> dict[int, int]:
    """Files per OST (first stripe) under ``directory`` (its regular files only: the
    directory's own default prints ``-1``)."""
    out = subprocess.run(["lfs", "getstripe", "-i", "-r", str(directory)],
                         capture_output=True, text=True, check=True).stdout.split()
    counts: dict[int, int] = {}
    for x in out:
        if x.strip().isdigit():
            counts[int(x)] = counts.get(int(x), 0) + 1
    return dict(sorted(counts.items()))


def warm_up(mount: Path, seconds: float, osts: int) -> tuple[dict[int, float], list[list]]:
    """Write to every OST in turn for ``seconds`` and at least one round of each size (the
    collectors measure each), files of 1 and 4 MiB alternately, each fsynced; returns each OST's median MiB/s over its 4 MiB
    files and every file as ``[ost, MiB, seconds]`` (two sizes: a per-file latency and a
    bandwidth can be fitted per OST, bench/lustre_vm_simulated.py)."""
    d = mount / "warmup"
    subprocess.run(["rm", "-rf", str(d)], check=True)
    d.mkdir()
    files: list[list] = []
    t0, i = time.monotonic(), 0
    # for the time asked, and until every OST has a file of each size (a per-file cost and
    # a bandwidth need both)
    while time.monotonic() - t0 < seconds or i < 2 * osts:
        f = d / f"f{i}"
        ost, mib = i % osts, (1, 4)[(i // osts) % 2]
        subprocess.run(["lfs", "setstripe", "-i", str(ost), "-c", "1", str(f)], check=True)
        t = time.monotonic()
        subprocess.run(["dd", "if=/dev/zero", f"of={f}", "bs=1M", f"count={mib}",
                        "conv=fsync", "status=none"], check=True)
        files.append([ost, mib, time.monotonic() - t])
        i += 1
    subprocess.run(["rm", "-rf", str(d)], check=True)
    rates = {k: statistics.median(m / s for o, m, s in files if o == k and m == 4)
             for k in range(osts) if any(o == k and m == 4 for o, m, _ in files)}
    return rates, files


def create_cost(mount: Path, n: int, env: dict[str, str]) -> float:
    """Seconds per create of ``n`` empty files (one Python process)."""
    d = mount / f"creates-{time.monotonic_ns()}"
    d.mkdir()
    code = (f"import os, time\nt = time.monotonic()\nfor i in range({n}):\n"
            f"    os.close(os.open('{d}/f%d' % i, os.O_WRONLY | os.O_CREAT, 0o644))\n"
            f"print(time.monotonic() - t)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    subprocess.run(["rm", "-rf", str(d)], check=True)
    return float(out) / n


def create_waits(record: Path, directory: Path) -> dict[str, float] | None:
    """What the creates of one job under the shim cost its writers, from the shim's record
    (docs/client.md, "Record format"): per writer (the file name's ``w<k>-`` prefix) the
    summed wait for the mapper (``mapper_us``) and the summed open under the shim
    (``total_us``: the wait, the create with the layout and the record), s; the slowest
    writer's of each (a job ends with its last writer). None without records for it."""
    if not record.exists():
        return None
    prefix = f"{directory}/"
    mapper: dict[str, float] = {}
    total: dict[str, float] = {}
    files = 0
    for r in read_records(record):
        path = r.get("path", "")
        if not path.startswith(prefix):
            continue
        writer = path[len(prefix):].split("-", 1)[0]
        mapper[writer] = mapper.get(writer, 0.0) + float(r.get("mapper_us") or 0) / 1e6
        total[writer] = total.get(writer, 0.0) + float(r.get("total_us") or 0) / 1e6
        files += 1
    if not files:
        return None
    return {"files": files, "slowest_writer_mapper_s": max(mapper.values()),
            "slowest_writer_open_s": max(total.values()),
            "mean_writer_mapper_s": statistics.fmean(mapper.values()),
            "mean_writer_open_s": statistics.fmean(total.values())}


def stack_cpu_s(stack: RealLustreStack) -> dict[str, float]:
    """CPU seconds (user + system) each process of the stack (broker, collectors, mapper)
    has used so far, its children (the mapper's planner process) included. In this
    one-node guest the stack shares the emulated CPU with the job's writers and the OSTs,
    where on a site the mapper has the MDS's and the collectors a fraction of each
    server's; a round's share says how much of a job's time it could have taken."""
    out = {}
    for role, proc in stack.procs.items():
        try:
            p = psutil.Process(proc.pid)
            total = 0.0
            for q in [p, *p.children(recursive=True)]:
                t = q.cpu_times()
                total += t.user + t.system
            out[role] = total
        except psutil.Error:
            continue
    return out


def lctl(*args: str) -> str:
    return subprocess.run(["lctl", *args], capture_output=True, text=True, check=True).stdout


def probe_osts(mount: Path, n: int = 8) -> set[int]:
    """OSTs LOD gives ``n`` new files of the default layout (one stripe) now."""
    d = mount / f".probe-{time.monotonic_ns()}"
    d.mkdir()
    for i in range(n):
        (d / f"p{i}").touch()
    got = set(osts_of(d))
    subprocess.run(["rm", "-rf", str(d)], check=True)
    return got


def wait_osts(mount: Path, drained: int | None, timeout_s: float = 90.0) -> float:
    """Seconds until LOD's allocator follows a change (its statfs cache, ``lod_qos_maxage``,
    lags the OSP's state by seconds): with ``drained``, eight new files all keep off it;
    without, eight new files use every OST (round-robin). A ``-c -1`` probe is no test
    here: with one OST drained, 2.17.0 answered it ENOSPC."""
    t0 = time.monotonic()
    while True:
        got = probe_osts(mount)
        if (drained is not None and drained not in got) or (drained is None and len(got) >= 4):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"LOD did not follow the change (drained {drained}) in "
                             f"{timeout_s:.0f} s: files went to OSTs {sorted(got)}")
        time.sleep(1.0)


def wait_drained_osp(fsname: str, osts: set[int], timeout_s: float) -> int | None:
    """The OST whose OSP on MDT0000 has ``max_create_count`` 0 (a drain applied on the
    MDS), waiting up to ``timeout_s``; None if none is drained by then."""
    t0 = time.monotonic()
    while True:
        for o in sorted(osts):
            if int(lctl("get_param", "-n", osp_param(fsname, o)).strip()) == 0:
                return o
        if time.monotonic() - t0 > timeout_s:
            return None
        time.sleep(0.5)


def osp_param(fsname: str, ost: int) -> str:
    return f"osp.{fsname}-OST{ost:04x}-osc-MDT0000.max_create_count"


def interval95(xs: list[float]) -> tuple[float, float]:
    """Student-t 95% interval of the mean of ``xs`` (nan with fewer than two)."""
    if len(xs) < 2:
        return math.nan, math.nan
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}
    half = t.get(len(xs), 2.0) * statistics.stdev(xs) / math.sqrt(len(xs))
    m = statistics.fmean(xs)
    return m - half, m + half


def run_setup(name: str, setup: dict, args, mount: Path, out: Path, plain_env: dict,
              fsname: str) -> dict:
    slow = int(setup["slow_ost"])
    osts = set(range(args.osts))
    for key, want in setup.get("guest_env", {}).items():
        if os.environ.get(key, "") != want:
            raise SystemExit(f"setup {name}: boot the guest with {key}={want} "
                             f"(bench/lustre_vm_setups.toml), it has {os.environ.get(key, '')!r}")
    result: dict = {"setup": name, "stands_for": setup["stands_for"], "slow_ost": slow,
                    "guest_env": setup.get("guest_env", {}), "args": vars(args),
                    "steer": STEER, "mapper": MAPPER, "rounds": []}
    if args.jobid_var:
        lctl("set_param", f"jobid_var={args.jobid_var}")
    result["jobid_var"] = lctl("get_param", "-n", "jobid_var").strip()
    interferer = None
    if "interference_ost" in setup:
        f = mount / f"interference-{name}"
        subprocess.run(["rm", "-f", str(f)], check=True)
        subprocess.run(["lfs", "setstripe", "-i", str(setup["interference_ost"]), "-c", "1",
                        str(f)], check=True)
        interferer = subprocess.Popen([sys.executable, "-c", INTERFERER, str(f)], env=plain_env)
    sampler = Sampler(2.0).start()
    t_warm = t_rounds = math.inf       # the warm-up's start and end, monotonic s
    try:
        with RealLustreStack(out / f"stack-{name}", steer=dict(STEER),
                             mapper_settings=dict(MAPPER)) as stack:
            result["mapper_ready_s"] = stack.ready_s
            shim_env = dict(plain_env, LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=stack.mapper,
                            LUSTRE_ALLOC_TIMEOUT_MS="2000",
                            LUSTRE_ALLOC_RECORD=str(out / f"shim-record-{name}.tsv"))
            t_warm = time.monotonic()
            result["warmup_mib_s"], result["warmup_files"] = warm_up(mount, args.warmup_s,
                                                                      args.osts)
            t_rounds = time.monotonic()
            print(json.dumps({"setup": name, "warmup_mib_s": result["warmup_mib_s"]}), flush=True)
            saved = lctl("get_param", "-n", osp_param(fsname, slow)).strip()
            for r in range(args.rounds):
                order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
                for mode in order:
                    row = {"round": r, "mode": mode}
                    env = shim_env if mode == "shim" else plain_env
                    if mode == "drain":
                        lctl("set_param", f"{osp_param(fsname, slow)}=0")
                        row["settle_s"] = wait_osts(mount, slow)
                    if mode == "steer":
                        stack.set_steer_mode("on")
                        t0 = time.monotonic()
                        while stack.steered() < 1 and time.monotonic() - t0 < args.steer_wait_s:
                            time.sleep(1.0)
                        row["steered"] = stack.steered()
                        # the mapper's gauge counts a drain it decided; the job starts
                        # once the MDS has it and LOD follows, as for the hand drain
                        # (in the first measured run round 0 started before the agent
                        # had set max_create_count: its job ran undrained)
                        drained = wait_drained_osp(fsname, osts, 30.0) \
                            if row["steered"] >= 1 else None
                        if drained is not None:
                            row["settle_s"] = wait_osts(mount, drained)
                        row["steer_wait_s"] = time.monotonic() - t0
                        row["max_create_count"] = {
                            o: int(lctl("get_param", "-n", osp_param(fsname, o)).strip())
                            for o in sorted(osts)}
                    d = mount / f"job-{name}-{r}-{mode}"
                    try:
                        subprocess.run(["rm", "-rf", str(d)], check=True)
                        cpu0 = stack_cpu_s(stack)
                        row["seconds"] = job(d, args.writers, args.files, args.mib, env)
                        cpu1 = stack_cpu_s(stack)
                        row["stack_cpu_s"] = {k: cpu1[k] - cpu0[k] for k in cpu1 if k in cpu0}
                        row["osts"] = osts_of(d)
                        if mode == "shim":
                            row["creates"] = create_waits(
                                Path(shim_env["LUSTRE_ALLOC_RECORD"]), d)
                        subprocess.run(["rm", "-rf", str(d)], check=True)
                    finally:        # the next mode starts from Lustre's own state
                        if mode == "drain":
                            lctl("set_param", f"{osp_param(fsname, slow)}={saved}")
                        if mode == "steer":
                            stack.set_steer_mode("off")
                            t0 = time.monotonic()
                            while stack.steered() > 0 and time.monotonic() - t0 < 60:
                                time.sleep(0.5)
                    if mode in ("drain", "steer"):
                        row["restore_s"] = wait_osts(mount, None)
                    result["rounds"].append(row)
                    print(json.dumps(row), flush=True)
            if args.creates:
                result["create_s"] = {"lustre": create_cost(mount, args.creates, plain_env),
                                      "shim": create_cost(mount, args.creates, shim_env)}
            result["fallbacks"] = {k: v for k, v in read_metrics(stack.metrics_port).items()
                                   if k.startswith("lustre_alloc_mapper_fallbacks_total")}
            status = subprocess.run([sys.executable, "-m", "lustre_alloc.mapper.service.ctl",
                                     "--json", "status"], capture_output=True, text=True,
                                    env=dict(os.environ, PYTHONPATH=str(ROOT)))
            result["mapper_status"] = status.stdout[-20000:]
    finally:
        readings = sampler.stop()
        if interferer is not None:
            interferer.kill()
            interferer.wait()
    # the signals from the warm-up's start (the last reading before it is the baseline):
    # before it the stack was starting and nothing was written
    since = [x for x in readings if x.t >= t_warm]
    before = [x for x in readings if x.t < t_warm][-1:] if since else []
    loaded = before + since
    warm = [x for x in loaded if x.t <= t_rounds + 2.0]
    result["signals_warmup"] = signal_table(warm, slow) if len(warm) > 1 else {}
    result["signals_all"] = signal_table(loaded, slow) if len(loaded) > 1 else {}
    result["signal_readings_failed"] = sampler.failed
    result["signal_readings"] = [{"t": x.t - (loaded[0].t if loaded else 0.0), "osts": x.osts,
                                  "oss": x.oss} for x in loaded]
    summary = {}
    for mode in MODES[1:]:
        ratios = []
        for r in range(args.rounds):
            t = {x["mode"]: x["seconds"] for x in result["rounds"] if x["round"] == r}
            if mode in t and "lustre" in t:
                ratios.append(t[mode] / t["lustre"])
        lo, hi = interval95(ratios)
        if not ratios:
            continue
        summary[mode] = {"per_round": ratios, "mean": statistics.fmean(ratios) if ratios else None,
                         "median": statistics.median(ratios) if ratios else None,
                         "ci95": [lo, hi]}
    result["ratio_to_lustre"] = summary
    result["lustre_s"] = [x["seconds"] for x in result["rounds"] if x["mode"] == "lustre"]
    (out / f"placement-{name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({"setup": name, "ratio_to_lustre": summary}, indent=1), flush=True)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", action="append", required=True,
                    help="a setup of bench/lustre_vm_setups.toml (repeatable: run in turn)")
    ap.add_argument("--mount", default=os.environ.get("LUSTRE_MOUNT", "/mnt/lustre"))
    ap.add_argument("--fsname", default=os.environ.get("LUSTRE_FSNAME", "lustre"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--mib", type=int, default=8)
    ap.add_argument("--warmup-s", type=float, default=60.0)
    ap.add_argument("--steer-wait-s", type=float, default=60.0,
                    help="longest wait for the steering to act before a steer round, s")
    ap.add_argument("--creates", type=int, default=0)
    ap.add_argument("--jobid-var", default=JOBID_VAR,
                    help="Lustre's jobid_var for the setup, e.g. procname_uid (default: the "
                         "guest's)")
    ap.add_argument("--osts", type=int, default=4)
    args = ap.parse_args()
    setups = tomllib.loads(SETUPS.read_text())
    for name in args.setup:
        if name not in setups:
            ap.error(f"--setup {name}: not in {SETUPS} ({', '.join(setups)})")
    mount = Path(args.mount)
    out = Path(os.environ.get("OUT", tempfile.mkdtemp()))
    plain_env = {k: v for k, v in os.environ.items()
                 if not k.startswith("LUSTRE_ALLOC_") and k != "LD_PRELOAD"}
    for name in args.setup:
        run_setup(name, setups[name], args, mount, out, plain_env, args.fsname)
    return 0


if __name__ == "__main__":
    sys.exit(main())
