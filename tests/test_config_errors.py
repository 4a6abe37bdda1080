"""A configuration error in a service, missing or unreadable CURVE keys included, prints one
line and exits 2 (the mapper and the broker used to exit 1, so systemd's
``RestartPreventExitStatus=2`` never stopped their restart loop)."""
from __future__ import annotations

import subprocess
import sys

import pytest

MAPPER = """[development]
static_cluster = "2x2"

[mapper]
bind = "tcp://127.0.0.1:0"
serve_curve_secret_key = "{d}/none/mapper.key_secret"
serve_curve_authorized_keys = "{d}/none/clients"
"""
BROKER = """[broker]
frontend = "tcp://127.0.0.1:0"
backend = "tcp://127.0.0.1:0"
snapshot = "tcp://127.0.0.1:0"
curve_secret_key = "{d}/none/broker.key_secret"
curve_authorized_keys = "{d}/none/clients"
"""


@pytest.mark.parametrize("module, text, prog", [
    ("lustre_alloc.mapper.service.cli", MAPPER, "lustre-alloc-mapper"),
    ("lustre_alloc.collectors.broker_cli", BROKER, "lustre-alloc-broker")])
def test_missing_curve_keys_are_a_configuration_error(tmp_path, module, text, prog):
    cfg = tmp_path / "service.toml"
    cfg.write_text(text.format(d=tmp_path))
    done = subprocess.run([sys.executable, "-m", module, "--config", str(cfg)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error:") and "key" in lines[0]
    assert "Traceback" not in done.stderr
