"""What a program that never creates a file on Lustre pays to start under the shim.

bash runs ``/bin/true`` N times (bash and every ``/bin/true`` preloaded), so the time
per program is what a login node's or a workflow's short processes pay. Rows, interleaved
round by round in one run: no shim (the floor); the shim as built (libzmq, libmsgpack-c and
the helper thread wait for the first create in scope); the shim with
``LUSTRE_ALLOC_START=load`` (all three at start); and with ``--before REV`` the shim of
that git revision. Prints the median ms per program over the rounds and its ratio to the
floor of the same run (docs/client.md, "Threads, fork and signals").

Usage: .venv/bin/python bench/shim_start.py [--programs N] [--rounds R] [--before REV]
"""
from __future__ import annotations

import argparse
import os
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
from bench.client_create_latency import LIB, build_before  # noqa: E402


def per_program_ms(n: int, preload: Path | None, extra: dict[str, str]) -> float:
    """Wall ms per ``/bin/true`` of one bash loop of ``n``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.pop("LD_PRELOAD", None)
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
        env.update(extra)
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", f"for i in $(seq {n}); do /bin/true; done"], env=env,
                   check=True)
    return (time.perf_counter() - t0) * 1000.0 / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=200, help="programs per loop (200)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (7)")
    ap.add_argument("--before", help="git revision whose shim is measured beside")
    args = ap.parse_args(argv)
    rows: list[tuple[str, Path | None, dict[str, str]]] = [
        ("no shim (floor)", None, {}),
        ("shim: start at the first create (default)", LIB, {}),
        ("shim: LUSTRE_ALLOC_START=load", LIB, {"LUSTRE_ALLOC_START": "load"}),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        if args.before:
            rows.append((f"shim of {args.before}", build_before(args.before, Path(tmp)), {}))
        times: dict[str, list[float]] = {name: [] for name, _, _ in rows}
        for r in range(args.rounds):
            order = rows[r % len(rows):] + rows[:r % len(rows)]
            for name, lib, extra in order:
                times[name].append(per_program_ms(args.programs, lib, extra))
    floor = float(np.median(times[rows[0][0]]))
    table = Table(title=f"Program start: bash running /bin/true {args.programs} times, "
                        f"{args.rounds} rounds")
    for col in ("row", "median ms per program", "min-max", "ratio to no shim"):
        table.add_column(col)
    for name, _, _ in rows:
        t = np.array(times[name])
        med = float(np.median(t))
        table.add_row(name, f"{med:.2f}", f"{t.min():.2f}-{t.max():.2f}", f"{med / floor:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
