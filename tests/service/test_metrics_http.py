"""``/metrics`` of each real service process (mapper, broker, collector) over HTTP, parsed with
prometheus_client's parser: lustre_exporter-style labels (``target``, ``fsname``), base units,
``process_*`` and ``lustre_alloc_build_info``; every metric the shipped alert rules use exists."""
from __future__ import annotations

import os
import re
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lustre_alloc.mapper.service.client import MapperClient
from tests.support import wait_for

from .conftest import PROJECT, PYTHON, free_ports, stop_process, wait_ready

pytestmark = pytest.mark.timeout(90)
HPE = PROJECT / "tests/fixtures/lustre/hpe-lustre-2.10.1"
RULES = PROJECT / "deploy/prometheus/lustre-alloc.rules.yml"
COMMON = {"process_cpu_seconds_total", "process_resident_memory_bytes",
          "process_start_time_seconds", "lustre_alloc_build_info"}
DOCUMENTED = {
    "mapper": {"lustre_alloc_mapper_requests_total", "lustre_alloc_mapper_request_seconds_bucket",
               "lustre_alloc_mapper_fallbacks_total", "lustre_alloc_mapper_stale_servers",
               "lustre_alloc_mapper_mds_cpu_ratio", "lustre_alloc_mapper_ost_stripes_total",
               "lustre_alloc_mapper_peer_limited_total",
               "lustre_alloc_mapper_expected_bytes_clipped_total",
               "lustre_alloc_mapper_state_saves_total"},
    "broker": {"lustre_alloc_broker_messages_total", "lustre_alloc_broker_received_bytes_total",
               "lustre_alloc_broker_handshake_failures_total",
               "lustre_alloc_broker_cached_servers"},
    "collector": {"lustre_alloc_collector_samples_total",
                  "lustre_alloc_collector_collect_seconds_bucket",
                  "lustre_alloc_collector_target_available",
                  "lustre_alloc_collector_last_sample_timestamp_seconds"},
}


def scrape(port: int, want: str, timeout_s: float = 20.0) -> dict[str, list]:
    """Sample name -> [(labels, value)], once ``want`` shows up with a value above 0."""
    def once() -> dict[str, list] | None:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2
                                          ).read().decode()
        except OSError:
            return None
        out: dict[str, list] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.setdefault(s.name, []).append((s.labels, s.value))
        return out if any(v > 0 for _, v in out.get(want, ())) else None
    return wait_for(once, timeout_s, f"{want} on :{port}", poll_s=0.2)


def test_every_service_serves_documented_metrics(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    names = ("front", "back", "snap", "req", "m_map", "m_brk", "m_col")
    ports = dict(zip(names, free_ports(len(names))))
    front = f"tcp://127.0.0.1:{ports['front']}"
    log = open(tmp_path / "procs.log", "w")
    procs = []

    def spawn(*argv):
        procs.append(subprocess.Popen([PYTHON, "-m", *argv], env=env, stderr=log,
                                      stdout=subprocess.DEVNULL, cwd=PROJECT))
    try:
        spawn("lustre_alloc.collectors.broker_cli", "--frontend", front,
              "--backend", f"tcp://127.0.0.1:{ports['back']}",
              "--snapshot", f"tcp://127.0.0.1:{ports['snap']}", "--metrics-port",
              str(ports["m_brk"]))
        spawn("lustre_alloc.collectors.cli", "--broker", front, "--interval", "0.2", "--role", "oss",
              "--root", str(HPE), "--source", "files", "--host", "oss-a", "--metrics-port",
              str(ports["m_col"]))
        endpoint = f"tcp://127.0.0.1:{ports['req']}"
        spawn("lustre_alloc.mapper.service.cli", "--bind", endpoint, "--static-cluster", "2x2",
              "--policy", "round_robin", "--metrics-port", str(ports["m_map"]))
        wait_ready(endpoint, procs[-1])
        with MapperClient(endpoint) as c:
            c.alloc("ior.1", 2)
        got = {"mapper": scrape(ports["m_map"], "lustre_alloc_mapper_ost_stripes_total"),
               "broker": scrape(ports["m_brk"], "lustre_alloc_broker_messages_total"),
               "collector": scrape(ports["m_col"], "lustre_alloc_collector_target_available")}
    finally:
        for p in reversed(procs):
            stop_process(p)
        log.close()
    for service, samples in got.items():
        missing = (COMMON | DOCUMENTED[service]) - set(samples)
        assert not missing, (service, sorted(missing))
        (labels, value), = samples["lustre_alloc_build_info"]
        assert labels["service"] == service and value == 1.0
    stripes = got["mapper"]["lustre_alloc_mapper_ost_stripes_total"]
    assert {(lab["target"], lab["fsname"]) for lab, _ in stripes} <= {
        (f"static-OST{i:04x}", "static") for i in range(4)}
    assert sum(v for _, v in stripes) == 2
    targets = {(lab["target"], lab["fsname"], v) for lab, v in
               got["collector"]["lustre_alloc_collector_target_available"]}
    assert ("lustrefs-OST0000", "lustrefs", 1.0) in targets
    assert got["broker"]["lustre_alloc_broker_messages_total"][0][1] >= 1
    # the alert rules only use metrics the services export (or Prometheus' own `up`)
    exported = set().union(*got.values())
    used = set(re.findall(r"\b(lustre_alloc_[a-z_]+)", RULES.read_text()))
    assert used and used <= exported, sorted(used - exported)
