"""The real-Lustre tier: tests that run inside the lustre-vm guest (scripts/lustre-vm.sh
test), on a Lustre 2.17.0 file system with ZFS OSDs (an MGS/MDT and four OSTs on one node,
a client at ``$LUSTRE_MOUNT``). Outside the guest nothing here is collected.

Each test pins a behaviour of Lustre the project's code or stand-ins rely on and says
which (file, function); :func:`rule` writes what Lustre did to ``$OUT/rules.jsonl``, from
which ``tests/lustre/report.py`` makes docs/reference/lustre-on-lustre.md.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from tests.support import wait_for as support_wait_for

MOUNT = os.environ.get("LUSTRE_MOUNT")
if not MOUNT:
    collect_ignore_glob = ["test_*.py"]

PROJECT = Path(__file__).resolve().parents[2]
SHIM = Path(os.environ.get("LUSTRE_ALLOC_TIER_SHIM",
                           PROJECT / "liblustre_alloc" / "liblustre_alloc.so"))
"""The shim under test; LUSTRE_ALLOC_TIER_SHIM names another build (an older commit's, to
show which tests fail on it)."""
FSNAME = os.environ.get("LUSTRE_FSNAME", "lustre")
OUT = Path(os.environ.get("OUT", "/tmp"))
N_OSTS = 4
NOBODY = 65534


def sh(*cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a command; its output as text."""
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check,
                          timeout=kw.pop("timeout", 300), **kw)


def lctl_get(name: str) -> str:
    return sh("lctl", "get_param", "-n", name).stdout.strip()


def lctl_set(name: str, value: str) -> None:
    sh("lctl", "set_param", f"{name}={value}")


def osp(ost: int) -> str:
    return f"osp.{FSNAME}-OST{ost:04x}-osc-MDT0000"


def wait_for(cond: Callable[[], object], timeout_s: float = 120.0, what: str = "") -> object:
    """:func:`tests.support.wait_for` on Lustre's clocks (statfs caches and precreation
    settle on their own: osp maxage 5 s), polling every 0.2 s."""
    return support_wait_for(cond, timeout_s, what or str(cond), poll_s=0.2)


def all_osts_ready() -> bool:
    vals = sh("lctl", "get_param", "-n", "osp.*.prealloc_status").stdout.split()
    return len(vals) >= N_OSTS and all(v == "0" for v in vals)


def rule(name: str, source: str, standin: str, seen: str, agrees: bool) -> None:
    """Record one rule a stand-in or the code encodes and what Lustre did."""
    with open(OUT / "rules.jsonl", "a") as f:
        f.write(json.dumps({"rule": name, "source": source, "standin": standin,
                            "seen": seen, "agrees": agrees,
                            "version": lctl_get("version").splitlines()[0]}) + "\n")


@pytest.fixture
def work(request) -> Path:
    """A directory of this test's own on the Lustre mount."""
    d = Path(MOUNT) / request.node.name.replace("[", "-").replace("]", "")
    sh("rm", "-rf", str(d))
    d.mkdir()
    yield d
    sh("rm", "-rf", str(d), check=False)


def allocator_sees_every_ost() -> bool:
    """A probe striped over every OST (``lfs setstripe -c -1``) gets all of them: LOD's
    own view (its statfs cache, osp maxage 5 s) has caught up; until then it shortens lists
    and counts, and just after every OST was drained it may still refuse the probe with
    ENOSPC (seen on 2.17.0: exit 28 under a loaded host), which is "not yet" too."""
    probe = Path(MOUNT) / ".probe-every-ost"
    probe.unlink(missing_ok=True)
    if sh("lfs", "setstripe", "-c", "-1", str(probe), check=False).returncode != 0:
        probe.unlink(missing_ok=True)
        return False
    n = len(sh("lfs", "getstripe", "-y", str(probe)).stdout.split("l_ost_idx:")) - 1
    probe.unlink()
    return n == N_OSTS


@pytest.fixture
def restore_osts():
    """Every OSP set back to creating and active after the test, and used again by LOD."""
    yield
    for i in range(N_OSTS):
        lctl_set(f"{osp(i)}.max_create_count", "20000")
        lctl_set(f"{osp(i)}.active", "1")
    wait_for(all_osts_ready, what="every OSP precreating again")
    wait_for(allocator_sees_every_ost, what="LOD using every OST again")
