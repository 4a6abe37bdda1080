"""A small writer that replays a plan of file operations in real time; the live demo and
tests run it under the LD_PRELOAD shim (``liblustre_alloc.so``), so each new file's
``open(O_CREAT)`` goes through the shim and the mapper.

    python -m lustre_alloc.livestack.writer PLAN START_EPOCH

``PLAN`` is a JSON-lines file, one operation per line, time-ordered::

    [0.125, "write", "/demo/data/ior.11/it00000/f000003", 16384]
    [3.500, "delete", "/demo/data/ior.11/it00000/f000003", 0]

(seconds after ``START_EPOCH`` (Unix seconds), operation, absolute path, bytes to append).
A ``write`` creates the file the first time (``open(path, "wb")``: ``O_WRONLY|O_CREAT|O_TRUNC``,
as an application writing a new file does; an ``O_APPEND`` create is Lustre's to lay out and
the shim leaves it alone, docs/client.md) and opens it for appending after that (``"ab"``),
and appends that many zero bytes; ``delete`` unlinks it.
An operation whose time has passed runs at once (the writer catches up). Standard library
only: it starts fast and opens nothing under the demo directory but the plan's files.

At the end one JSON line on stdout: ``{"ops", "creates", "writes", "deletes",
"failed_creates", "failed_ops", "bytes", "max_late_s"}``. Exit status 1 if any operation
failed (an application create must never fail because of the shim or the mapper).
"""
from __future__ import annotations

import json
import os
import sys
import time

CHUNK = b"\0" * (1 << 20)


def _append(path: str, nbytes: int, stats: dict[str, float]) -> None:
    exists = os.path.exists(path)
    mode = "ab" if exists else "wb"
    try:
        fh = open(path, mode)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fh = open(path, mode)
    with fh:
        if not exists:
            stats["creates"] += 1
        left = nbytes
        while left > 0:
            n = min(left, len(CHUNK))
            fh.write(CHUNK[:n])
            left -= n
    stats["bytes"] += nbytes


def run(plan_path: str, start_epoch: float) -> dict[str, float]:
    """Replay the plan; returns the counters printed at the end."""
    stats = {"ops": 0, "creates": 0, "writes": 0, "deletes": 0, "failed_creates": 0,
             "failed_ops": 0, "bytes": 0, "max_late_s": 0.0}
    with open(plan_path, encoding="utf-8") as fh:
        plan = [json.loads(line) for line in fh if line.strip()]
    for at, op, path, nbytes in plan:
        wait = start_epoch + at - time.time()
        if wait > 0:
            time.sleep(wait)
        else:
            stats["max_late_s"] = max(stats["max_late_s"], -wait)
        stats["ops"] += 1
        try:
            if op == "write":
                stats["writes"] += 1
                _append(path, int(nbytes), stats)
            elif op == "delete":
                stats["deletes"] += 1
                os.unlink(path)
        except OSError as exc:
            stats["failed_ops"] += 1
            if op == "write" and not os.path.exists(path):
                stats["failed_creates"] += 1
            print(f"live_writer: {op} {path}: {exc}", file=sys.stderr)
    return stats


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m lustre_alloc.livestack.writer PLAN START_EPOCH", file=sys.stderr)
        return 2
    stats = run(args[0], float(args[1]))
    print(json.dumps(stats), flush=True)
    return 1 if stats["failed_ops"] else 0


if __name__ == "__main__":
    sys.exit(main())
