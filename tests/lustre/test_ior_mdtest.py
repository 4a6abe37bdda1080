"""MPI programs under the shim on a real Lustre 2.17.0: mdtest's and IOR's creates get the
mapper's layouts, and IOR's own Lustre striping (``--posix.lustre.*``: an open with
O_LOV_DELAY_CREATE, then LL_IOC_LOV_SETSTRIPE, aiori-POSIX.c POSIX_Create(); the sequence of
ROMIO's Lustre driver, ad_lustre_open.c, which Debian's Open MPI and MPICH do not build) is
the file's. Built into the guest from hpc/ior 4.0.0 with Open MPI (scripts/lustre-vm/build.sh);
skipped where it is not."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lustre_alloc.common.record_file import read_records

from .conftest import rule
from .test_shim import first_osts, layout, mapper, shim_env  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(not (shutil.which("mdtest") and shutil.which("ior")
                                     and shutil.which("mpirun")),
                                reason="IOR/mdtest not built into this guest (--ior-src)")
RANKS = 2


def mpirun(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``RANKS`` ranks on this node with the shim preloaded into the ranks only (mpirun
    and its daemon without it); shared memory transport without ptrace's single copy."""
    forward = []
    for k in sorted(env):
        if k == "LD_PRELOAD" or k.startswith("LUSTRE_ALLOC_"):
            forward += ["-x", f"{k}={env[k]}"]
    base = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    base.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(RANKS),
           "--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none",
           *forward, *args]
    return subprocess.run(cmd, env=base, capture_output=True, text=True, timeout=600)


def created_files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file())


def test_mdtest_creates_get_the_mappers_layouts(work, mapper, tmp_path):
    """mdtest -F -C: every file it creates (open O_CREAT, its POSIX backend) is placed by
    the mapper; mdtest sees no error."""
    mapper.answer_with([3])
    rec = tmp_path / "rec"
    p = mpirun(["mdtest", "-F", "-C", "-n", "20", "-u", "-d", str(work / "md")],
               shim_env(mapper, rec))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    files = created_files(work / "md")
    assert len(files) == 20 * RANKS
    assert {tuple(first_osts(layout(f))) for f in files} == {(3,)}
    records = [r for r in read_records(rec) if r["result"] == "layout"]
    assert len(records) == len(files)


def test_ior_file_per_process_gets_the_mappers_layouts(work, mapper, tmp_path):
    """ior -a POSIX -F: each rank's file is placed by the mapper and holds what IOR wrote
    (its own read-back check, -R, passes)."""
    mapper.answer_with([2])
    os.makedirs(work / "d")
    sh_args = ["ior", "-a", "POSIX", "-F", "-w", "-r", "-R", "-k", "-b", "2m", "-t", "256k",
               "-o", str(work / "d" / "ior")]
    p = mpirun(sh_args, shim_env(mapper, tmp_path / "rec"))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    files = created_files(work / "d")
    assert len(files) == RANKS
    for f in files:
        assert f.stat().st_size == 2 << 20
        assert first_osts(layout(f)) == [2]


def test_ior_lustre_striping_options_are_the_files_layout_under_the_shim(work, mapper,
                                                                          tmp_path):
    """ior --posix.lustre.stripecount=4 --posix.lustre.stripesize=1m: the program sets
    its own layout after an O_LOV_DELAY_CREATE open; the shim leaves it, the mapper is not
    asked, and the file is striped over every OST with 1 MiB stripes."""
    mapper.answer_with([1])
    os.makedirs(work / "d")
    args = ["ior", "-a", "POSIX", "-F", "-w", "-k", "-b", "4m", "-t", "1m",
            "--posix.lustre.stripecount=4", "--posix.lustre.stripesize=1048576",
            "-o", str(work / "d" / "ior")]
    p = mpirun(args, shim_env(mapper, tmp_path / "rec"))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    got = []
    for f in created_files(work / "d"):
        lay = layout(f)
        got.append((len(first_osts(lay)), lay.stripe_size if lay else None))
    ok = got == [(4, 1 << 20)] * RANKS and not mapper.asked
    rule("a program's own layout (O_LOV_DELAY_CREATE open, then LL_IOC_LOV_SETSTRIPE: IOR's "
         "--posix.lustre.*, ROMIO's ad_lustre) is the file's under the shim",
         "ior aiori-POSIX.c POSIX_Create(); llite/file.c ll_lov_setstripe()",
         "la_create.c: a delay-create open is passed through",
         f"ior x{RANKS} ranks: (stripes, stripe size) {got}; mapper asked "
         f"{len(mapper.asked)} times", ok)
    assert ok, (got, mapper.asked)

