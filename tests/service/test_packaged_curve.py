"""Under the packaged configuration (mapper.toml.example, broker.toml.example, as installed,
with only paths and ports rewritten for the test) CURVE is required: unkeyed publishers and
clients, and clients outside the allow-list, are refused; keys are read through
``${CREDENTIALS_DIRECTORY}`` as systemd's LoadCredential= provides them; without keys the
mapper refuses to start unless --insecure is given."""
from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import time

import pytest

from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.common.curve import CurveClient, generate_keys
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.mapper.service.client import ShadowDecision, MapperClient, MapperError, MapperTimeout
from lustre_alloc.mapper.service.config import load_config

from .conftest import PROJECT, PYTHON, free_port, free_ports, stop_process
from .test_filesystems import KIB, body, ost

pytestmark = pytest.mark.timeout(90)
MAPPER_TOML = PROJECT / "lustre_alloc/mapper/service/systemd/mapper.toml.example"
BROKER_TOML = PROJECT / "lustre_alloc/collectors/systemd/broker.toml.example"


def installed(src, dst, keys, ports, extra=""):
    text = src.read_text().replace("/etc/lustre-alloc/keys", str(keys))
    for old, new in ports.items():
        text = text.replace(old, new)
    text = re.sub(r'^state_file = .*$', f'state_file = "{dst.parent}/state.json"', text, flags=re.M)
    text = re.sub(r'^metrics_port = .*$', 'metrics_port = 0', text, flags=re.M)
    dst.write_text(text + extra)
    return dst


def test_packaged_config_refuses_unkeyed_publishers_and_clients(tmp_path):
    keys, creds = tmp_path / "keys", tmp_path / "credentials"
    for name in ("broker", "mapper", "oss1", "shim", "stranger"):
        generate_keys(keys, name)
    creds.mkdir()
    for name in ("broker", "mapper"):                       # what LoadCredential= provides
        shutil.copy(keys / f"{name}.key_secret", creds / f"{name}.key_secret")
    (keys / "clients").mkdir()
    shutil.copy(keys / "shim.key", keys / "clients")        # allow-list of the request socket
    (keys / "authorized").mkdir()
    for name in ("oss1", "mapper"):                         # the broker's: publishers + mapper
        shutil.copy(keys / f"{name}.key", keys / "authorized")
    front, back, snap, req = free_ports(4)
    ports = {"tcp://*:5555": f"tcp://127.0.0.1:{front}", "tcp://*:5556": f"tcp://127.0.0.1:{back}",
             "tcp://*:5557": f"tcp://127.0.0.1:{snap}", "tcp://127.0.0.1:5556":
             f"tcp://127.0.0.1:{back}", "tcp://127.0.0.1:5557": f"tcp://127.0.0.1:{snap}",
             "tcp://*:5558": f"tcp://127.0.0.1:{req}"}
    broker_toml = installed(BROKER_TOML, tmp_path / "broker.toml", keys, ports)
    mapper_toml = installed(MAPPER_TOML, tmp_path / "mapper.toml", keys, ports,
                            '\n[mapper.pools]\n')
    env = {**os.environ, "PYTHONPATH": str(PROJECT), "CREDENTIALS_DIRECTORY": str(creds)}
    logs = [open(tmp_path / n, "w") for n in ("broker.log", "mapper.log")]
    broker = subprocess.Popen([PYTHON, "-m", "lustre_alloc.collectors.broker_cli", "--config", str(broker_toml)],
                              env=env, stderr=logs[0], stdout=subprocess.DEVNULL, cwd=PROJECT)
    mapper = subprocess.Popen([PYTHON, "-m", "lustre_alloc.mapper.service.cli", "--config", str(mapper_toml),
                               "--fsname", "fs"], env=env, stderr=logs[1],
                              stdout=subprocess.DEVNULL, cwd=PROJECT)
    endpoint = f"tcp://127.0.0.1:{req}"
    shim = CurveClient(str(keys / "shim.key_secret"), str(keys / "mapper.key"))
    stranger = CurveClient(str(keys / "stranger.key_secret"), str(keys / "mapper.key"))
    pubs = []
    try:
        with MapperClient(endpoint, timeout_s=0.3, curve=shim) as c:
            deadline = time.monotonic() + 20
            while True:
                try:
                    c.ping()
                    break
                except MapperTimeout:
                    assert time.monotonic() < deadline and mapper.poll() is None, \
                        (tmp_path / "mapper.log").read_text()[-2000:]
            for curve in (None, stranger):                  # unkeyed, and not allow-listed
                with MapperClient(endpoint, timeout_s=0.5, curve=curve) as other:
                    with pytest.raises(MapperTimeout):
                        other.ping()

            sample = body(*(ost("fs", i, KIB // 2) for i in range(4)))
            unkeyed = Publisher(f"tcp://127.0.0.1:{front}", "oss", "oss-fake")
            pubs.append(unkeyed)
            for _ in range(10):
                unkeyed.publish(time.time(), 0.2, sample)
                time.sleep(0.1)
            with pytest.raises(MapperError) as exc:         # nothing of it reached the mapper
                c.alloc("a.1", 1)
            assert exc.value.errno == errno.EAGAIN

            keyed = Publisher(f"tcp://127.0.0.1:{front}", "oss", "oss1",
                              curve=CurveClient(str(keys / "oss1.key_secret"),
                                                str(keys / "broker.key")))
            pubs.append(keyed)
            deadline = time.monotonic() + 15
            while True:
                keyed.publish(time.time(), 0.2, sample)
                try:
                    c.alloc("a.1", 2)
                    raise AssertionError("the packaged configuration places in shadow mode")
                except ShadowDecision as decided:     # the pilot: decided, not placed
                    assert len(decided.osts) == 2
                    break
                except MapperError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
    finally:
        for p in pubs:
            p.close()
        assert stop_process(mapper) == 0
        stop_process(broker)
        for f in logs:
            f.close()


def test_packaged_config_without_keys_needs_insecure(tmp_path):
    no_keys = {"curve_secret_key": "", "curve_server_key": "", "serve_curve_secret_key": "",
               "serve_curve_authorized_keys": ""}
    with pytest.raises(ConfigError, match="--insecure"):
        load_config(str(MAPPER_TOML), no_keys)
    insecure = {**no_keys, "require_curve": False, "insecure": True}       # what --insecure sets
    assert load_config(str(MAPPER_TOML), insecure).require_curve is False
    with pytest.raises(ConfigError, match="without CURVE"):                # tcp://*:5558, no keys
        load_config(str(MAPPER_TOML), {**no_keys, "require_curve": False}).check_exposure()
    from lustre_alloc.common.config import BrokerConfig, load
    with pytest.raises(ConfigError, match="--insecure"):
        load(BrokerConfig, str(BROKER_TOML), "broker",
             {"curve_secret_key": "", "curve_authorized_keys": ""})
    # the CLI: a clear line and exit 2, then --insecure starts it (a static cluster here)
    toml = tmp_path / "m.toml"
    toml.write_text(MAPPER_TOML.read_text().replace("/etc/lustre-alloc/keys", str(tmp_path))
                    .replace("/var/lib/lustre-alloc", str(tmp_path))
                    .replace("tcp://*:5558", f"tcp://127.0.0.1:{free_port()}"))
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    env.pop("CREDENTIALS_DIRECTORY", None)
    out = subprocess.run([PYTHON, "-m", "lustre_alloc.mapper.service.cli", "--config", str(toml)],
                         env=env, capture_output=True, text=True, timeout=60, cwd=PROJECT)
    # keys it cannot read: a configuration error, one line, exit 2 (systemd's
    # RestartPreventExitStatus=2 then stops the restart loop)
    assert out.returncode == 2 and "CREDENTIALS_DIRECTORY" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "mapper-state.json").exists()     # a failed start saves nothing
