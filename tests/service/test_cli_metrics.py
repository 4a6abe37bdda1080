"""The command line and configuration of lustre-alloc-mapper, and its Prometheus endpoint."""
from __future__ import annotations

import urllib.request

import pytest

from lustre_alloc.common.errors import ConfigError
from lustre_alloc.mapper.service.client import MapperClient
from lustre_alloc.mapper.service.cli import main
from lustre_alloc.mapper.service.config import load_config

from .conftest import free_port, log_events, make_service, spawn_mapper, stop_process, wait_ready

pytestmark = pytest.mark.timeout(60)


def test_flags_override_the_config_file(tmp_path):
    cfg = tmp_path / "m.toml"
    cfg.write_text('[mapper]\nbind = "tcp://*:6000"\ninsecure = true\npolicy = "random"\n'
                   'round_budget_s = 1\n[mapper.pools]\nflash = [0, 1]\n')
    c = load_config(str(cfg), {"policy": "round_robin", "static_cluster": None})
    assert (c.bind, c.policy, c.round_budget_s, c.pools) == (
        "tcp://*:6000", "round_robin", 1.0, {"flash": [0, 1]})


@pytest.mark.parametrize("text, words", [
    ('static_cluster = "4-2"', "static_cluster"),
    ("mds_cpu_limit_percent = 0", "mds_cpu_limit_percent"),
    ("batch_window_s = 1.0", "batch_window_s"),
    ('colour = "blue"', "unknown mapper setting"),
    ('curve_secret_key = "x"', "go together"),
    ("[mapper.pools]\nflash = [\"a\"]", "pools.flash"),
])
def test_invalid_configuration_is_refused_with_the_key(tmp_path, text, words):
    cfg = tmp_path / "m.toml"
    cfg.write_text("[mapper]\n" + text + "\n")
    with pytest.raises(ConfigError, match=words):
        load_config(str(cfg), {})


def test_cli_exits_2_on_bad_configuration(tmp_path, capsys):
    assert main(["--static-cluster", "banana"]) == 2
    assert "static_cluster" in capsys.readouterr().err
    assert main(["--static-cluster", "2x2", "--bind", "tcp://127.0.0.1:0", "--policy",
                 "no_such_policy"]) == 2
    assert "unknown policy 'no_such_policy'" in capsys.readouterr().err


def test_static_cluster_cli_serves_and_logs_its_configuration(tmp_path):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    proc = spawn_mapper(["--bind", endpoint, "--static-cluster", "4x2", "--policy", "random",
                         "--fallback", "round_robin"], tmp_path / "m.log")
    try:
        wait_ready(endpoint, proc)
        with MapperClient(endpoint) as c:
            layout = c.alloc("j", 8)
        assert sorted(layout.osts) == list(range(8)) and layout.policy == "random"
    finally:
        assert stop_process(proc) == 0
    start = next(e for e in log_events(tmp_path / "m.log") if e["event"] == "mapper_start")
    fs = start["filesystems"]["static"]
    assert start["config"]["static_cluster"] == "4x2" and fs["osts"] == 8
    assert (fs["policy"], fs["fallback"]) == ("random", "round_robin")


def test_metrics_endpoint_counts_requests_rounds_and_fallbacks():
    port = free_port()
    svc = make_service(static_cluster="4x2", policy="round_robin", metrics_port=port,
                       metrics_addr="127.0.0.1")
    try:
        with MapperClient(svc.endpoint) as c:
            for _ in range(3):
                c.alloc("j", 2)
            svc.store.mds_cpu_override = 99.0
            c.alloc("j", 2)
            c.send_frames([b"", b"\xc1"])
            c.recv_reply(None)
            c.ping()
        svc.gauges.refresh()
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        svc.stop()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    p = "lustre_alloc_mapper_"
    assert float(lines[p + 'requests_total{result="ok"}']) == 3
    assert float(lines[p + 'requests_total{result="fallback"}']) == 1
    assert float(lines[p + 'requests_total{result="bad_request"}']) == 1
    assert float(lines[p + 'requests_total{result="ping"}']) == 1
    assert float(lines[p + 'fallbacks_total{reason="mds_cpu"}']) == 1
    assert float(lines[p + "rounds_total"]) == 4
    assert float(lines[p + "request_seconds_count"]) == 6
    assert float(lines[p + 'mds_cpu_ratio{fsname="static"}']) == 0.99
    assert float(lines[p + 'osts{fsname="static",state="usable"}']) == 8
    assert sum(float(v) for k, v in lines.items() if k.startswith(p + "ost_stripes_total")) == 8


def test_shipped_example_config_and_unit_are_consistent():
    from .conftest import PROJECT
    cfg = load_config(str(PROJECT / "lustre_alloc/mapper/service/systemd/mapper.toml.example"), {})
    assert (cfg.bind, cfg.policy, cfg.fallback, cfg.metrics_port) == (
        "tcp://*:5558", "mcmf", "lustre_qos", 9558)
    unit = (PROJECT / "lustre_alloc/mapper/service/systemd/lustre-alloc-mapper.service").read_text()
    assert "ExecStart=/opt/lustre-alloc/bin/lustre-alloc-mapper --config /etc/lustre-alloc/mapper.toml" in unit
    assert "StateDirectory=lustre-alloc" in unit and cfg.state_file.startswith("/var/lib/lustre-alloc/")


def test_a_mapper_without_curve_binds_only_local_addresses(tmp_path):
    """Without CURVE the request socket may bind only what this host alone reaches, unless
    --insecure (a mapper started without a configuration served tcp://*:5558 to
    every host, silently)."""
    from lustre_alloc.common.errors import ConfigError
    from lustre_alloc.mapper.service.config import local_endpoint
    assert all(local_endpoint(e) for e in ("tcp://127.0.0.1:5558", "tcp://[::1]:5558",
                                           "tcp://localhost:1", "ipc:///run/m.sock", "inproc://m"))
    assert not any(local_endpoint(e) for e in ("tcp://*:5558", "tcp://0.0.0.0:5558",
                                               "tcp://10.1.2.3:5558", "tcp://mds01:5558"))
    with pytest.raises(ConfigError, match="without CURVE.*--insecure"):
        load_config(None, {"static_cluster": "2x2"}).check_exposure()
    load_config(None, {"static_cluster": "2x2", "insecure": True}).check_exposure()
    assert main(["--static-cluster", "2x2"]) == 2
