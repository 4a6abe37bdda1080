"""Moves that keep what they move: a PFL file, a DoM file, a file in a pool and a mirrored
file on an evacuated OST, through the migration service and the stand-in lfs
(lustre_alloc/livestack/lfs.py, whose rules follow lfs.c and were checked on Lustre 2.17.0 by
tests/lustre/test_migrate_lfs.py). After the move each layout equals the one before, OSTs
aside; the mirrored and self-extending files are skipped and counted."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.livestack.emulator import LOV_XATTR
from lustre_alloc.livestack.lfs import POOLS_ENV
from lustre_alloc.rebalance import keep
from lustre_alloc.rebalance.service import MigrationService
from tests.rebalance.test_migrate_service import SLOW, View, _cfg, _until_idle

MIB = 1 << 20
INIT = ll.LCME_FL_INIT


def _comp(start, end, osts=(), size=MIB, pool="", count=None, pattern=ll.LOV_PATTERN_RAID0):
    return ll.Component(start, end, ll.stored(list(osts), size, pool, pattern, count),
                        INIT if osts or pattern == ll.LOV_PATTERN_MDT else 0)


LAYOUTS = {
    # two components reached by the data, a third not
    "pfl": ll.composite([_comp(0, MIB, [SLOW]), _comp(MIB, 64 * MIB, [1, SLOW], 4 * MIB),
                         _comp(64 * MIB, ll.LUSTRE_EOF, [], 4 * MIB, count=4)]),
    "dom": ll.composite([_comp(0, MIB, [], MIB, pattern=ll.LOV_PATTERN_MDT),
                         _comp(MIB, ll.LUSTRE_EOF, [SLOW, 2], 2 * MIB)]),
    "pooled": ll.stored([SLOW], 2 * MIB, pool="flash"),
    "mirrored": ll.composite([_comp(0, ll.LUSTRE_EOF, [SLOW]), _comp(0, ll.LUSTRE_EOF, [2])],
                             mirror_count=2),
    "sel": ll.composite([_comp(0, 64 * MIB, [SLOW]),
                         ll.Component(64 * MIB, ll.LUSTRE_EOF, ll.stored([], MIB, stripe_count=1),
                                      ll.LCME_FL_EXTENSION)]),
}
POOL = {"flash": [SLOW, 6, 7]}


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setenv(POOLS_ENV, json.dumps(POOL))
    root = tmp_path / "mnt"
    root.mkdir()
    out = {}
    for name, blob in LAYOUTS.items():
        p = root / name
        p.write_bytes(os.urandom(4 * MIB))
        os.setxattr(p, LOV_XATTR, blob)
        os.utime(p, (time.time() - 7200,) * 2)
        out[name] = str(p)
    return out


def _layout(path: str) -> ll.Layout:
    return ll.parse(os.getxattr(path, LOV_XATTR))


def _evacuate_one(tmp_path: Path, name: bytes) -> tuple[bytes, MigrationService]:
    """One 1 MiB file named ``name`` on the slow OST, quiet for two hours, evacuated by the
    service with the stand-in lfs; its path (bytes) and the service."""
    root = tmp_path / "mnt"
    root.mkdir()
    path = os.fsencode(str(root)) + b"/" + name
    with open(path, "wb") as f:
        f.write(os.urandom(MIB))
    os.setxattr(path, LOV_XATTR, ll.stored([SLOW], MIB))
    os.utime(path, (time.time() - 7200,) * 2)
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = MigrationService(_cfg(tmp_path, layout_xattr=LOV_XATTR), view,
                           registry=CollectorRegistry())
    _until_idle(svc)
    return path, svc


def test_an_evacuation_keeps_pfl_dom_and_pool_and_skips_mirrors_and_sel(tmp_path, files):
    before = {k: _layout(p) for k, p in files.items()}
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = MigrationService(_cfg(tmp_path, layout_xattr=LOV_XATTR), view,
                           registry=CollectorRegistry())
    _until_idle(svc)
    after = {k: _layout(p) for k, p in files.items()}
    for name in ("pfl", "dom", "pooled"):
        assert keep.shape(after[name]) == keep.shape(before[name]), name
        assert SLOW not in keep.objects(after[name]), name
        assert len(keep.objects(after[name])) == len(keep.objects(before[name]))
    assert set(keep.objects(after["pooled"])) <= set(POOL["flash"])       # stayed in its pool
    # the OSTs the PFL file's components shared stay shared: a mapping, not a new draw
    pfl_old, pfl_new = before["pfl"].components, after["pfl"].components
    assert (pfl_new[0].osts[0] == pfl_new[1].osts[1]) == (pfl_old[0].osts[0] == pfl_old[1].osts[1])
    for name in ("mirrored", "sel"):
        assert after[name] == before[name]
    assert svc.skipped["mirrored (FLR)"] == 1 and svc.skipped["self-extending (SEL)"] == 1


def test_the_options_restate_every_component():
    lay = ll.parse(LAYOUTS["pfl"])
    new_of = keep.remap(keep.objects(lay), [3, 1])
    assert keep.migrate_options(lay, new_of) == [
        "-E", str(MIB), "-c", "1", "-S", str(MIB), "-o", "3",
        "-E", str(64 * MIB), "-c", "2", "-S", str(4 * MIB), "-o", "1,3",
        "-E", "-1", "-c", "4", "-S", str(4 * MIB)]
    dom = ll.parse(LAYOUTS["dom"])
    assert keep.migrate_options(dom, {SLOW: 4})[:4] == ["-E", str(MIB), "-L", "mdt"]
    assert keep.migrate_options(ll.parse(LAYOUTS["pooled"]), {SLOW: 6}) == [
        "-c", "1", "-S", str(2 * MIB), "-p", "flash", "-o", "6"]
    with pytest.raises(ValueError, match="mirrored"):
        keep.migrate_options(ll.parse(LAYOUTS["mirrored"]), {})
    with pytest.raises(ValueError):
        keep.remap([1, 2], [3, 3])


def _standin(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lustre_alloc.livestack.lfs", *args], capture_output=True,
                          text=True, env=env)


def test_the_stand_in_lfs_flattens_drops_and_refuses_as_lfs_does(files):
    """The rules the old service fell into, as lfs.c has them (and Lustre 2.17.0 did)."""
    r = _standin("migrate", "-c", "1", "-o", "3", files["pfl"])       # options, no -E
    assert r.returncode == 0 and not _layout(files["pfl"]).components   # flattened
    r = _standin("migrate", "-c", "1", "-o", "6", files["pooled"])    # no -p: pool dropped
    assert r.returncode == 0 and _layout(files["pooled"]).pool == ""
    os.setxattr(files["pooled"], LOV_XATTR, LAYOUTS["pooled"])
    r = _standin("migrate", "-c", "1", "-p", "flash", "-o", "2", files["pooled"])  # outside
    assert r.returncode == 22 and _layout(files["pooled"]).pool == "flash"
    r = _standin("migrate", "-c", "2", "-o", "3", files["dom"])       # count != list
    assert r.returncode == 22
    r = _standin("migrate", "-E", "1048576", "-L", "mdt", "-c", "1", "-E", "-1", "-c", "1",
                 files["dom"])
    assert r.returncode == 22                                         # DoM takes no count
    r = _standin("migrate", files["dom"])                             # no option: kept
    assert r.returncode == 0 and _layout(files["dom"]) == ll.parse(LAYOUTS["dom"])


def test_lists_are_nul_safe_and_a_name_with_a_newline_moves(tmp_path):
    path, svc = _evacuate_one(tmp_path, b"two\nlines")
    assert SLOW not in keep.objects(ll.parse(os.getxattr(path, LOV_XATTR)))
    assert svc.status()["done"] == 1 and not (tmp_path / "mnt" / "two").exists()


def test_stand_in_find_prints_nul_separated_names(tmp_path):
    root = tmp_path / "mnt"
    root.mkdir()
    for name in ("a", "b\nc"):
        (root / name).write_bytes(b"x")
        os.setxattr(root / name, LOV_XATTR, ll.stored([SLOW], MIB))
    out = subprocess.run([sys.executable, "-m", "lustre_alloc.livestack.lfs", "find", str(root), "--ost",
                          str(SLOW), "--type", "f", "-print0"], capture_output=True).stdout
    assert sorted(out.split(b"\0")[:-1]) == sorted(os.fsencode(str(root / n)) for n in ("a", "b\nc"))




def test_a_2_14_client_lists_and_moves_without_printf_or_w(tmp_path, monkeypatch):
    """Lustre 2.12-2.14's lfs has no ``find -printf`` (2.15.0) and no ``migrate -W`` (2.16.0):
    the service lists with -print0 and, without lfs_bandwidth_option, passes no -W."""
    monkeypatch.setenv("LIVESTACK_LFS_RELEASE", "2.14.0")
    assert _standin("find", str(tmp_path), "--ost", str(SLOW), "--type", "f", "-printf",
                    "%s %p\\n").returncode == 22
    path, svc = _evacuate_one(tmp_path, b"f")
    assert SLOW not in keep.objects(ll.parse(os.getxattr(path, LOV_XATTR)))
    assert svc.status()["done"] == 1


def test_a_file_deleted_after_listing_drops_out_and_the_rest_move(tmp_path, files):
    """One file gone between the listing and the layouts fails nothing else."""
    from lustre_alloc.rebalance.lfs import Lfs
    from lustre_alloc.rebalance.selection import LfsFiles
    gone = files["pfl"]
    lfs = Lfs(f"{sys.executable} -m lustre_alloc.livestack.lfs", layout_xattr=LOV_XATTR)
    src = LfsFiles(lfs, str(tmp_path / "mnt"), tmp_path, time.time)
    listed = [p for p, _ in src.files_on_ost(SLOW)]
    assert gone in listed
    os.unlink(gone)
    got = src.layouts(listed)
    assert gone not in got and set(got) == set(listed) - {gone}


def test_a_failed_listing_backs_off_instead_of_walking_every_loop(tmp_path):
    """A failing lfs find is tried again after 60 s, then 120 s, ... not at every loop."""
    clock = {"t": 1_000_000.0}
    view = View()
    view.steered[SLOW] = clock["t"] - 7200
    cfg = _cfg(tmp_path, lfs=str(tmp_path / "no" / "lfs"), layout_xattr=LOV_XATTR,
               replan_s=600.0)
    svc = MigrationService(cfg, view, registry=CollectorRegistry(), clock=lambda: clock["t"])
    walks = []
    real = svc.files.files_on_ost

    def counting(ost):
        walks.append(clock["t"])
        return real(ost)
    svc.files.files_on_ost = counting
    for _ in range(30):                       # 5 minutes of 10 s loops
        svc.step()
        clock["t"] += 10
    assert walks and [round(b - a) for a, b in zip(walks, walks[1:])] == [60, 120]
    assert "not found" in svc.last_error


def test_a_name_that_is_not_utf8_is_listed_and_moved(tmp_path):
    """``lfs find -print0`` gives bytes; the service keeps them (os.fsdecode) and moves it."""
    path, svc = _evacuate_one(tmp_path, b"caf\xe9-\xff")
    assert SLOW not in keep.objects(ll.parse(os.getxattr(path, LOV_XATTR)))
    assert svc.status()["done"] == 1 and svc.last_error == ""
