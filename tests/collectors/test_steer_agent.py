"""The steering seam on both sides: the exact ``lctl`` command lines, the files the
emulated servers expose, and the agent's rules (own targets only, someone else's flag left
alone, leases, restore, a broken ``lctl``)."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import msgpack
import pytest
import zmq

from lustre_alloc.collectors.lustre_params import (FileParams, LctlParams, ParamError, degraded_param,
                                      max_create_count_param)
from lustre_alloc.collectors.steer_agent import SteerAgent
from lustre_alloc.collectors.steer_socket import AgentServer
from tests.support import wait_for

OST = "demofs-OST000e"
OSP = "demofs-OST000e-osc-MDT0000"


def fake_lctl(tmp_path: Path, values: dict[str, str], fail: bool = False) -> tuple[Path, Path]:
    """An ``lctl`` that logs its argv (one JSON list a line) and keeps values in a JSON file."""
    store, log = tmp_path / "values.json", tmp_path / "argv.log"
    store.write_text(json.dumps(values))
    script = tmp_path / "lctl"
    script.write_text(f"""#!/usr/bin/env python3
import json, sys
open({str(log)!r}, "a").write(json.dumps(sys.argv[1:]) + "\\n")
if {fail!r}:
    sys.stderr.write("error: set_param: setting /sys/fs/lustre/x: Permission denied\\n")
    sys.exit(13)
values = json.load(open({str(store)!r}))
if sys.argv[1] == "get_param":
    print(values[sys.argv[3]])
elif sys.argv[1] == "set_param":
    name, value = sys.argv[2].split("=", 1)
    values[name] = value
    json.dump(values, open({str(store)!r}, "w"))
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def argv_log(log: Path) -> list[list[str]]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def test_lctl_command_lines_are_lustres(tmp_path):
    script, log = fake_lctl(tmp_path, {degraded_param(OST): "0",
                                       max_create_count_param(OSP): "20000"})
    p = LctlParams([str(script)])
    assert p.get("obdfilter.demofs-OST000e.degraded") == "0"
    p.set("obdfilter.demofs-OST000e.degraded", "1")
    p.set("osp.demofs-OST000e-osc-MDT0000.max_create_count", "0")
    assert argv_log(log) == [
        ["get_param", "-n", "obdfilter.demofs-OST000e.degraded"],
        ["set_param", "obdfilter.demofs-OST000e.degraded=1"],
        ["set_param", "osp.demofs-OST000e-osc-MDT0000.max_create_count=0"]]


@pytest.mark.parametrize("name, value", [("obdfilter.*.degraded", "1"),
                                         ("obdfilter.x.degraded", "1; rm -rf /"),
                                         ("../etc/passwd", "1")])
def test_wildcards_paths_and_odd_values_are_refused(tmp_path, name, value):
    with pytest.raises(ParamError, match="parameter"):
        FileParams(tmp_path).set(name, value)


def test_a_failing_or_missing_lctl_is_one_line(tmp_path):
    script, _ = fake_lctl(tmp_path, {}, fail=True)
    with pytest.raises(ParamError, match="exit 13: error: set_param"):
        LctlParams([str(script)]).set(degraded_param(OST), "1")
    with pytest.raises(ParamError, match="No such file"):
        LctlParams([str(tmp_path / "nope")]).get(degraded_param(OST))


def oss_root(tmp_path: Path) -> Path:
    d = tmp_path / "oss" / "sys/fs/lustre/obdfilter" / OST
    d.mkdir(parents=True)
    (d / "degraded").write_text("0\n")
    return tmp_path / "oss"


def test_file_params_write_what_the_collector_reads(tmp_path):
    from lustre_alloc.collectors.collector import Collector
    from lustre_alloc.collectors.sources import FileSource
    root = oss_root(tmp_path)
    for name, v in (("kbytestotal", 1 << 30), ("kbytesfree", 1 << 29), ("kbytesavail", 1 << 29),
                    ("filestotal", 1000), ("filesfree", 900)):
        (root / "sys/fs/lustre/obdfilter" / OST / name).write_text(f"{v}\n")
    FileParams(root).set(degraded_param(OST), "1")
    body = Collector("oss", FileSource(root)).collect()
    ost = body["targets"][OST]
    assert ost["values"]["degraded"] == 1, ost


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_oss_agent_applies_renews_and_expires_its_own_osts(tmp_path):
    root, clock = oss_root(tmp_path), Clock()
    files = FileParams(root)
    agent = SteerAgent("oss", lambda: [OST], files, clock=clock)
    r = agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60, "reason": "slow"})
    assert r["ok"] and files.get(degraded_param(OST)) == "1"
    clock.t += 50
    assert agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60})["renewed"]
    clock.t += 50
    assert agent.expire() == [] and files.get(degraded_param(OST)) == "1"    # renewed
    clock.t += 11
    assert agent.expire() == [degraded_param(OST)]
    assert files.get(degraded_param(OST)) == "0" and not agent.leases


def test_agent_refusals_change_nothing(tmp_path):
    root = oss_root(tmp_path)
    files = FileParams(root)
    agent = SteerAgent("oss", lambda: [OST], files)
    bad = [{"op": "steer", "ost": "demofs-OST0001", "kind": "degraded", "lease_s": 60},  # not ours
           {"op": "steer", "ost": OST, "kind": "drain", "lease_s": 60},     # not an OSS's kind
           {"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 1e9},  # over the cap
           {"op": "steer", "ost": OST, "kind": "degraded"},                  # no lease
           {"op": "format"}, ["steer"]]
    for req in bad:
        r = agent.handle(req)
        assert r["ok"] is False and r["error"], req
    assert files.get(degraded_param(OST)) == "0" and not agent.leases
    files.set(degraded_param(OST), "1")          # a RAID script flagged it
    r = agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60})
    assert not r["ok"] and "someone else" in r["error"]
    assert agent.release(OST, "degraded")["restored"] == []
    assert files.get(degraded_param(OST)) == "1"            # never undone by us


def test_mds_agent_drains_every_osp_of_the_ost_and_restores_the_value_it_found(tmp_path):
    devices = [OSP, "demofs-OST000e-osc-MDT0001", "demofs-OST0001-osc-MDT0000"]
    script, log = fake_lctl(tmp_path, {max_create_count_param(d): "5000" for d in devices})
    agent = SteerAgent("mds", lambda: devices, LctlParams([str(script)]))
    r = agent.handle({"op": "steer", "ost": OST, "kind": "drain", "lease_s": 30})
    assert r["ok"] and len(r["params"]) == 2
    assert agent.release_all("stop") and not agent.leases
    sets = [a for a in argv_log(log) if a[0] == "set_param"]
    assert sets == [["set_param", f"osp.{OST}-osc-MDT0000.max_create_count=0"],
                    ["set_param", f"osp.{OST}-osc-MDT0001.max_create_count=0"],
                    ["set_param", f"osp.{OST}-osc-MDT0000.max_create_count=5000"],
                    ["set_param", f"osp.{OST}-osc-MDT0001.max_create_count=5000"]]


def test_a_broken_lctl_is_reported_and_nothing_is_held(tmp_path):
    script, _ = fake_lctl(tmp_path, {}, fail=True)
    agent = SteerAgent("oss", lambda: [OST], LctlParams([str(script)]))
    r = agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60})
    assert not r["ok"] and "exit 13" in r["error"] and not agent.leases
    assert agent.counts["failed"] == 1


def test_agent_socket_serves_bad_requests_and_restores_at_stop(tmp_path):
    root = oss_root(tmp_path)
    files = FileParams(root)
    server = AgentServer(SteerAgent("oss", lambda: [OST], files), "tcp://127.0.0.1:*").start()
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.REQ)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(server.endpoint)
    try:
        s.send(b"\xc1garbage")
        assert s.poll(5000) and "msgpack" in msgpack.unpackb(s.recv())["error"]
        s.send(msgpack.packb({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60}))
        assert s.poll(5000) and msgpack.unpackb(s.recv())["ok"]
        assert files.get(degraded_param(OST)) == "1"
        s.send(msgpack.packb({"op": "status"}))
        assert s.poll(5000) and msgpack.unpackb(s.recv())["leases"][0]["ost"] == OST
    finally:
        s.close(0)
        server.stop()
    assert files.get(degraded_param(OST)) == "0"


def test_agent_socket_expires_leases_on_its_own(tmp_path):
    root = oss_root(tmp_path)
    files = FileParams(root)
    server = AgentServer(SteerAgent("oss", lambda: [OST], files), "tcp://127.0.0.1:*").start()
    try:
        server.agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 0.5})
        wait_for(lambda: files.get(degraded_param(OST)) == "0", 5, "the lease expiring")
    finally:
        server.stop()


class OspFiles(FileParams):
    """An MDS's OSP files with lproc_osp.c's side effect: max_create_count=0 sets
    create_count to 0, a non-zero value after it sets create_count to 32
    (``max_create_count_store()``, OST_MIN_PRECREATE)."""

    def set(self, name, value):
        super().set(name, value)
        if name.endswith(".max_create_count"):
            cc = name[: -len("max_create_count")] + "create_count"
            if value == "0" or super().get(cc) == "0":
                super().set(cc, "0" if value == "0" else "32")


def _osp_root(tmp_path, devices):
    root = tmp_path / "mds"
    for d in devices:
        base = root / "sys/fs/lustre/osp" / d
        base.mkdir(parents=True)
        (base / "max_create_count").write_text("20000\n")
        (base / "create_count").write_text("4096\n")
    return root


class Clocks:
    def __init__(self):
        self.mono, self.wall = 100.0, 1_800_000_000.0

    def advance(self, s):
        self.mono += s
        self.wall += s


@pytest.mark.parametrize("down_s, resumed", [(30.0, True), (700.0, False)])
def test_a_killed_agent_restarted_restores_or_resumes_its_drain_on_two_mdts(
        tmp_path, down_s, resumed):
    """kill -9 during a drain (the agent object abandoned without a release): the next
    agent reads the journal; restored at once if the lease ran out meanwhile, else held
    and restored when it does, create_count too."""
    devices = [OSP, "demofs-OST000e-osc-MDT0001"]
    files = OspFiles(_osp_root(tmp_path, devices))
    clock, journal = Clocks(), tmp_path / "journal.json"
    first = SteerAgent("mds", lambda: devices, files, clock=lambda: clock.mono,
                       wall=lambda: clock.wall, journal=journal)
    assert first.handle({"op": "steer", "ost": OST, "kind": "drain", "lease_s": 600})["ok"]
    assert {files.get(f"osp.{d}.max_create_count") for d in devices} == {"0"}
    del first                                                   # SIGKILL: nothing restored
    clock.advance(down_s)
    clock.mono = 5.0                                            # a new process, a new clock
    second = SteerAgent("mds", lambda: devices, files, clock=lambda: clock.mono,
                        wall=lambda: clock.wall, journal=journal)
    if resumed:
        assert {files.get(f"osp.{d}.max_create_count") for d in devices} == {"0"}
        assert second.counts["resumed"] == 2
        clock.advance(600 - down_s - 1)
        assert second.expire() == []
        clock.advance(2)
        assert len(second.expire()) == 2
    for d in devices:
        assert files.get(f"osp.{d}.max_create_count") == "20000"
        assert files.get(f"osp.{d}.create_count") == "4096"    # not lproc's 32
    assert not second.leases and json.loads(journal.read_text())["leases"] == []


def test_a_flag_reset_by_a_remount_is_applied_again_while_the_lease_runs(tmp_path):
    files = FileParams(tmp_path)
    base = tmp_path / "sys/fs/lustre/obdfilter" / OST
    base.mkdir(parents=True)
    (base / "degraded").write_text("0\n")
    clock = Clocks()
    agent = SteerAgent("oss", lambda: [OST], files, clock=lambda: clock.mono,
                       wall=lambda: clock.wall, journal=tmp_path / "j.json")
    assert agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60})["ok"]
    (base / "degraded").write_text("0\n")                     # the OST was mounted again
    clock.advance(10)
    assert agent.expire() == [] and files.get(degraded_param(OST)) == "1"
    assert agent.counts["reapplied"] == 1
    clock.advance(60)
    assert agent.expire() == [degraded_param(OST)] and files.get(degraded_param(OST)) == "0"


def test_a_journal_entry_someone_changed_since_is_forgotten_and_a_bad_journal_kept_aside(
        tmp_path):
    files = FileParams(tmp_path)
    base = tmp_path / "sys/fs/lustre/obdfilter" / OST
    base.mkdir(parents=True)
    (base / "degraded").write_text("0\n")
    journal, clock = tmp_path / "j.json", Clocks()
    agent = SteerAgent("oss", lambda: [OST], files, clock=lambda: clock.mono,
                       wall=lambda: clock.wall, journal=journal)
    agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 60})
    (base / "degraded").write_text("0\n")                     # an admin cleared it
    again = SteerAgent("oss", lambda: [OST], files, clock=lambda: clock.mono,
                       wall=lambda: clock.wall, journal=journal)
    assert not again.leases and files.get(degraded_param(OST)) == "0"
    journal.write_text("{not json")
    SteerAgent("oss", lambda: [OST], files, journal=journal)
    assert journal.with_suffix(".bad").read_text() == "{not json"


class Killed(BaseException):
    """SIGKILL at a chosen instant: nothing after it runs (not an Exception the agent
    handles)."""


class KillAtSet:
    """Parameter access that dies at its ``at``-th set, recording what the journal held
    at each set."""

    def __init__(self, inner, journal: Path, at: int):
        self.inner, self.journal, self.at, self.sets = inner, journal, at, 0
        self.journal_at_set: list[list[str]] = []

    def get(self, name):
        return self.inner.get(name)

    def set(self, name, value):
        self.sets += 1
        held = json.loads(self.journal.read_text())["leases"] if self.journal.exists() else []
        self.journal_at_set.append([x["param"] for x in held])
        if self.sets == self.at:
            raise Killed
        self.inner.set(name, value)


@pytest.mark.parametrize("killed_at_set", [1, 2, None])
def test_the_journal_is_written_before_any_parameter_and_a_kill_at_any_step_settles(
        tmp_path, killed_at_set):
    """Journal first, then act (issue: the agent set before it journaled). Killed before
    the first set, between the two MDTs' sets, or after both: the restarted agent
    restores what was set, forgets what was not, and the OST can be steered again."""
    devices = [OSP, "demofs-OST000e-osc-MDT0001"]
    files = OspFiles(_osp_root(tmp_path, devices))
    clock, journal = Clocks(), tmp_path / "journal.json"
    dying = KillAtSet(files, journal, killed_at_set or 99)
    first = SteerAgent("mds", lambda: devices, dying, clock=lambda: clock.mono,
                       wall=lambda: clock.wall, journal=journal)
    try:
        first.handle({"op": "steer", "ost": OST, "kind": "drain", "lease_s": 60})
    except Killed:
        pass
    # every set found both parameters already journaled
    mcc = [f"osp.{d}.max_create_count" for d in devices]
    assert dying.journal_at_set and all(sorted(j) == sorted(mcc)
                                        for j in dying.journal_at_set)
    del first
    clock.advance(120)                                  # the lease ran out while down
    second = SteerAgent("mds", lambda: devices, files, clock=lambda: clock.mono,
                        wall=lambda: clock.wall, journal=journal)
    for d in devices:
        assert files.get(f"osp.{d}.max_create_count") == "20000"
    assert not second.leases
    again = second.handle({"op": "steer", "ost": OST, "kind": "drain", "lease_s": 60})
    assert again["ok"], again                            # not "set by someone else"


def test_a_selftest_killed_mid_steer_is_settled_by_the_collectors_start(tmp_path):
    from lustre_alloc.collectors.steer_agent import selftest_journal_of, settle_selftest_journal
    files = FileParams(tmp_path)
    base = tmp_path / "sys/fs/lustre/obdfilter" / OST
    base.mkdir(parents=True)
    (base / "degraded").write_text("0\n")
    journal = tmp_path / "steer-journal.json"
    selftest = SteerAgent("oss", lambda: [OST], files, journal=selftest_journal_of(journal))
    assert selftest.handle({"op": "steer", "ost": OST, "kind": "degraded",
                            "lease_s": 120})["ok"]
    del selftest                                          # killed before its restore
    assert files.get(degraded_param(OST)) == "1"
    assert settle_selftest_journal("oss", lambda: [OST], files, journal) == \
        [degraded_param(OST)]
    assert files.get(degraded_param(OST)) == "0"
    assert settle_selftest_journal("oss", lambda: [OST], files, journal) == []
