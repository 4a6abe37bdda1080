"""The documented install works as written: deploy/install.sh stages the layout into a
DESTDIR (units, configurations, key directories, docs, the shim via ``make install``), the
units pass ``systemd-analyze verify`` against that root, run as ``User=lustre-alloc`` with
their secret key from ``LoadCredential=``, and the packaged configurations name that key."""
from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest

from lustre_alloc.common.config import BrokerConfig, CollectorConfig, load
from lustre_alloc.mapper.service.config import load_config

PROJECT = Path(__file__).resolve().parents[1]
UNITS = ("lustre-alloc-mapper", "lustre-alloc-broker", "lustre-alloc-collector")
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    build = tmp_path_factory.mktemp("build")
    out = subprocess.run([str(PROJECT / "deploy/install.sh"), "--destdir", str(root), "--no-venv"],
                         capture_output=True, text=True, timeout=170, cwd=PROJECT,
                         env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "BUILD": str(build)})
    assert out.returncode == 0, out.stderr
    return root


def test_layout(staged):
    expect = ["opt/lustre-alloc/lib/liblustre_alloc.so", "opt/lustre-alloc/lib/liblustre_alloc_api.so",
              "opt/lustre-alloc/include/lustre_alloc.h",
              "opt/lustre-alloc/share/doc/lustre-alloc/operations.md",
              "opt/lustre-alloc/share/doc/lustre-alloc/prometheus/lustre-alloc.rules.yml",
              "etc/lustre-alloc/mapper.toml", "etc/lustre-alloc/broker.toml",
              "etc/lustre-alloc/collector.toml", "etc/lustre-alloc/keys/clients",
              "etc/lustre-alloc/keys/authorized"]
    expect += [f"etc/systemd/system/{u}.service" for u in UNITS]
    assert [p for p in expect if not (staged / p).exists()] == []
    shim = staged / "opt/lustre-alloc/lib/liblustre_alloc.so"
    assert shim.read_bytes()[:4] == b"\x7fELF"
    assert (staged / "etc/lustre-alloc/mapper.toml").stat().st_mode & 0o777 == 0o640
    # the packaged configurations parse and name the credential systemd hands over
    cfg = load_config(str(staged / "etc/lustre-alloc/mapper.toml"), {})
    assert cfg.require_curve and cfg.serve_curve_secret_key == \
        "${CREDENTIALS_DIRECTORY}/mapper.key_secret"
    broker = load(BrokerConfig, str(staged / "etc/lustre-alloc/broker.toml"), "broker", {})
    assert broker.require_curve and broker.curve_secret_key.endswith("/broker.key_secret")
    coll = load(CollectorConfig, str(staged / "etc/lustre-alloc/collector.toml"), "collector", {})
    assert coll.curve_secret_key == "${CREDENTIALS_DIRECTORY}/collector.key_secret"


def test_units_run_as_a_user_with_their_key_as_a_credential(staged):
    for unit, user, key in (("lustre-alloc-mapper", "lustre-alloc", "mapper.key_secret"),
                            ("lustre-alloc-broker", "lustre-alloc", "broker.key_secret"),
                            ("lustre-alloc-collector", None, "collector.key_secret")):
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        parser.read(staged / f"etc/systemd/system/{unit}.service")
        service = parser["Service"]
        assert "DynamicUser" not in service
        assert service.get("User") == user
        assert service["LoadCredential"] == f"{key}:/etc/lustre-alloc/keys/{key}"
        assert service["ExecStart"].startswith(f"/opt/lustre-alloc/bin/{unit} --config "
                                               f"/etc/lustre-alloc/")
        assert parser["Install"]["WantedBy"] == "multi-user.target"


def test_units_pass_systemd_analyze_verify(staged):
    # scripts/setup-env.sh installs Debian's systemd for systemd-analyze
    assert shutil.which("systemd-analyze"), "systemd-analyze missing: run scripts/setup-env.sh"
    # the venv is not staged, nor the system's /bin/kill (ExecReload=): stand-in executables
    for exe in [staged / "opt/lustre-alloc/bin" / unit for unit in UNITS] + [staged / "bin/kill"]:
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    for unit in UNITS:
        out = subprocess.run(["systemd-analyze", "verify", f"--root={staged}", "--man=no",
                              "--recursive-errors=no", f"/etc/systemd/system/{unit}.service"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and not out.stderr.strip(), (unit, out.stderr)


def test_mapper_unit_reloads_with_sighup(staged):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(staged / "etc/systemd/system/lustre-alloc-mapper.service")
    assert parser["Service"]["ExecReload"] == "/bin/kill -HUP $MAINPID"


def test_units_are_hardened(staged):
    """``systemd-analyze security`` rates every unit 4 or less (they were
    8.5-8.9, "EXPOSED")."""
    assert shutil.which("systemd-analyze"), "systemd-analyze missing: run scripts/setup-env.sh"
    for unit in UNITS:
        out = subprocess.run(["systemd-analyze", "security", "--offline=true", f"--root={staged}",
                              f"/etc/systemd/system/{unit}.service"],
                             capture_output=True, text=True, timeout=60)
        import re
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", out.stdout)
        assert m, (unit, out.stdout[-300:], out.stderr[-300:])
        assert float(m.group(1)) <= 4.0, (unit, m.group(1))


def test_steer_agent_drop_in_only_lets_the_collector_write_tunables(staged):
    """The shipped drop-in for a steering collector (``lctl set_param`` writes under
    /sys/fs/lustre) relaxes ProtectKernelTunables and nothing else; the unit still verifies."""
    drop = staged / "opt/lustre-alloc/share/doc/lustre-alloc/steer-agent.conf"
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read(drop)
    assert dict(parser["Service"]) == {"protectkerneltunables": "false"}
    d = staged / "etc/systemd/system/lustre-alloc-collector.service.d"
    d.mkdir(exist_ok=True)
    shutil.copy(drop, d / "steer-agent.conf")
    try:
        _verify_with_stub(staged, "lustre-alloc-collector", "lustre-alloc-collector")
    finally:
        shutil.rmtree(d)


def _verify_with_stub(staged, unit: str, command: str) -> None:
    """``systemd-analyze verify`` of ``unit`` in ``staged``, its ExecStart ``command`` stood
    in for by an empty script if the staging has none."""
    exe = staged / "opt/lustre-alloc/bin" / command
    exe.parent.mkdir(parents=True, exist_ok=True)
    if not exe.exists():
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    out = subprocess.run(["systemd-analyze", "verify", f"--root={staged}", "--man=no",
                          "--recursive-errors=no", f"/etc/systemd/system/{unit}.service"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr


def test_shipped_configurations_and_prometheus_agree_on_ports():
    """The example scrape configuration scrapes the ports the shipped configurations serve
    /metrics on (the broker's and the collector's were off, so the shipped alerts
    on them never fired)."""
    import tomllib
    import yaml
    root = Path(__file__).resolve().parents[1]
    scrape = yaml.safe_load((root / "deploy/prometheus/prometheus.yml").read_text())
    ports = {job["job_name"]: {int(t.rsplit(":", 1)[1]) for c in job["static_configs"]
                               for t in c["targets"]}
             for job in scrape["scrape_configs"]}
    shipped = {"lustre-alloc-mapper": ("lustre_alloc/mapper/service/systemd/mapper.toml.example", "mapper"),
               "lustre-alloc-broker": ("lustre_alloc/collectors/systemd/broker.toml.example", "broker"),
               "lustre-alloc-collector": ("lustre_alloc/collectors/systemd/collector.toml.example", "collector")}
    for job, (path, table) in shipped.items():
        port = tomllib.loads((root / path).read_text())[table].get("metrics_port", 0)
        assert port and ports[job] == {port}, (job, port, ports[job])


@pytest.mark.parametrize("roles, units, configs, shim, extras", [
    (["collector"], {"lustre-alloc-broker", "lustre-alloc-collector"},
     {"broker.toml", "collector.toml"}, False, "collector"),
    (["mapper"], {"lustre-alloc-mapper"}, {"mapper.toml"}, False, "mapper"),
    (["client"], set(), set(), True, "none"),
    (["mapper", "collector"], set(UNITS), {"mapper.toml", "broker.toml", "collector.toml"},
     False, "collector,mapper"),
])
def test_install_by_role(tmp_path, roles, units, configs, shim, extras):
    """``install.sh --role``: an OSS gets the collector and the broker with the [collector]
    extra only (no OR-Tools, no numpy), the MDS the mapper, a compute node the shim alone."""
    args = [str(PROJECT / "deploy/install.sh"), "--destdir", str(tmp_path / "root"), "--no-venv"]
    for role in roles:
        args += ["--role", role]
    out = subprocess.run(args, capture_output=True, text=True, timeout=170, cwd=PROJECT,
                         env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
                              "BUILD": str(tmp_path / "build")})
    assert out.returncode == 0, out.stderr
    assert f"Python extras: {extras}" in out.stdout
    root = tmp_path / "root"
    got_units = {p.stem for p in (root / "etc/systemd/system").glob("*.service")}
    assert got_units == units
    assert {p.name for p in (root / "etc/lustre-alloc").glob("*.toml")} == configs
    assert (root / "opt/lustre-alloc/lib/liblustre_alloc.so").exists() == shim


def test_install_refuses_an_unknown_role(tmp_path):
    out = subprocess.run([str(PROJECT / "deploy/install.sh"), "--role", "oss"],
                         capture_output=True, text=True, timeout=30, cwd=PROJECT)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--role" in out.stderr


def test_the_migration_services_example_unit_and_configuration_are_shipped(staged):
    """Beside the docs, not enabled: the unit verifies once copied in, and the example
    configuration loads as shipped (dry run first)."""
    from lustre_alloc.rebalance.config import load as load_migrate
    doc = staged / "opt/lustre-alloc/share/doc/lustre-alloc"
    assert (doc / "rebalance.md").is_file()
    assert not (staged / "etc/systemd/system/lustre-alloc-migrate.service").exists()
    cfg = load_migrate(doc / "migrate.toml.example")
    assert cfg.mode == "dry_run" and cfg.budget.ost_share == 0.1
    unit = staged / "etc/systemd/system/lustre-alloc-migrate.service"
    shutil.copy(doc / "lustre-alloc-migrate.service", unit)
    try:
        _verify_with_stub(staged, "lustre-alloc-migrate", "lustre-alloc-rebalance")
    finally:
        unit.unlink()
