"""Speed against the code before a change, measured in the same run (``--before TREE``).

``TREE`` is a checkout of the earlier code (``git worktree add /tmp/before main`` or
``git archive main | tar -x -C /tmp/before``). :func:`wall_in_tree` runs a snippet with
``PYTHONPATH=TREE`` in a fresh interpreter, so the earlier ``simulator`` and ``mapper``
are imported, and returns the wall time the snippet printed as ``WALL <seconds>``. The
benches time the same work in this tree and print ``now / before``: the machine's load
affects both (run them back to back; repeat when the machine is shared).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def wall_in_tree(tree: Path, snippet: str) -> float:
    """Wall seconds the snippet reports (``print("WALL", seconds)``) with ``tree``'s code."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", snippet], env=env, cwd=str(tree),
                         capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("WALL "):
            return float(line.split()[1])
    raise RuntimeError(f"{tree}: the timing snippet failed: {out.stderr.strip()[-400:]}")


def ratio_line(what: str, now_s: float, before_s: float, limit: float = 1.5) -> str:
    """``what: now X s, before Y s, ratio R (limit L)``."""
    r = now_s / before_s if before_s > 0 else float("inf")
    return (f"{what}: now {now_s:.1f} s, before {before_s:.1f} s, ratio {r:.2f}x "
            f"({'within' if r <= limit else 'ABOVE'} the {limit:g}x limit)")
