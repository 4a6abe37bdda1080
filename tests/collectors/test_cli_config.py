"""Commands: --help, TOML config under flags, dry-run output, key generation, unit files."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from lustre_alloc.common.config import BrokerConfig, CollectorConfig, load
from lustre_alloc.common.errors import ConfigError

from .conftest import HPE, PYTHON

PKG = Path(__file__).resolve().parents[2] / "lustre_alloc" / "collectors"


@pytest.mark.parametrize("module", ["lustre_alloc.collectors.cli", "lustre_alloc.collectors.broker_cli"])
def test_help(module):
    out = subprocess.run([PYTHON, "-m", module, "--help"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    assert "usage:" in out and "--config" in out


def test_flags_override_toml(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[collector]\nrole = "mds"\ninterval_s = 5\nbroker = "tcp://x:1"\n'
                   'lctl_command = "/opt/lctl --device x"\n')
    config = load(CollectorConfig, str(cfg), "collector", {"interval_s": 2.0, "role": None})
    assert (config.role, config.interval_s, config.broker) == ("mds", 2.0, "tcp://x:1")
    assert config.lctl_command == ["/opt/lctl", "--device", "x"]


@pytest.mark.parametrize("text", ['[collector]\nrole = "client"\n', '[collector]\nbogus = 1\n',
                                  '[collector]\ninterval_s = "5"\n', "[collector\n",
                                  '[collector]\ncurve_secret_key = "a"\n'])
def test_bad_collector_config_is_rejected(tmp_path, text):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError):
        load(CollectorConfig, str(cfg), "collector", {})


def test_example_configs_load():
    load(CollectorConfig, str(PKG / "systemd/collector.toml.example"), "collector", {})
    load(BrokerConfig, str(PKG / "systemd/broker.toml.example"), "broker", {})


def test_dry_run_prints_schema_samples():
    out = subprocess.run([PYTHON, "-m", "lustre_alloc.collectors.cli", "--root", str(HPE), "--interval", "0.1",
                          "--count", "2", "--dry-run", "--host", "t"], capture_output=True,
                         text=True, timeout=30, check=True).stdout.splitlines()
    samples = [json.loads(line) for line in out]
    assert [s["seq"] for s in samples] == [1, 2] and samples[0]["schema"] == 1
    assert samples[1]["targets"]["lustrefs-OST0002"]["values"]["kbytes_total"] == 47168409600


def test_keygen_writes_certificates(tmp_path):
    subprocess.run([PYTHON, "-m", "lustre_alloc.collectors.broker_cli", "--keygen", "oss9", "--keys-dir",
                    str(tmp_path)], check=True, timeout=30, capture_output=True)
    assert (tmp_path / "oss9.key").is_file() and (tmp_path / "oss9.key_secret").is_file()


def test_systemd_units_are_shipped():
    for unit in ("lustre-alloc-collector.service", "lustre-alloc-broker.service"):
        text = (PKG / "systemd" / unit).read_text()
        assert "ExecStart=/opt/lustre-alloc/bin/lustre-alloc-" in text and "[Install]" in text
