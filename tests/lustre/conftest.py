"""The real-Lustre tier: tests that run inside the lustre-vm guest (scripts/lustre-vm.sh
test), on a single-node Lustre (an MGS/MDT, a second MDT with ``--mdts 2``, four OSTs on
ZFS or, with ``--osd ldiskfs``, ldiskfs; a client at ``$LUSTRE_MOUNT``): Lustre 2.17.0 or
2.15.8 (``--ref``). Outside the guest nothing here is collected. A test that does not apply
to a configuration skips with the reason (:data:`OSD`, :data:`N_MDTS`, :func:`lustre_version`).

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
OSD = os.environ.get("LUSTRE_VM_OSD", "zfs")
"""The OSTs' OSD (scripts/lustre-vm/guest-run.sh): ``zfs`` or ``ldiskfs``; the MDTs are ZFS."""
N_MDTS = int(os.environ.get("LUSTRE_VM_MDTS", "1"))
"""MDTs in the file system (MDT0000 and, with ``--mdts 2``, MDT0001 on the same MDS)."""


def ost_device(ost: int) -> str:
    """What ``mount -t lustre`` mounts as OST ``ost`` (guest-run.sh): a ZFS dataset, or for
    ldiskfs an image file or block device."""
    devs = os.environ.get("LUSTRE_VM_OST_DEVS", "").split()
    return devs[ost] if ost < len(devs) else f"lustre-ost{ost}/ost{ost}"
NOBODY = 65534


def sh(*cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a command; its output as text."""
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check,
                          timeout=kw.pop("timeout", 300), **kw)


def lctl_get(name: str) -> str:
    return sh("lctl", "get_param", "-n", name).stdout.strip()


def lctl_set(name: str, value: str) -> None:
    sh("lctl", "set_param", f"{name}={value}")


def osp(ost: int, mdt: int | str = 0) -> str:
    """The OSP device of ``ost`` on MDT ``mdt`` (``"*"``: every MDT's, for lctl)."""
    m = mdt if isinstance(mdt, str) else f"{mdt:04x}"
    return f"osp.{FSNAME}-OST{ost:04x}-osc-MDT{m}"


def lustre_version() -> tuple[int, ...]:
    """The running Lustre's version, ``(2, 17, 0)``: ``lctl get_param version``."""
    text = lctl_get("version").splitlines()[0].split()[-1]
    return tuple(int(x) for x in text.split(".")[:3] if x.isdigit())


def wait_for(cond: Callable[[], object], timeout_s: float = 120.0, what: str = "") -> object:
    """:func:`tests.support.wait_for` on Lustre's clocks (statfs caches and precreation
    settle on their own: osp maxage 5 s), polling every 0.2 s."""
    return support_wait_for(cond, timeout_s, what or str(cond), poll_s=0.2)


def all_osts_ready() -> bool:
    vals = sh("lctl", "get_param", "-n", "osp.*.prealloc_status").stdout.split()
    return len(vals) >= N_OSTS * N_MDTS and all(v == "0" for v in vals)


@pytest.fixture(scope="session", autouse=True)
def configuration_record():
    """What this run is, for ``report.py --matrix``: ``$OUT/config.json`` (version, OSD,
    MDTs, and the command that runs this configuration)."""
    version = ".".join(map(str, lustre_version()))
    cmd = "bash scripts/lustre-vm.sh test"
    if not version.startswith("2.17."):
        cmd += f" --ref v{version.replace('.', '_')}"
    cmd += (f" --osd {OSD}" if OSD != "zfs" else "") + (f" --mdts {N_MDTS}" if N_MDTS > 1 else "")
    (OUT / "config.json").write_text(json.dumps(
        {"version": version, "osd": OSD, "mdts": N_MDTS, "command": cmd}))


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
        lctl_set(f"{osp(i, '*')}.max_create_count", "20000")
        lctl_set(f"{osp(i, '*')}.active", "1")
    wait_for(all_osts_ready, what="every OSP precreating again")
    wait_for(allocator_sees_every_ost, what="LOD using every OST again")
