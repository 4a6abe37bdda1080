"""Creates per second of a multi-process create burst under the shim.

Two processes (``--procs``) of the project's own C create loop
(``liblustre_alloc/tests/la_create_files``: open(O_CREAT) + write + close of N new files;
mdtest needs MPI, which this machine does not have) start at the same instant and each
create ``--files`` files on tmpfs; the rate is all their creates over the window from the
first start to the last end. Rows: without the shim (the floor), and under the shim against
the real mapper (``lustre-alloc-mapper``, static emulated clusters of 32 = 8x4 and 3600 =
450x8 OSTs) with ``round_robin`` and ``mcmf``, each with leases (protocol v2, the default)
and with one request per create (``LUSTRE_ALLOC_LEASE=0``); with ``--sizes``, each leased
row also without the close reports of the files' sizes (``LUSTRE_ALLOC_SIZES=0``), so the
ratio of the two is what the reports cost. Rows are interleaved over
``--rounds`` rounds; printed: median creates/s, its ratio to the floor's in the same run,
and how many creates got a layout from the mapper (the record file), which must be all.

    .venv/bin/python bench/create_rate.py [--files 2000] [--procs 2] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from lustre_alloc.common.record_file import read_records  # noqa: E402
from tests.client.conftest import Mapper, free_port, wait_for_pong  # noqa: E402

LIB = ROOT / "liblustre_alloc" / "liblustre_alloc.so"
PROG = ROOT / "liblustre_alloc" / "tests" / "la_create_files"
MAPPER = ROOT / ".venv" / "bin" / "lustre-alloc-mapper"
CLUSTERS = {32: "8x4", 3600: "450x8"}
START_DELAY_S = 0.3
"""Processes are started, then begin creating together this long after."""


def start_mapper(policy: str, osts: int) -> Mapper:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([str(MAPPER), "--bind", endpoint, "--static-cluster",
                             CLUSTERS[osts], "--policy", policy, "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = Mapper(endpoint, proc, f"{policy}@{osts}")
    wait_for_pong(endpoint, proc, 60)
    return m


def burst(work: Path, procs: int, files: int, env_extra: dict[str, str] | None
          ) -> tuple[float, int, int]:
    """(creates/s, creates, creates placed by the mapper) of one burst."""
    data = work / "lustre"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    record = work / "record.tsv"
    record.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.pop("LD_PRELOAD", None)
    if env_extra is not None:
        env.update(LD_PRELOAD=str(LIB), LUSTRE_ALLOC_PATHS=str(data),
                   LUSTRE_ALLOC_RECORD=str(record), LUSTRE_ALLOC_TIMEOUT_MS="2000",
                   **env_extra)
    start_ns = time.time_ns() + int(START_DELAY_S * 1e9)
    running = [subprocess.Popen([str(PROG), "-n", str(files), "-p", f"r{i}_", "-s",
                                 str(start_ns), str(data)], env=env, stdout=subprocess.PIPE,
                                text=True) for i in range(procs)]
    starts, ends, created = [], [], 0
    for p in running:
        out, _ = p.communicate(timeout=300)
        if p.returncode != 0:
            raise RuntimeError(f"la_create_files failed: {out}")
        created += int(re.search(r"created=(\d+)", out).group(1))
        starts.append(int(re.search(r"start_ns=(\d+)", out).group(1)))
        ends.append(int(re.search(r"end_ns=(\d+)", out).group(1)))
    window_s = (max(ends) - min(starts)) / 1e9
    placed = sum(r["result"] == "layout" for r in read_records(record)) if env_extra else 0
    return created / window_s, created, placed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=2000, help="creates per process")
    ap.add_argument("--rows", default=None,
                    help="only the rows whose name holds one of these comma-separated words")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--osts", default="32,3600")
    ap.add_argument("--policies", default="round_robin,mcmf")
    ap.add_argument("--sizes", action="store_true",
                    help="add each leased row without the close reports (LUSTRE_ALLOC_SIZES=0)")
    args = ap.parse_args()
    subprocess.run(["make", "-s", "-C", str(ROOT / "liblustre_alloc")], check=True)
    mappers = {(p, int(n)): start_mapper(p, int(n))
               for n in args.osts.split(",") for p in args.policies.split(",")}
    configs: dict[str, dict[str, str] | None] = {
        "no shim (floor)": None, "shim, no mapper (its own cost)": {"LUSTRE_ALLOC_MAPPER": ""}}
    for (policy, osts), m in mappers.items():
        configs[f"{policy}, {osts} OSTs, leased"] = {"LUSTRE_ALLOC_MAPPER": m.endpoint}
        if args.sizes:
            configs[f"{policy}, {osts} OSTs, leased, no close sizes"] = {
                "LUSTRE_ALLOC_MAPPER": m.endpoint, "LUSTRE_ALLOC_SIZES": "0"}
        configs[f"{policy}, {osts} OSTs, per create"] = {"LUSTRE_ALLOC_MAPPER": m.endpoint,
                                                        "LUSTRE_ALLOC_LEASE": "0"}
    if args.rows:
        words = args.rows.split(",")
        configs = {k: v for k, v in configs.items()
                   if k == "no shim (floor)" or any(w in k for w in words)}
    rates: dict[str, list[float]] = {k: [] for k in configs}
    placed: dict[str, list[tuple[int, int]]] = {k: [] for k in configs}
    try:
        with tempfile.TemporaryDirectory(prefix="la-rate-", dir="/dev/shm") as tmp:
            for _ in range(args.rounds):          # interleaved: drift hits every row alike
                for name, extra in configs.items():
                    rate, created, got = burst(Path(tmp), args.procs, args.files, extra)
                    rates[name].append(rate)
                    placed[name].append((got, created))
    finally:
        for m in mappers.values():
            m.stop()
    floor = float(np.median(rates["no shim (floor)"]))
    t = Table(title=f"{args.procs} processes x {args.files} creates on tmpfs, "
                    f"{args.rounds} interleaved rounds (median)")
    for col in ("configuration", "creates/s", "/ floor", "placed by the mapper"):
        t.add_column(col, justify="right")
    for name in configs:
        r = float(np.median(rates[name]))
        got = sum(g for g, _ in placed[name])
        total = sum(c for _, c in placed[name])
        t.add_row(name, f"{r:,.0f}", f"{r / floor:.3f}",
                  "-" if not (configs[name] or {}).get("LUSTRE_ALLOC_MAPPER") else
                  f"{got}/{total}")
    Console(width=120).print(t)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
