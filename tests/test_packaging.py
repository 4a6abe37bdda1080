"""The wheel stands alone: built from this checkout, installed into an empty folder, its real-data
scenario runs from a directory outside the checkout with nothing of the checkout importable."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ into the source tree, and a stale build/lib
    # could put deleted modules into the wheel.
    src = tmp_path_factory.mktemp("src") / "lustre-alloc"
    shutil.copytree(PROJECT_ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "results", "__pycache__", ".hypothesis", "tests"))
    # No build isolation: the test must not need the network (setuptools and wheel come from [test]).
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                        "--no-build-isolation", "-q", "-w", str(out)],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert r.returncode == 0, r.stderr
    # setuptools prints its BuildBackendWarnings to stderr; a clean declaration prints none.
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stdout + r.stderr
    (whl,) = out.glob("lustre_alloc-*.whl")
    return whl


def test_wheel_holds_scenarios_their_data_licences_and_no_tests(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("lustre_alloc/simulator/scenarios/nersc-edison-real.toml", "lustre_alloc/simulator/scenarios/paper-32ost.toml",
                   "lustre_alloc_data/nersc-pytokio/sample_ost-fullness.txt.gz",
                   "lustre_alloc_data/nersc-pytokio/sample_ost-map.txt.gz",
                   "lustre_alloc_data/nersc-pytokio/hacc_io_jobs_summary.csv.gz",
                   "lustre_alloc_data/nersc-pytokio/LICENSE", "lustre_alloc/simulator/data/net_calibration.json",
                   "lustre_alloc/collectors/systemd/lustre-alloc-collector.service",
                   "lustre_alloc/simulator/scenarios/nersc-lmt-day.toml", "lustre_alloc/simulator/scenarios/expansion-25pct.toml",
                   "lustre_alloc/simulator/scenarios/degraded-oss.toml",
                   "lustre_alloc_data/nersc-pytokio/snx11025_2018-01-28.sqlite3",
                   "lustre_alloc/simulator/data/snx11025_2018-01-28.background.csv"):
        assert needed in names, needed
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
               for n in names)
    assert not any(n.startswith("tests/") for n in names)


def test_real_data_scenario_runs_from_the_installed_wheel_outside_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                        str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # -S: no site processing, so the venv's editable install of a checkout (.pth) is not seen;
    # only the wheel's files and the third-party libraries are importable.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LUSTRE_ALLOC_SHARED")}
    env["PYTHONPATH"] = os.pathsep.join([str(target), sysconfig.get_paths()["purelib"],
                                         sysconfig.get_paths()["platlib"]])
    env["LUSTRE_ALLOC_SHARED"] = "/nonexistent"
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    where = subprocess.run([sys.executable, "-S", "-c",
                            "import lustre_alloc.simulator, lustre_alloc_data, lustre_alloc.traces as t; "
                            "print(lustre_alloc.simulator.__file__, lustre_alloc_data.__file__, "
                            "t.__file__)"],
                           cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert all(p.startswith(str(target)) for p in where.stdout.split()), where.stdout
    out = tmp_path / "results"
    run = subprocess.run([sys.executable, "-S", "-m", "lustre_alloc.simulator.cli", "run", "nersc-edison-real",
                          "--duration", "600", "--policy", "round_robin", "--jobs", "1",
                          "--no-figures", "--out", str(out)],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "round_robin" in run.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert [p["policy"] for p in summary["policies"]] == ["round_robin"]
    assert summary["policies"][0]["creates"] > 0


def test_the_wheel_installs_one_import_name_and_its_data_package(wheel):
    """Nothing at the top of site-packages but ``lustre_alloc`` and ``lustre_alloc_data`` (and
    the distribution's metadata): the index has packages named ``traces``, ``mapper``,
    ``common``, ``simulator``, ``collectors``, ``livestack``."""
    top = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"lustre_alloc",
                                                                  "lustre_alloc_data"}


def test_every_python_package_of_the_checkout_is_in_the_wheel(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    skip = {"tests", "bench", "scripts", "build", ".git", ".venv", "docs", "liblustre_alloc"}
    packages = [p.parent.relative_to(PROJECT_ROOT) for p in PROJECT_ROOT.rglob("__init__.py")
                if p.relative_to(PROJECT_ROOT).parts[0] not in skip]
    assert packages
    missing = [str(p) for p in packages if f"{p.as_posix()}/__init__.py" not in names]
    assert not missing, f"packages absent from setup.cfg [options] packages: {missing}"


ROLE_IMPORTS = {
    # role extra -> (modules its entry points import, third-party modules it must not need)
    "collector": (["lustre_alloc.collectors.cli", "lustre_alloc.collectors.broker_cli"],
                  ["numpy", "ortools", "networkx", "prometheus_client", "matplotlib", "rich",
                   "darshan", "ns"]),
    "mapper": (["lustre_alloc.mapper.service.cli"], ["matplotlib", "rich", "darshan", "ns"]),
}


@pytest.mark.parametrize("role", sorted(ROLE_IMPORTS))
def test_role_runs_without_the_other_roles_dependencies(role):
    modules, absent = ROLE_IMPORTS[role]
    # None in sys.modules makes "import x" fail as if x were not installed
    code = (f"import sys\nfor m in {absent!r}: sys.modules[m] = None\n"
            f"import importlib\nfor m in {modules!r}: importlib.import_module(m)\n"
            f"sys.modules[{modules[0]!r}].main(['--version'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=PROJECT_ROOT)
    assert r.returncode == 0 and r.stdout.startswith("lustre-alloc-"), r.stderr[-2000:]
