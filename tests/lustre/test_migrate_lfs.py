"""The migration service's moves on real Lustre 2.17.0 files: a move changes OSTs and nothing
else. Each test reads a file's layout as the service does (``lustre.lov``), builds the
service's ``lfs migrate`` options (:func:`lustre_alloc.rebalance.keep.migrate_options`), runs them and
compares the layout after with the one before, OSTs aside (:func:`lustre_alloc.rebalance.keep.shape`).
Layouts no options can keep (FLR, SEL) are refused by :func:`lustre_alloc.rebalance.keep.unmovable`;
what lfs would do to them, and the rules the stand-in lfs (lustre_alloc/livestack/lfs.py) encodes, are
recorded for docs/reference/lustre-on-lustre.md."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from lustre_alloc.rebalance import keep
from lustre_alloc.rebalance.lfs import Lfs

from .conftest import FSNAME, lustre_version, rule, sh

MIB = 1 << 20
HAS_BANDWIDTH = lustre_version() >= (2, 16)
"""``lfs migrate -W`` came in 2.16.0 (``--bandwidth``; lfs.c ``lfs_migrate()``'s options):
2.15's lfs refuses it, and the service's ``lfs_bandwidth_option`` stays false there."""
LFS = Lfs(bandwidth_option=HAS_BANDWIDTH)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write(path: Path, mib: int) -> None:
    sh("dd", "if=/dev/urandom", f"of={path}", "bs=1M", f"count={mib}", "status=none")


def migrate(path: Path, options: list[str]) -> subprocess.CompletedProcess:
    argv = LFS.migrate_argv(str(path), options, 64 * MIB)
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


def move_keeping(path: Path, new_of) -> tuple:
    """Move ``path`` as the service would, each OST ``o`` to ``new_of(o)``; (layout before,
    layout after)."""
    before = LFS.layout(str(path))
    assert before is not None and keep.unmovable(before) is None, before
    old = keep.objects(before)
    new = [new_of(o) for o in old]
    want = digest(path)
    p = migrate(path, keep.migrate_options(before, keep.remap(old, new)))
    assert p.returncode == 0, p.stderr
    after = LFS.layout(str(path))
    assert digest(path) == want
    assert keep.objects(after) == new
    return before, after


def other(o: int) -> int:
    return (o + 2) % 4


@pytest.fixture
def pool():
    name = "flash"
    sh("lctl", "pool_new", f"{FSNAME}.{name}", check=False)
    sh("lctl", "pool_add", f"{FSNAME}.{name}", f"{FSNAME}-OST[0-1]", check=False)
    yield name


def test_a_plain_file_keeps_its_count_and_size(work):
    f = work / "plain"
    sh("lfs", "setstripe", "-c", "2", "-S", "2M", "-o", "0,1", str(f))
    write(f, 8)
    before, after = move_keeping(f, other)
    assert keep.shape(after) == keep.shape(before) and after.osts == [2, 3]


def test_a_pooled_file_keeps_its_pool_and_a_list_outside_it_is_refused(work, pool):
    f = work / "pooled"
    sh("lfs", "setstripe", "-c", "1", "-p", pool, str(f))
    write(f, 4)
    members = LFS.pool_osts(FSNAME, pool, work)
    assert members == {0, 1}
    before, after = move_keeping(f, lambda o: 1 - o)         # inside the pool
    assert keep.shape(after) == keep.shape(before) and after.pool == pool
    kept = LFS.layout(str(f))
    p = migrate(f, ["-c", "1", "-p", pool, "-o", "3"])       # outside it
    same = LFS.layout(str(f))
    rule("a listed OST outside the pool: refused EINVAL, the file as it was",
         "lfs migrate -p POOL -o LIST (lod_qos.c checks a list against the pool)",
         "lustre_alloc/livestack/lfs.py migrate: EINVAL when -o leaves LIVESTACK_LFS_POOLS",
         f"lfs migrate -p {pool} -o 3: rc {p.returncode}, pool after {same.pool!r}, "
         f"OSTs {same.osts}", p.returncode == 22 and same == kept)
    g = work / "pooled-no-p"
    sh("lfs", "setstripe", "-c", "1", "-p", pool, str(g))
    write(g, 1)
    p = migrate(g, ["-c", "1", "-o", "0"])
    plain = LFS.layout(str(g))
    rule("lfs migrate with layout options and no -p drops the pool",
         "lustre/utils/lfs.c comp_args_to_layout(): llapi_layout_pool_name_set(layout, \"\")",
         "lustre_alloc/livestack/lfs.py migrate: the pool only when -p names it",
         f"lfs migrate -c 1 -o 0: rc {p.returncode}, pool after {plain.pool!r}",
         p.returncode == 0 and plain.pool == "")


def test_a_pfl_file_keeps_every_component(work):
    f = work / "pfl"
    sh("lfs", "setstripe", "-E", "1M", "-c", "1", "-S", "1M", "-E", "64M", "-c", "2",
       "-E", "-1", "-c", "4", str(f))
    write(f, 4)                                   # the third component is not reached
    before, after = move_keeping(f, other)
    assert [c.initialized for c in before.components] == [True, True, False]
    rule("lfs migrate -E .. -o per component keeps a PFL layout, an unreached component "
         "uninstantiated", "lustre/utils/lfs.c comp_args_to_layout() (-o per component, 2.12+)",
         "lustre_alloc/livestack/lfs.py migrate: one component per -E, objects where the data reaches",
         f"shape before {keep.shape(before)}, after {keep.shape(after)}",
         keep.shape(after) == keep.shape(before))
    assert keep.shape(after) == keep.shape(before)


def test_a_dom_file_keeps_its_mdt_component(work):
    f = work / "dom"
    sh("lfs", "setstripe", "-E", "1M", "-L", "mdt", "-E", "-1", "-c", "2", str(f))
    write(f, 4)
    before, after = move_keeping(f, other)
    rule("lfs migrate -E END -L mdt keeps a Data-on-MDT component (same DoM size: layout swap)",
         "lustre/utils/lfs.c comp_args_to_layout(), lfs_migrate()",
         "lustre_alloc/livestack/lfs.py migrate: -L mdt, refusing -c/-o/-i/-p",
         f"shape before {keep.shape(before)}, after {keep.shape(after)}",
         keep.shape(after) == keep.shape(before))
    assert keep.shape(after) == keep.shape(before)


def test_mirrored_and_self_extending_files_are_not_moved(work):
    flr, sel = work / "flr", work / "sel"
    sh("lfs", "mirror", "create", "-N2", "-c", "1", str(flr))
    write(flr, 2)
    sh("lfs", "setstripe", "-E", "256M", "-c", "1", "-z", "64M", "-E", "-1", "-c", "2", str(sel))
    write(sel, 2)
    assert keep.unmovable(LFS.layout(str(flr))) == "mirrored (FLR)"
    assert keep.unmovable(LFS.layout(str(sel))) == "self-extending (SEL)"
    p = migrate(flr, ["-c", "1", "-o", "3"])
    merged = LFS.layout(str(flr))
    rule("lfs migrate with layout options on a mirrored file leaves one mirror",
         "lustre/utils/lfs.c lfs_migrate(): the layout options alone make the new layout",
         "lustre_alloc/rebalance/keep.py unmovable(): FLR files are not moved",
         f"rc {p.returncode} ({p.stderr.strip()[-80:]}); mirrors after {merged.mirror_count}",
         p.returncode != 0 or merged.mirror_count == 1)


@pytest.mark.skipif(not HAS_BANDWIDTH, reason="lfs migrate has no -W before Lustre 2.16")
def test_a_bandwidth_cap_in_kib_holds(work):
    """The service passes ``-W <n>k`` (KiB/s: a failing OST's share can be below 1 MiB/s);
    ``llapi_parse_size()`` takes the suffix whatever ``-W``'s default unit (MiB)."""
    import time
    f = work / "capped"
    sh("lfs", "setstripe", "-c", "1", "-o", "0", str(f))
    write(f, 8)
    before = LFS.layout(str(f))
    options = keep.migrate_options(before, {0: 2})
    t0 = time.monotonic()
    p = subprocess.run(LFS.migrate_argv(str(f), options, 2 * MIB), capture_output=True,
                       text=True, timeout=600)
    took = time.monotonic() - t0
    rule("lfs migrate -W 2048k moves 8 MiB in about 4 s (k: KiB/s)",
         "lustre/utils/lfs.c lfs_setstripe_internal() -W: llapi_parse_size(bandwidth_unit "
         "ONE_MB)", "lustre_alloc/livestack/lfs.py parse_bandwidth(): k = KiB",
         f"rc {p.returncode}, {took:.2f} s", p.returncode == 0 and took >= 3.0)
    assert p.returncode == 0 and took >= 3.0, (p.stderr, took)
