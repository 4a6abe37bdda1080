"""SIGHUP reload of a running mapper process: a client key added to the
allow-list is accepted without a restart, a broken configuration is rejected and the old one
keeps serving, reloadable keys apply, and keys that need a restart are named."""
from __future__ import annotations

import json
import shutil
import signal

import pytest

from lustre_alloc.common.curve import CurveClient, generate_keys
from lustre_alloc.mapper.service.client import MapperClient, MapperTimeout
from tests.support import wait_for

from .conftest import free_port, log_events, spawn_mapper, stop_process, wait_ready

pytestmark = pytest.mark.timeout(120)


def config_text(endpoint: str, clients: str, **extra) -> str:
    keys = {"bind": endpoint, "serve_curve_secret_key": SECRET[0],
            "serve_curve_authorized_keys": clients, "plan_ahead": False, **extra}
    return ('[development]\nstatic_cluster = "2x2"\n\n[mapper]\n'
            + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))


SECRET: list[str] = []


def wait_event(log, name: str, count: int = 1, timeout_s: float = 15.0) -> dict:
    found = wait_for(lambda: [e for e in log_events(log) if e.get("event") == name][count - 1:],
                     timeout_s, f"{name} #{count} in the mapper's log")
    return found[0]


def test_sighup_reloads_client_keys_rejects_bad_configs_and_names_restart_keys(tmp_path):
    keys = tmp_path / "keys"
    for name in ("mapper", "shim", "newcomer"):
        generate_keys(keys, name)
    SECRET[:] = [str(keys / "mapper.key_secret")]
    clients = tmp_path / "clients"
    clients.mkdir()
    shutil.copy(keys / "shim.key", clients)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    toml = tmp_path / "mapper.toml"
    toml.write_text(config_text(endpoint, str(clients)))
    log = tmp_path / "mapper.log"
    proc = spawn_mapper(["--config", str(toml)], log)
    shim = CurveClient(str(keys / "shim.key_secret"), str(keys / "mapper.key"))
    newcomer = CurveClient(str(keys / "newcomer.key_secret"), str(keys / "mapper.key"))
    try:
        wait_ready(endpoint, proc, timeout_s=30, curve=shim)
        with MapperClient(endpoint, timeout_s=0.3, curve=shim) as c:
            with MapperClient(endpoint, timeout_s=0.5, curve=newcomer) as n:
                with pytest.raises(MapperTimeout):
                    n.ping()                           # not in the allow-list yet

            shutil.copy(keys / "newcomer.key", clients)   # the admin adds the key, reloads
            proc.send_signal(signal.SIGHUP)
            wait_event(log, "reload")
            with MapperClient(endpoint, timeout_s=2.0, curve=newcomer) as n:
                assert n.ping()                        # accepted, no restart

            toml.write_text(config_text(endpoint, str(clients)) + "bogus_key = 1\n")
            proc.send_signal(signal.SIGHUP)
            rejected = wait_event(log, "reload_rejected")
            assert "bogus_key" in rejected["error"]
            assert c.ping() and proc.poll() is None    # the old configuration serves on

            toml.write_text(config_text(endpoint, str(clients), peer_max_apps=7,
                                        save_interval_s=60.0))
            proc.send_signal(signal.SIGHUP)
            applied = wait_event(log, "reload", count=2)
            assert applied["changed"] == ["peer_max_apps"]
            restart = wait_event(log, "reload_needs_restart")
            assert restart["keys"] == ["save_interval_s"]
            assert c.ping()
    finally:
        assert stop_process(proc) == 0
