"""The migration service's ``lfs migrate`` command on real Lustre 2.17.0 files: a move must
change OSTs and nothing else. Today's command (``-c K [-S size] -o LIST``) builds a new plain
layout (lfs.c: the old layout is copied only when no layout option is given): the pool and
the PFL components are lost. Those two are expected failures (strict: they flip when the
service keeps layouts) of the open issue "Moves that keep what they move"."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from mapper.migrate.lfs import Lfs

from .conftest import FSNAME, MOUNT, rule, sh
from .test_shim import first_osts, layout

MIB = 1 << 20


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def move(path: Path, osts: list[int], stripe_size: int) -> None:
    argv = Lfs(bandwidth_option=True).migrate_argv(str(path), osts, stripe_size, 64 * MIB)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (argv, p.stderr)


@pytest.fixture
def pool():
    name = "flash"
    sh("lctl", "pool_new", f"{FSNAME}.{name}", check=False)
    sh("lctl", "pool_add", f"{FSNAME}.{name}", f"{FSNAME}-OST[0-1]", check=False)
    yield name


def test_a_plain_file_moves_with_its_count_and_size(work):
    f = work / "plain"
    sh("lfs", "setstripe", "-c", "2", "-S", "2M", "-o", "0,1", str(f))
    sh("dd", "if=/dev/urandom", f"of={f}", "bs=1M", "count=8", "status=none")
    before, want = layout(f), digest(f)
    move(f, [2, 3], before.stripe_size)
    after = layout(f)
    assert digest(f) == want
    assert (after.osts, after.stripe_count, after.stripe_size) == ([2, 3], 2, 2 * MIB)


@pytest.mark.xfail(strict=True, reason="moves drop the pool (lfs migrate -c/-S/-o builds a "
                                       "new plain layout): issue 'Moves that keep what they move'")
def test_a_pooled_file_keeps_its_pool(work, pool):
    f = work / "pooled"
    sh("lfs", "setstripe", "-c", "1", "-p", pool, str(f))
    sh("dd", "if=/dev/urandom", f"of={f}", "bs=1M", "count=4", "status=none")
    move(f, [1] if first_osts(layout(f)) != [1] else [0], layout(f).stripe_size)
    after = layout(f)
    rule("lfs migrate -c -S -o drops the file's pool", "lustre/utils/lfs.c lfs_migrate()",
         "livestack/lfs.py migrate (no pools)", f"pool after: {after.pool!r}",
         after.pool == "")
    assert after.pool == pool


@pytest.mark.xfail(strict=True, reason="moves flatten PFL layouts (lfs migrate -c/-S/-o): "
                                       "issue 'Moves that keep what they move'")
def test_a_pfl_file_keeps_its_components(work):
    f = work / "pfl"
    sh("lfs", "setstripe", "-E", "1M", "-c", "1", "-E", "-1", "-c", "2", str(f))
    sh("dd", "if=/dev/urandom", f"of={f}", "bs=1M", "count=4", "status=none")
    want = digest(f)
    move(f, [3], MIB)
    after = layout(f)
    rule("lfs migrate -c 1 -o N on a PFL file gives a plain layout",
         "lustre/utils/lfs.c lfs_migrate(): the old layout is copied only without options",
         "livestack/lfs.py migrate keeps only OSTs and size",
         f"{len(after.components)} components after", not after.components)
    assert digest(f) == want
    assert len(after.components) == 2
