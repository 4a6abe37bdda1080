"""Placement's benefit on a real Lustre: one OST slowed, a job writing many files under
Lustre's own allocator and under the shim with the mapper's default policy; the ratio of
the job's I/O times, several rounds interleaved. Runs inside the lustre-vm guest:

    LUSTRE_VM_SLOW_OST=1:50 LUSTRE_VM_ZFS_DIRTY_MAX=16777216 \\
        bash scripts/lustre-vm.sh run -- python /src/bench/lustre_vm_placement.py

(OST 1's vdev behind a 50 ms dm-delay; ZFS's dirty-data limit small, so a slow vdev throttles
its writers at once.) Under software emulation absolute times mean nothing; the ratio and
its spread are the result. Writes ``$OUT/placement.json``.

The job: ``--writers`` processes at once, each writing ``--files`` files of ``--mib`` MiB
(stripe count 1, the file system's default) with an fsync before close; its time is the
wall time from the first create to the last close. Before the rounds, a warm-up writes to
every OST (``lfs setstripe -i``) for ``--warmup-s``, so the collectors have measured each.
Also the shim's added time per create: ``--creates`` empty files with and without the shim.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre_alloc.livestack.real_lustre import RealLustreStack  # noqa: E402

SHIM = ROOT / "liblustre_alloc" / "liblustre_alloc.so"
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
    """Files per OST (first stripe) under ``directory``."""
    out = subprocess.run(["lfs", "getstripe", "-i", "-r", str(directory)],
                         capture_output=True, text=True, check=True).stdout.split()
    counts: dict[int, int] = {}
    for x in out:
        if x.strip().lstrip("-").isdigit():
            counts[int(x)] = counts.get(int(x), 0) + 1
    return dict(sorted(counts.items()))


def warm_up(mount: Path, seconds: float, osts: int) -> dict[int, float]:
    """Write to every OST in turn for ``seconds`` (the collectors measure each); returns each
    OST's median MiB/s over its 4 MiB fsynced writes (the simulator's per-OST bandwidth for
    the same setup, bench/lustre_vm_simulated.py)."""
    d = mount / "warmup"
    subprocess.run(["rm", "-rf", str(d)], check=True)
    d.mkdir()
    rates: dict[int, list[float]] = {k: [] for k in range(osts)}
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        f = d / f"f{i}"
        subprocess.run(["lfs", "setstripe", "-i", str(i % osts), "-c", "1", str(f)],
                       check=True)
        t = time.monotonic()
        subprocess.run(["dd", "if=/dev/zero", f"of={f}", "bs=1M", "count=4",
                        "conv=fsync", "status=none"], check=True)
        rates[i % osts].append(4 / (time.monotonic() - t))
        i += 1
    subprocess.run(["rm", "-rf", str(d)], check=True)
    return {k: statistics.median(v) for k, v in rates.items() if v}


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mount", default=os.environ.get("LUSTRE_MOUNT", "/mnt/lustre"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--mib", type=int, default=8)
    ap.add_argument("--warmup-s", type=float, default=60.0)
    ap.add_argument("--creates", type=int, default=300)
    ap.add_argument("--osts", type=int, default=4)
    args = ap.parse_args()
    mount = Path(args.mount)
    out = Path(os.environ.get("OUT", tempfile.mkdtemp()))
    result: dict = {"args": vars(args), "slow_ost": os.environ.get("LUSTRE_VM_SLOW_OST", ""),
                    "rounds": []}
    plain_env = {k: v for k, v in os.environ.items()
                 if not k.startswith("LUSTRE_ALLOC_") and k != "LD_PRELOAD"}
    with RealLustreStack(out / "stack") as stack:
        result["mapper_ready_s"] = stack.ready_s
        shim_env = dict(plain_env, LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=stack.mapper,
                        LUSTRE_ALLOC_TIMEOUT_MS="2000",
                        LUSTRE_ALLOC_RECORD=str(out / "shim-record.tsv"))
        result["warmup_mib_s"] = warm_up(mount, args.warmup_s, args.osts)
        print(json.dumps({"warmup_mib_s": result["warmup_mib_s"]}), flush=True)
        for r in range(args.rounds):
            for mode, env in (("lustre", plain_env), ("shim", shim_env)) if r % 2 == 0 else \
                    (("shim", shim_env), ("lustre", plain_env)):
                d = mount / f"job-{r}-{mode}"
                subprocess.run(["rm", "-rf", str(d)], check=True)
                seconds = job(d, args.writers, args.files, args.mib, env)
                row = {"round": r, "mode": mode, "seconds": seconds, "osts": osts_of(d)}
                result["rounds"].append(row)
                print(json.dumps(row), flush=True)
                subprocess.run(["rm", "-rf", str(d)], check=True)
        result["create_s"] = {"lustre": create_cost(mount, args.creates, plain_env),
                              "shim": create_cost(mount, args.creates, shim_env)}
    t = {m: [x["seconds"] for x in result["rounds"] if x["mode"] == m]
         for m in ("lustre", "shim")}
    ratios = [s / lu for s, lu in zip(t["shim"], t["lustre"])]
    result["ratio_shim_over_lustre"] = {"per_round": ratios,
                                        "median": statistics.median(ratios),
                                        "min": min(ratios), "max": max(ratios)}
    (out / "placement.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("slow_ost", "warmup_mib_s", "ratio_shim_over_lustre",
                                             "create_s", "mapper_ready_s")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
