"""The Debian packages: built here with dpkg-buildpackage (packaging/build-deb.sh),
one per role, installed into a clean root with dpkg; the collector package carries no OR-Tools
and no numpy and refuses the simulator in one line; sysusers.d and tmpfiles.d make the service
user and the directories in that root."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT
from tests.support import built_once

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def debs(tmp_path_factory) -> dict[str, Path]:
    def build(out: Path) -> None:
        # --fast: gzip -1, not xz; the contents are the release's
        subprocess.run([str(PROJECT_ROOT / "packaging" / "build-deb.sh"), str(out), "--fast"],
                       check=True, capture_output=True, text=True, timeout=850)
    out = built_once(tmp_path_factory, "debs", build)      # once, whichever worker asks first
    return {p.name.split("_")[0].removeprefix("lustre-alloc-"): p for p in out.glob("*.deb")}


def _field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], check=True, capture_output=True,
                          text=True).stdout.strip()


def _files(deb: Path) -> list[str]:
    return subprocess.run(["dpkg-deb", "-c", str(deb)], check=True, capture_output=True,
                          text=True).stdout.splitlines()


def _clean_root(path: Path) -> Path:
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
        (path / d).mkdir(parents=True)
    for f in ("status", "available"):
        (path / "var/lib/dpkg" / f).touch()
    return path


def test_three_role_packages_and_what_each_holds(debs):
    assert set(debs) == {"collector", "mapper", "client"}
    collector = "\n".join(_files(debs["collector"]))
    assert "ortools" not in collector and "numpy" not in collector
    assert "lib/systemd/system/lustre-alloc-collector.service" in collector
    assert "lib/systemd/system/lustre-alloc-broker.service" in collector
    assert "usr/lib/sysusers.d/lustre-alloc-collector.conf" in collector
    mapper = "\n".join(_files(debs["mapper"]))
    assert "site-packages/ortools/" in mapper and "lustre-alloc-mapper.service" in mapper
    client = "\n".join(_files(debs["client"]))
    assert "opt/lustre-alloc/lib/liblustre_alloc.so" in client and "python" not in client
    # the shim's libraries are found by dpkg-shlibdeps; the Python packages need only python3
    assert "libzmq5" in _field(debs["client"], "Depends")
    assert _field(debs["collector"], "Depends") == "python3 (>= 3.11), systemd"


def test_installed_into_a_clean_root(debs, tmp_path):
    root = _clean_root(tmp_path / "root")
    done = subprocess.run(["dpkg", f"--root={root}", "--force-depends",
                           "--force-script-chrootless", "--log=/dev/null", "-i",
                           str(debs["collector"]), str(debs["client"])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    status = (root / "var/lib/dpkg/status").read_text()
    assert status.count("Status: install ok installed") == 2
    # postinst: systemd-sysusers and systemd-tmpfiles ran against the root
    assert any(line.startswith("lustre-alloc:")
               for line in (root / "etc/passwd").read_text().splitlines())
    assert oct((root / "var/lib/lustre-alloc").stat().st_mode & 0o777) == "0o750"
    assert (root / "etc/lustre-alloc/keys/authorized").is_dir()
    unit = (root / "lib/systemd/system/lustre-alloc-collector.service").read_text()
    assert "ExecStart=/opt/lustre-alloc/collector/bin/lustre-alloc-collector" in unit
    conffiles = (root / "var/lib/dpkg/info/lustre-alloc-collector.conffiles").read_text()
    assert "/etc/lustre-alloc/collector.toml" in conffiles.split()
    # the role's commands are on PATH: /usr/bin links into the role's venv
    for cmd in ("lustre-alloc-collector", "lustre-alloc-broker", "lustre-alloc-selftest"):
        link = root / "usr/bin" / cmd
        assert os.readlink(link) == f"/opt/lustre-alloc/collector/bin/{cmd}"
        assert (root / "opt/lustre-alloc/collector/bin" / cmd).is_file()
    assert not (root / "usr/bin/lustre-alloc-ctl").exists()        # the mapper package's
    venv = root / "opt/lustre-alloc/collector/bin"
    # the staged venv names its installed prefix, not the build directory
    assert (venv / "lustre-alloc-collector").read_text().startswith(
        "#!/opt/lustre-alloc/collector/bin/python")

    def run(cmd: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "python"), str(venv / cmd), *args],
                              capture_output=True, text=True, timeout=120)

    assert run("lustre-alloc-collector", "--version").returncode == 0
    refused = run("lustre-alloc-sim", "list")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and "[sim] extra" in lines[0]
    assert (root / "opt/lustre-alloc/lib/liblustre_alloc.so").exists()


def test_mapper_package_runs_the_mapper_and_ctl(debs, tmp_path):
    root = _clean_root(tmp_path / "root")
    done = subprocess.run(["dpkg", f"--root={root}", "--force-depends",
                           "--force-script-chrootless", "--log=/dev/null", "-i",
                           str(debs["mapper"])], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    venv = root / "opt/lustre-alloc/mapper/bin"
    for cmd in ("lustre-alloc-mapper", "lustre-alloc-ctl"):
        out = subprocess.run([str(venv / "python"), str(venv / cmd), "--version"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.startswith(cmd)
    unit = (root / "lib/systemd/system/lustre-alloc-mapper.service").read_text()
    assert "RuntimeDirectory=lustre-alloc" in unit
