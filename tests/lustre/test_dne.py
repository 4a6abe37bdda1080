"""Several MDTs (DNE) on a real Lustre (``lustre-vm.sh test --mdts 2``: MDT0000 and MDT0001
on one MDS). Each MDT's LOD allocates objects through its own OSP devices
(``osp.<fsname>-OSTxxxx-osc-MDTyyyy``), so the shim's creates must get their lists whichever
MDT holds the directory, the MDS collector must read every MDT, and a drain must reach every
MDT's OSP. Skipped with one MDT (the drain test runs on every configuration)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.lustre_params import LctlParams
from lustre_alloc.collectors.sources import make_source
from lustre_alloc.collectors.steer_agent import SteerAgent

from .conftest import (FSNAME, N_MDTS, all_osts_ready, lctl_get, lctl_set, rule, sh,
                       wait_for)
from .test_shim import create, first_osts, layout, mapper, records_for, shim_env  # noqa: F401

several = pytest.mark.skipif(N_MDTS < 2, reason="one MDT: the file system has no MDT0001")


def mdt_of(path: Path) -> int:
    """The MDT index holding ``path``'s inode (``lfs getstripe -m``)."""
    return int(sh("lfs", "getstripe", "-m", str(path)).stdout.strip())


@several
def test_the_shim_places_files_in_a_directory_on_mdt1(work, mapper, tmp_path):
    """``lfs mkdir -i 1``: the files' inodes are on MDT0001, whose LOD takes the list."""
    d = work / "on-mdt1"
    sh("lfs", "mkdir", "-i", "1", str(d))
    mapper.answer_with([2])
    got, mdts = [], set()
    for i in range(4):
        f = d / f"f{i}"
        assert create(f, shim_env(mapper, tmp_path / "rec")) == {"written": 65536}
        got.append(first_osts(layout(f)))
        mdts.add(mdt_of(f))
    recs = [r for i in range(4) for r in records_for(tmp_path / "rec", d / f"f{i}")]
    rule("a list is applied by the LOD of the MDT that holds the directory (MDT0001)",
         "lod_qos.c lod_alloc_ost_list() on MDT0001's LOD",
         "the shim is MDT-blind: the list goes in the create's layout", f"MDTs {mdts}, "
         f"layouts {got}", mdts == {1} and all(g == [2] for g in got))
    assert mdts == {1} and all(g == [2] for g in got), (mdts, got)
    assert [r["result"] for r in recs] == ["layout"] * 4


@several
def test_the_shim_places_files_in_a_directory_striped_over_both_mdts(work, mapper, tmp_path):
    """``lfs mkdir -c 2``: names hash to both MDTs; every file gets the mapper's list."""
    d = work / "striped"
    sh("lfs", "mkdir", "-c", "2", str(d))
    sh("lfs", "setstripe", "-c", "2", str(d))
    mapper.answer_with([3, 0])
    files = [d / f"f{i:02d}" for i in range(16)]
    for f in files:
        assert create(f, shim_env(mapper, tmp_path / "rec")) == {"written": 65536}
    mdts = {mdt_of(f) for f in files}
    got = [first_osts(layout(f)) for f in files]
    results = {r["result"] + ":" + r.get("reason", "") for f in files
               for r in records_for(tmp_path / "rec", f)}
    rule("files of a directory striped over 2 MDTs get the list on both MDTs",
         "lmv_obd.c lmv_create() by name hash; lod_alloc_ost_list() on each MDT",
         "the shim is MDT-blind", f"MDTs {sorted(mdts)}, layouts {sorted(set(map(tuple, got)))}"
         f", records {sorted(results)}", mdts == {0, 1} and all(g == [3, 0] for g in got))
    assert mdts == {0, 1} and all(g == [3, 0] for g in got), (mdts, got, results)


@several
def test_the_mds_collector_reads_every_mdt():
    source = make_source("lctl", "mds", "/", ["lctl"], ["lnetctl"])
    collector = Collector("mds", source)
    collector.collect()
    time.sleep(1.0)                       # rates are per interval: two readings apart
    targets = collector.collect()["targets"]
    names = sorted(targets)
    bad = {t: v["unavailable"] for t, v in targets.items() if v.get("unavailable")}
    rule("the MDS collector reads MDT0000 and MDT0001", "mdt.*.md_stats, osp.*",
         "collectors/readers: one target per mdt.* device", f"{names}, unreadable: "
         f"{bad or 'none'}", names == [f"{FSNAME}-MDT0000", f"{FSNAME}-MDT0001"] and not bad)
    assert names == [f"{FSNAME}-MDT0000", f"{FSNAME}-MDT0001"] and not bad, targets


def test_a_drain_reaches_every_mdts_osp_and_lustre_places_nothing_there(work, tmp_path):
    """The agent as the collector starts it on an MDS (targets: every OSP device there,
    ``collectors/cli.py start_agent()``) drains OST0001 on every MDT; Lustre's allocator
    then places no object on it from any MDT; release restores every OSP."""
    ost = f"{FSNAME}-OST0001"
    source = make_source("lctl", "mds", "/", ["lctl"], ["lnetctl"])
    source.refresh()                      # what the collector's loop does before the agent
    params = LctlParams(["lctl"])
    agent = SteerAgent("mds", lambda: list(source.read_family("osp", "max_create_count")),
                       params, journal=tmp_path / "journal.json")
    devices = [f"osp.{ost}-osc-MDT{m:04x}.max_create_count" for m in range(N_MDTS)]
    before = [params.get(d) for d in devices]
    try:
        assert agent.handle({"op": "steer", "ost": ost, "kind": "drain", "lease_s": 120})["ok"]
        drained = [params.get(d) for d in devices]
        placed = []
        for m in range(N_MDTS):
            d = work / f"mdt{m}"
            if N_MDTS > 1:
                sh("lfs", "mkdir", "-i", str(m), str(d))
            else:
                d.mkdir()

            def lod_skips_ost1(d=d) -> bool:
                # LOD reads the drain through its statfs cache (osp maxage 5 s)
                probe = d / ".probe"
                probe.unlink(missing_ok=True)
                sh("lfs", "setstripe", "-c", "-1", str(probe))
                osts = first_osts(layout(probe))
                probe.unlink()
                return 1 not in osts
            wait_for(lod_skips_ost1, what=f"MDT{m}'s LOD skipping the drained OST")
            for i in range(8):
                f = d / f"f{i}"
                sh("lfs", "setstripe", "-c", "2", str(f))
                placed += first_osts(layout(f))
    finally:
        agent.release_all("test")
    after = [params.get(d) for d in devices]
    rule(f"a drain set through every OSP of the MDS ({N_MDTS} MDTs) keeps Lustre off the OST",
         "osp/lproc_osp.c max_create_count_store(); lod_qos.c lod_check_and_reserve_ost()",
         "steer_agent.py _params_of(): every <ost>-osc-MDT* device",
         f"drained {drained}, objects on OST1: {placed.count(1)} of {len(placed)}, "
         f"restored {after}", drained == ["0"] * N_MDTS and 1 not in placed)
    assert drained == ["0"] * N_MDTS and 1 not in placed, (drained, placed)
    assert after == before
    wait_for(all_osts_ready, what="every OSP precreating again")
