"""The RPMs for EL8/EL9: built here with rpmbuild from packaging/rpm/lustre-alloc.spec
(packaging/build-rpm.sh), one per role, linted with rpmlint and the filters
packaging/rpm/rpmlint.toml documents; the collector package carries no OR-Tools and no numpy."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT
from tests.support import built_once

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def rpms(tmp_path_factory) -> dict[str, Path]:
    def build(out: Path) -> None:
        # --fast: gzip -1 payloads; the contents are the release's
        subprocess.run([str(PROJECT_ROOT / "packaging" / "build-rpm.sh"), str(out), "--fast"],
                       check=True, capture_output=True, text=True, timeout=850)
    out = built_once(tmp_path_factory, "rpms", build)      # once, whichever worker asks first
    return {p.name.split("-0")[0].removeprefix("lustre-alloc-"): p for p in out.glob("*.rpm")}


def _q(rpm: Path, *what: str) -> str:
    return subprocess.run(["rpm", "-qp", *what, str(rpm)], check=True, capture_output=True,
                          text=True).stdout


def test_three_role_rpms_with_units_user_and_configs(rpms):
    assert set(rpms) == {"collector", "mapper", "client"}
    collector = _q(rpms["collector"], "-l")
    assert "ortools" not in collector and "numpy" not in collector
    for path in ("/usr/lib/systemd/system/lustre-alloc-collector.service",
                 "/usr/lib/systemd/system/lustre-alloc-broker.service",
                 "/usr/lib/sysusers.d/lustre-alloc.conf", "/usr/lib/tmpfiles.d/lustre-alloc.conf",
                 "/etc/lustre-alloc/keys/authorized", "/opt/lustre-alloc/collector/bin/lustre-alloc-collector"):
        assert path in collector.split()
    assert "/opt/lustre-alloc/mapper/lib/python3.11/site-packages/ortools/__init__.py" in \
        _q(rpms["mapper"], "-l").split()
    assert "/opt/lustre-alloc/lib/liblustre_alloc.so" in _q(rpms["client"], "-l").split()
    # each role's commands on PATH: /usr/bin links into its venv
    for role, cmds in (("collector", ("lustre-alloc-collector", "lustre-alloc-broker",
                                      "lustre-alloc-selftest")),
                       ("mapper", ("lustre-alloc-mapper", "lustre-alloc-ctl",
                                   "lustre-alloc-rebalance"))):
        links = _q(rpms[role], "--qf", "[%{FILENAMES} %{FILELINKTOS}\n]").splitlines()
        for cmd in cmds:
            assert f"/usr/bin/{cmd} /opt/lustre-alloc/{role}/bin/{cmd}" in links
    # configurations are %config(noreplace); the service user comes before the files
    configs = _q(rpms["collector"], "-c").split()
    assert "/etc/lustre-alloc/collector.toml" in configs and "/etc/lustre-alloc/broker.toml" in configs
    scripts = _q(rpms["mapper"], "--scripts")
    assert "useradd -r -g lustre-alloc" in scripts and "systemd-tmpfiles --create" in scripts
    assert "python3.11" in _q(rpms["collector"], "--requires")
    # the staged venv runs from its prefix, not the build root
    unit = subprocess.run(f"rpm2cpio {rpms['mapper']} | cpio -i --to-stdout "
                          f"./usr/lib/systemd/system/lustre-alloc-mapper.service",
                          shell=True, capture_output=True, text=True, check=True).stdout
    assert "ExecStart=/opt/lustre-alloc/mapper/bin/lustre-alloc-mapper" in unit


def test_rpmlint_finds_no_error(rpms):
    done = subprocess.run(["rpmlint", "--config", str(PROJECT_ROOT / "packaging/rpm/rpmlint.toml"),
                           *map(str, rpms.values())], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and " 0 errors," in done.stdout, done.stdout[-3000:]
