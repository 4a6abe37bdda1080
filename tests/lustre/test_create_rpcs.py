"""A create under the shim costs the MDS no more RPCs than the same create by liblustreapi.

``llapi_layout_file_create()`` naming the OST is what a program that sets its own layout
pays (an open with ``O_LOV_DELAY_CREATE``, the SETSTRIPE's intent open and its close, the
close: ``llite/file.c`` ``ll_lov_setstripe_ea_info()``); the shim does the same. The count
is the client's ``mdc.*.stats`` over N creates, by RPC type (bench/lustre_vm_create_rpcs.py
measures the same with rates; docs/lustre-vm.md, "What a create costs the MDS"). A count,
not a time.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lustre_alloc.selftest.responder import ListResponder

from .conftest import PROJECT, SHIM, rule, sh

sys.path.insert(0, str(PROJECT / "bench"))
from lustre_vm_create_rpcs import mdc_stats as mdc_rpcs  # noqa: E402  (one reader of mdc stats)

N = 60
ANCHOR = PROJECT / "bench" / "lustre_create_anchor.c"


PER_CREATE = ("ldlm_ibits_enqueue", "mds_close", "ldlm_cancel")
"""RPC types a create sends each time. The others a create under the shim sends come by the
clock, not per create: ``mds_statfs`` when llite's statfs cache expires (the shim's
``fstatfs`` of the directory; ``OBD_STATFS_CACHE_SECONDS``, 1 s), ``mds_getattr`` when its
directory cache does (``LUSTRE_ALLOC_CACHE_S``, 10 s): per create they shrink as the create
rate grows (0.05-0.1 each at the emulated guest's 5-15 creates/s)."""


def rpcs(cmd: list[str], env: dict[str, str]) -> tuple[dict[str, int], float]:
    """RPCs by type the command sent, and the seconds it took."""
    before = mdc_rpcs()
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - t0
    after = mdc_rpcs()
    return {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}, seconds


def marginal(run, n: int) -> tuple[dict[str, float], float]:
    """RPCs per create by type of one more file: a program of ``n`` files and one of
    ``3 n``, the difference over ``2 n``, so what a process pays once (the first read of
    its directory's default: an open, a getattr and a close) is not spread over its
    creates; and the seconds of the longer run."""
    small, _ = run(n, "a")
    big, seconds = run(3 * n, "b")
    return {k: (big.get(k, 0) - small.get(k, 0)) / (2 * n) for k in set(big) | set(small)}, \
        seconds


@pytest.fixture(scope="module")
def anchor(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("anchor") / "lustre_create_anchor"
    # the guest installs Lustre's headers and liblustreapi (scripts/lustre-vm/build.sh)
    sh("gcc", "-O2", "-o", str(exe), str(ANCHOR), "-llustreapi")
    return exe


@pytest.mark.parametrize("lease", ["0", "1"], ids=["per-create", "leased"])
def test_a_create_under_the_shim_costs_no_more_mds_rpcs_than_llapis(work, anchor, lease):
    """Written files: no more than llapi's. Empty files: one more, the layout lock the
    SETSTRIPE ioctl takes to hand back the layout Lustre made (``ll_lov_setstripe()``:
    ``ll_layout_refresh()``), which llapi's ``fsetxattr("lustre.lov")`` leaves to the first
    write; the shim records that layout (a shortened list as Lustre made it)."""
    plain = {k: v for k, v in os.environ.items()
             if not k.startswith("LUSTRE_ALLOC_") and k != "LD_PRELOAD"}
    seen = {}
    with ListResponder(osts=(1,)) as m:
        env = dict(plain, LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=m.endpoint,
                   LUSTRE_ALLOC_TIMEOUT_MS="10000", LUSTRE_ALLOC_LEASE=lease)
        for size in (65536, 0):
            d = work / f"{size}"

            def run(mode: str, environ: dict[str, str]):
                def one(n: int, tag: str):
                    out = d / f"{mode}-{tag}"
                    out.mkdir(parents=True)
                    return rpcs([str(anchor), "llapi" if mode == "llapi" else "plain",
                                 str(out), str(n), str(size), "4"], environ)
                return one

            llapi, _ = marginal(run("llapi", plain), N)
            shim, seconds = marginal(run("shim", env), N)
            placed = [f for f in os.listdir(d / "shim-a")
                      if sh("lfs", "getstripe", "-i", str(d / "shim-a" / f)).stdout.strip()
                      == "1"]
            assert len(placed) == N             # the shim did place every file
            seen[size] = (llapi, shim, seconds)
        assert len(m.asked) >= 1

    def per_create(rpcs: dict[str, float]) -> float:
        return sum(rpcs.get(k, 0.0) for k in PER_CREATE)

    def by_clock(rpcs: dict[str, float]) -> float:      # RPCs over the longer run
        return 2 * N * sum(v for k, v in rpcs.items() if k not in PER_CREATE)

    written, empty = seen[65536], seen[0]
    # 0.05 a create: rounding of the counts over N
    ok = (per_create(written[1]) <= per_create(written[0]) + 0.05
          and per_create(empty[1]) <= per_create(empty[0]) + 1.05
          and all(by_clock(shim) <= 2 * seconds + 4 for _, shim, seconds in seen.values()))
    rule("a create under the shim costs the MDS no more RPCs than llapi_layout_file_create()",
         "llite/file.c ll_lov_setstripe() (layout refresh), llite/xattr.c ll_setstripe_ea() "
         "(llapi's path, no refresh); liblustre_alloc/la_create.c (no existence check), "
         "la_paths.c (the parent opened as <dir>/.)",
         f"per create (enqueue, close, cancel): written, the shim's <= llapi's; empty, <= "
         f"llapi's + 1; by the clock (statfs, getattr) <= 2 a second (lease {lease})",
         "; ".join(f"{size} B, one more file: llapi {a}, shim {b} ({t:.1f} s)"
                   for size, (a, b, t) in seen.items()), ok)
    assert ok, seen
