"""The steering seam on both sides (issue #31): the exact ``lctl`` command lines, the files the
emulated servers expose, and the agent's rules (own targets only, someone else's flag left
alone, leases, restore, a broken ``lctl``)."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import msgpack
import pytest
import zmq

from collectors.lustre_params import (FileParams, LctlParams, ParamError, degraded_param,
                                      max_create_count_param)
from collectors.steer_agent import SteerAgent
from collectors.steer_socket import AgentServer

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
    from collectors.collector import Collector
    from collectors.sources import FileSource
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
    import time
    root = oss_root(tmp_path)
    files = FileParams(root)
    server = AgentServer(SteerAgent("oss", lambda: [OST], files), "tcp://127.0.0.1:*").start()
    try:
        server.agent.handle({"op": "steer", "ost": OST, "kind": "degraded", "lease_s": 0.5})
        deadline = time.monotonic() + 5
        while files.get(degraded_param(OST)) == "1" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert files.get(degraded_param(OST)) == "0"
    finally:
        server.stop()
