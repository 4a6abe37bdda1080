"""The steering agent and ``lustre-alloc-selftest`` on a real Lustre 2.17.0 server: the
drain (``max_create_count``, ``create_count``) on the MDT's OSP devices, ``degraded`` on an
OST, a kill at every step with the journal written first, a remount that resets
``degraded`` and the agent's re-apply; the selftest's every row on a stock file system."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lustre_alloc.collectors.lustre_params import LctlParams, degraded_param
from lustre_alloc.collectors.steer_agent import SteerAgent
from tests.collectors.test_steer_agent import Killed, KillAtSet

from .conftest import (FSNAME, MOUNT, N_OSTS, PROJECT, SHIM, all_osts_ready,
                       allocator_sees_every_ost, lctl_get, lctl_set, ost_device, rule, sh,
                       wait_for)

OST = f"{FSNAME}-OST0001"
OSP = f"{FSNAME}-OST0001-osc-MDT0000"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def params():
    yield LctlParams(["lctl"])
    lctl_set(f"osp.{OSP}.max_create_count", "20000")
    lctl_set(f"obdfilter.{OST}.degraded", "0")
    wait_for(all_osts_ready, what="OSPs precreating")


def selftest(*args: str) -> tuple[int, dict[str, dict]]:
    p = subprocess.run([sys.executable, "-m", "lustre_alloc.selftest.cli", "--json", *args],
                       capture_output=True, text=True, timeout=600, cwd=PROJECT)
    rows = json.loads(p.stdout) if p.stdout.strip().startswith("[") else []
    return p.returncode, {r["check"]: r for r in rows}


def test_the_selftest_passes_every_row_on_a_stock_file_system(tmp_path):
    """Default stripe count 1, 4 MiB stripes: every client and server row passes, and
    --steer acts on both roles of this node (OSS: degraded; MDS: a drain)."""
    wait_for(allocator_sees_every_ost, what="LOD using every OST")
    code, rows = selftest("--dir", MOUNT, "--shim", str(SHIM), "--steer", OST,
                          "--steer-journal", str(tmp_path / "j.json"))
    failed = {c: r["detail"] for c, r in rows.items() if r["result"] == "FAIL"}
    rule("the selftest's rows on a stock 2.17.0", "lustre_alloc/selftest",
         "tests/client/test_selftest.py on the stand-in",
         f"{sum(r['result'] == 'PASS' for r in rows.values())} of {len(rows)} pass; "
         f"failed: {failed or 'none'}", not failed)
    assert not failed and code == 0, rows
    assert any(c.startswith("steer degraded") for c in rows)
    assert any(c.startswith("steer drain") for c in rows)


def test_a_drain_sets_and_restores_max_create_count_and_create_count(params, tmp_path):
    """lproc_osp.c max_create_count_store(): 0 makes create_count 0; back to 20000 makes
    it 32 (OST_MIN_PRECREATE), not what it was; the agent restores it after."""
    mcc, cc = f"osp.{OSP}.max_create_count", f"osp.{OSP}.create_count"
    before = {n: params.get(n) for n in (mcc, cc)}
    agent = SteerAgent("mds", lambda: [OSP], params, journal=tmp_path / "j.json")
    assert agent.handle({"op": "steer", "ost": OST, "kind": "drain", "lease_s": 60})["ok"]
    during = {n: params.get(n) for n in (mcc, cc)}
    lctl_set(mcc, before[mcc])
    by_lustre = params.get(cc)
    lctl_set(mcc, "0")                                   # as the agent left it
    agent.release_all("test")
    after = {n: params.get(n) for n in (mcc, cc)}
    rule("max_create_count=0 makes create_count 0; setting it back makes create_count 32",
         "osp/lproc_osp.c max_create_count_store()",
         "steer_agent.py: create_count restored after max_create_count",
         f"before {before}, drained {during}, max_create_count back alone -> "
         f"create_count {by_lustre}, agent restored {after}", by_lustre == "32")
    assert during == {mcc: "0", cc: "0"}
    assert after == before


def test_degraded_is_set_and_restored_on_the_ost(params, tmp_path):
    agent = SteerAgent("oss", lambda: [f"{FSNAME}-OST{i:04x}" for i in range(N_OSTS)],
                       params, journal=tmp_path / "j.json")
    assert agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60})["ok"]
    assert params.get(degraded_param(OST)) == "1"
    agent.release_all("test")
    assert params.get(degraded_param(OST)) == "0"


@pytest.mark.parametrize("killed_at_set", [1, 2])
def test_a_kill_before_or_after_the_set_settles_on_restart(params, tmp_path, killed_at_set):
    """Journal first, then act: killed before the parameter is set (nothing to undo) or
    just after (restored by the next agent once the lease ran out)."""
    mcc = f"osp.{OSP}.max_create_count"
    journal, clock = tmp_path / "j.json", Clock()
    dying = KillAtSet(params, journal, killed_at_set)
    first = SteerAgent("mds", lambda: [OSP], dying, clock=clock, wall=clock,
                       journal=journal)
    try:
        first.handle({"op": "steer", "ost": OST, "kind": "drain", "lease_s": 30})
        dying.set(mcc, "0")             # "after the set": the kill comes next
    except Killed:
        pass
    assert dying.journal_at_set[0] == [mcc]
    clock.t += 60
    second = SteerAgent("mds", lambda: [OSP], params, clock=clock, wall=clock,
                        journal=journal)
    assert params.get(mcc) == "20000" and not second.leases
    assert second.handle({"op": "steer", "ost": OST, "kind": "drain", "lease_s": 30})["ok"]
    second.release_all("test")


def test_a_remount_resets_degraded_and_the_agent_applies_it_again(params, tmp_path):
    """ofd_init0(): a mounted OST starts with degraded 0 (a failover); the agent re-applies
    its held flag."""
    agent = SteerAgent("oss", lambda: [OST], params, journal=tmp_path / "j.json")
    assert agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 600})["ok"]
    sh("umount", "/lustre/ost1")
    sh("mount", "-t", "lustre", ost_device(1), "/lustre/ost1")
    wait_for(lambda: lctl_get(f"obdfilter.{OST}.degraded") in ("0", "1"), what="OST back")
    found = params.get(degraded_param(OST))
    agent.expire()
    rule("a remounted OST comes back with degraded 0", "ofd/ofd_dev.c ofd_init0()",
         "steer_agent.py expire(): a held flag found reset is applied again",
         f"after the remount: degraded {found}", found == "0")
    assert found == "0" and params.get(degraded_param(OST)) == "1"
    assert agent.counts["reapplied"] == 1
    agent.release_all("test")
    wait_for(all_osts_ready, what="OSPs precreating after the remount")


