"""The admin socket and ``lustre-alloc-ctl``: status, explain, shadow report and
reload against a running mapper, readable by a person and as JSON."""
from __future__ import annotations

import json

import msgpack
import pytest
import zmq

from lustre_alloc.mapper.service import ctl
from lustre_alloc.mapper.service.client import MapperClient, ShadowDecision
from lustre_alloc.mapper.service.server import ServiceError
from tests.service.test_reload import config_text, SECRET, wait_event

from .conftest import free_port, make_service, spawn_mapper, stop_process, wait_ready

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def served(tmp_path):
    sock = f"ipc://{tmp_path}/control"
    svc = make_service(static_cluster="4x2", policy="round_robin", control_endpoint=sock,
                       scope={"exclude_paths": ["/lustre/tmp"]})
    with MapperClient(svc.endpoint, timeout_s=5) as c:
        for i in range(6):
            c.alloc("ior.7", 2, expected_bytes=4 << 20, path=f"/lustre/run/f{i}")
    yield svc, sock
    svc.stop()


def run(capsys, *argv) -> tuple[int, str, str]:
    code = ctl.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_status_as_text_and_json(served, capsys):
    svc, sock = served
    code, text, _ = run(capsys, "--socket", sock, "status")
    assert code == 0 and "mode place, policy round_robin" in text and "OSTs 8 usable of 8" in text
    assert "scope in force: live; exclude_paths /lustre/tmp" in text
    code, out, _ = run(capsys, "--socket", sock, "--json", "status")
    reply = json.loads(out)
    fs = reply["filesystems"][0]
    assert (fs["fsname"], fs["usable"], fs["excluded"]) == ("static", 8, [])
    assert reply["requests"]["ok"] == 6 and reply["fallback_share"] == 0.0
    assert reply["leases"] == {"held": 0, "layouts": 0, "clients": 0}
    assert fs["failed_over"] == [] and "failed over: none" in text
    # an OST its failover partner serves (the store marks it from the samples,
    # tests/mapper/test_failover_seen.py) is listed with the OSS serving it
    ost = next(iter(svc.contexts.values())).store.snapshot.osts[3]
    ost.failed_over = True
    code, text, _ = run(capsys, "--socket", sock, "status")
    assert code == 0 and f"failed over: OST0003 (on {ost.oss})" in text


def test_status_counts_the_leases_held(served, capsys):
    svc, sock = served
    with MapperClient(svc.endpoint, timeout_s=5) as c:
        c.lease(5, "ior.7", 1, path="/lustre/run")
        lease = c.lease(3, "ior.7", 1, path="/lustre/run")
        code, text, _ = run(capsys, "--socket", sock, "status")
        assert code == 0 and "leases (protocol v2): 2 held, 8 layouts, by 1 clients" in text
        c.release([(lease.id, 1)])
        code, out, _ = run(capsys, "--socket", sock, "--json", "status")
        assert json.loads(out)["leases"] == {"held": 1, "layouts": 5, "clients": 1}


def test_explain_names_the_layout_a_leased_file_used(served, capsys):
    svc, sock = served
    with MapperClient(svc.endpoint, timeout_s=5) as c:
        lease = c.lease(4, "app.9", 1, path="/lustre/lease/")
        # nothing is remembered for a layout no file used yet
        code, _, err = run(capsys, "--socket", sock, "explain", "--jobid", "app.9")
        assert code == 1 and "no decision remembered" in err
        # the client used layouts 0 and 2 for two files (1 was refused by Lustre)
        assert c.release([(lease.id, 3)], files=[(lease.id, 0, "a"), (lease.id, 2, "b")]) \
            == ["ok"]
        # a file named for a lease the client does not hold changes nothing
        c.release([], files=[(lease.id + 1, 0, "c")])
    for name, index in (("a", 0), ("b", 2)):
        code, out, _ = run(capsys, "--socket", sock, "--json", "explain", "--path",
                           f"/lustre/lease/{name}")
        d = json.loads(out)["decision"]
        assert code == 0 and d["osts"] == list(lease.layouts[index]) and d["mode"] == "place"
        assert d["jobid"] == "app.9" and d["policy"] == "round_robin"
    code, text, _ = run(capsys, "--socket", sock, "explain", "--jobid", "app.9")
    assert code == 0 and text.startswith("/lustre/lease/b jobid app.9")
    for missing in ("/lustre/lease/c", "/lustre/lease"):
        code, _, err = run(capsys, "--socket", sock, "explain", "--path", missing)
        assert code == 1 and "no decision remembered" in err


def test_explain_a_path_and_a_jobid_with_prices(served, capsys):
    svc, sock = served
    code, out, _ = run(capsys, "--socket", sock, "--json", "explain", "--path", "/lustre/run/f4")
    d = json.loads(out)["decision"]
    assert code == 0 and d["jobid"] == "ior.7" and d["mode"] == "place" and len(d["osts"]) == 2
    assert d["priced"]["chosen_expected_s"] > 0 and len(d["priced"]["cheapest"]) == 3
    assert d["priced"]["bytes_per_stripe"] == 2 << 20
    code, text, _ = run(capsys, "--socket", sock, "explain", "--jobid", "ior.7")
    assert code == 0 and text.startswith("/lustre/run/f5 jobid ior.7") and "cheapest OSTs" in text
    code, _, err = run(capsys, "--socket", sock, "explain", "--path", "/nowhere")
    assert code == 1 and "no decision remembered" in err


def test_bad_requests_get_one_line_and_the_socket_serves_on(served, capsys):
    svc, sock = served
    s = zmq.Context.instance().socket(zmq.REQ)
    s.linger = 0
    s.connect(sock)
    for bad in (b"\xc1garbage", msgpack.packb([1, 2]), msgpack.packb({"op": "format_disk"}),
                msgpack.packb({"op": "shadow_report", "window_s": -5})):
        s.send(bad)
        assert s.poll(5000)
        reply = msgpack.unpackb(s.recv())
        assert reply["ok"] is False and "\n" not in reply["error"]
    s.close()
    assert run(capsys, "--socket", sock, "status")[0] == 0
    code, _, err = run(capsys, "--socket", f"ipc://{sock[6:]}-absent", "--timeout", "0.3",
                       "status")
    assert code == 1 and err.startswith("lustre-alloc-ctl: error: no admin socket at ")
    code, _, err = run(capsys, "--socket", f"tcp://127.0.0.1:{free_port()}", "--timeout",
                       "0.3", "status")
    assert code == 1 and err.startswith("lustre-alloc-ctl: error: no answer")


def test_shadow_report_through_ctl(tmp_path, capsys):
    sock = f"ipc://{tmp_path}/control"
    svc = make_service(static_cluster="4x2", policy="round_robin", control_endpoint=sock,
                       scope={"shadow": True})
    try:
        with MapperClient(svc.endpoint, timeout_s=5) as c:
            for i in range(4):
                with pytest.raises(ShadowDecision) as d:
                    c.alloc("ior.7", 1, path=f"/lustre/f{i}")
                c.report(d.value.token, [5], 1 << 20)
        code, out, _ = run(capsys, "--socket", sock, "--json", "shadow-report", "--window", "60")
        rep = json.loads(out)["report"]
        assert code == 0 and (rep["decisions"], rep["reported"]) == (4, 4)
        assert rep["lustre"]["busiest"] == [{"ost": 5, "stripes": 4}]
        code, text, _ = run(capsys, "--socket", sock, "shadow-report")
        assert "busiest under lustre: OST0005:4" in text
        code, text, _ = run(capsys, "--socket", sock, "status")
        assert "mode shadow" in text and "4 decisions, 4 reported" in text
    finally:
        svc.stop()


def test_reload_through_ctl_applied_and_rejected(tmp_path, capsys):
    from lustre_alloc.common.curve import CurveClient, generate_keys
    keys = tmp_path / "keys"
    for name in ("mapper", "shim"):
        generate_keys(keys, name)
    SECRET[:] = [str(keys / "mapper.key_secret")]
    clients = tmp_path / "clients"
    clients.mkdir()
    (clients / "shim.key").write_bytes((keys / "shim.key").read_bytes())
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    sock = f"ipc://{tmp_path}/control"
    toml = tmp_path / "mapper.toml"
    toml.write_text(config_text(endpoint, str(clients), control_endpoint=sock))
    log = tmp_path / "mapper.log"
    proc = spawn_mapper(["--config", str(toml)], log)
    try:
        wait_ready(endpoint, proc, timeout_s=30,
                   curve=CurveClient(str(keys / "shim.key_secret"), str(keys / "mapper.key")))
        toml.write_text(config_text(endpoint, str(clients), control_endpoint=sock,
                                    peer_max_apps=9))
        code, text, _ = run(capsys, "--socket", sock, "reload")
        assert code == 0 and text.strip() == "reload applied (changed: peer_max_apps)"
        # a key only a restart applies: said, and not a silent success
        toml.write_text(config_text(endpoint, str(clients), control_endpoint=sock,
                                    peer_max_apps=9, policy="lustre_qos"))
        code, text, _ = run(capsys, "--socket", sock, "reload")
        assert code == 1 and text.splitlines() == [
            "reload applied (changed: nothing)",
            "needs a restart (the running values are kept): policy"]
        toml.write_text("[mapper]\nbind = 5\n")
        code, text, _ = run(capsys, "--socket", sock, "reload")
        assert code == 1 and text.startswith("reload rejected: ") and "bind" in text
        wait_event(log, "reload_rejected")
        assert proc.poll() is None
    finally:
        stop_process(proc)


def test_control_endpoint_is_local_only_and_auto_follows_systemd(monkeypatch):
    from lustre_alloc.common.errors import ConfigError
    from lustre_alloc.mapper.service.config import load_config
    with pytest.raises(ConfigError, match="control_endpoint 'tcp://0.0.0.0:9'"):
        load_config(None, {"control_endpoint": "tcp://0.0.0.0:9"})
    assert load_config(None, {"control_endpoint": "tcp://127.0.0.1:9"}).control_address() \
        == "tcp://127.0.0.1:9"
    monkeypatch.delenv("RUNTIME_DIRECTORY", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")        # started by hand
    assert load_config(None, {}).control_address() == "ipc:///run/user/1000/lustre-alloc/control"
    monkeypatch.setenv("RUNTIME_DIRECTORY", "/run/lustre-alloc")
    assert load_config(None, {}).control_address() == "ipc:///run/lustre-alloc/control"
    assert load_config(None, {"control_endpoint": ""}).control_address() == ""


def test_status_shows_osts_believed_slow_and_forget_speed_brings_them_back(tmp_path, capsys):
    from lustre_alloc.mapper.speed.rate_memory import restore_rate_memory
    sock = f"ipc://{tmp_path}/control"
    svc = make_service(static_cluster="4x2", policy="mcmf", control_endpoint=sock)
    try:
        ctx = next(iter(svc.contexts.values()))
        primary = ctx.gate.primary
        # what a mapper learned (or restored from its state file): OST 3 at 1/49 of the others
        rates = {str(i): 5e8 / (49.475 if i == 3 else 1.0) for i in range(8)}
        with svc.lock:
            restore_rate_memory(primary.views.rate_tracker,
                                {"version": 1, "rate_bytes_s": rates, "last_look_bytes_s": rates})
            primary.views.invalidate()   # the view prepared at start predates these rates

        def placed() -> set[int]:
            with MapperClient(svc.endpoint, timeout_s=5) as c:
                return {i for k in range(8) for i in c.alloc("ior.7", 2, path=f"/r/f{k}").osts}

        assert 3 not in placed()
        code, text, _ = run(capsys, "--socket", sock, "status")
        assert code == 0 and "believed slow (speed estimate): OST0003 (0.02x the median)" in text
        code, out, _ = run(capsys, "--socket", sock, "forget-speed", "--ost", "static-OST0003")
        assert code == 0 and out.strip() == "static: forgot the speed of OST0003"
        code, out, _ = run(capsys, "--socket", sock, "--json", "status")
        assert json.loads(out)["filesystems"][0]["slow_estimates"] == []
        assert 3 in placed()                        # unmeasured again: Lustre's RR order
        code, out, _ = run(capsys, "--socket", sock, "forget-speed", "--ost", "3")
        assert out.strip() == "static: forgot the speed of nothing (none was measured)"
        # bad input: one line, and the socket serves on
        with pytest.raises(SystemExit) as usage:
            ctl.main(["--socket", sock, "forget-speed", "--ost", "OSTzz"])
        assert usage.value.code == 2
        assert "not an OST index or name: 'OSTzz'" in capsys.readouterr().err
        code, _, err = run(capsys, "--socket", sock, "forget-speed", "--ost", "1",
                           "--fsname", "home")
        assert code == 1 and "no file system 'home'" in err
        reply = ctl.ask(sock, {"op": "forget_speed", "osts": [-1]})
        assert reply == {"ok": False, "error": "forget_speed needs osts: a list of OST "
                                               "indices (integers >= 0)"}
        assert run(capsys, "--socket", sock, "status")[0] == 0
    finally:
        svc.stop()


def test_status_names_the_scope_in_force():
    from lustre_alloc.mapper.service.scope import Scope
    assert Scope.from_table({"shadow": True, "paths": ["/lustre/pilot"],
                             "jobids": ["climate.*"]}).describe() == \
        "shadow; paths /lustre/pilot; jobids climate.*"
    assert Scope.from_table({"place": False}).describe() == "nothing placed (place = false)"


def test_ctl_finds_a_hand_started_mapper_and_fails_at_once_without_one(capsys, own_runtime_dir):
    """A mapper started by hand (no systemd RuntimeDirectory) serves its admin socket where
    ``lustre-alloc-ctl`` looks by default; with no mapper, ctl says where it looked at once
    instead of waiting 15 s."""
    code, _, err = run(capsys, "status")
    # refused by the socket's absence, not by the 15 s answer timeout
    assert code == 1 and "no admin socket" in err and own_runtime_dir in err
    svc = make_service(static_cluster="4x2", policy="round_robin")
    try:
        code, text, _ = run(capsys, "status")
        assert code == 0 and "policy round_robin" in text
        # a second hand-started mapper never takes the socket over: it serves none
        second = make_service(static_cluster="4x2", policy="lustre_qos")
        try:
            assert second.control is None
            code, text, _ = run(capsys, "status")
            assert code == 0 and "policy round_robin" in text       # still the first one's
        finally:
            second.stop()
        # named explicitly, a socket in use is an error
        sock = f"ipc://{own_runtime_dir}/lustre-alloc/control"
        with pytest.raises(ServiceError, match="another mapper answers on the control socket"):
            make_service(static_cluster="4x2", policy="round_robin", control_endpoint=sock)
    finally:
        svc.stop()


def test_migration_view_gives_the_osts_and_keeps_the_migration_services_report(served, capsys):
    svc, sock = served
    report = {"mode": "dry_run", "fsname": "static", "evacuating": [3], "running": 0,
              "queued": 2, "queued_bytes": 1 << 31, "done": 0, "failed": 0, "given_up": 0,
              "paused": None, "last_error": ""}
    reply = ctl.ask(sock, {"op": "migration_view", "fsname": "static", "report": report})
    assert reply["ok"] and reply["fsname"] == "static" and len(reply["osts"]) == 8
    o = reply["osts"][3]
    assert o["ost"] == 3 and o["receives"] and o["steered"] is None and o["speed_ratio"] == 1.0
    assert o["kbytes_used"] == o["kbytes_total"] - next(
        iter(svc.contexts.values())).store.snapshot.osts[3].kbytes_free
    code, text, _ = run(capsys, "--socket", sock, "status")
    assert code == 0 and "migration static (dry_run, reported 0 s ago): evacuating OST0003; " \
        "0 running, 2 queued (2.0 GiB)" in text
    bad = ctl.ask(sock, {"op": "migration_view", "fsname": "other"})
    assert not bad["ok"] and bad["error"].startswith("fsname: 'other' is not one served")
    assert ctl.ask(sock, {"op": "status"})["ok"]                 # and it serves on
