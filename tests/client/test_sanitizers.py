"""Memory checkers over the shim: valgrind --leak-check=full on programs
under LD_PRELOAD and on the explicit API, and an ASan/UBSan build of the
library and its C tests.  Small runs: the point is every code path once
(mapper answering, mapper stopped, threads, fork), not volume."""
from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import LIBDIR, parse_records

VALGRIND = ["valgrind", "-q", "--leak-check=full", "--errors-for-leak-kinds=definite,possible",
            "--error-exitcode=99", "--track-origins=no"]
# valgrind is ~20x slower: give the mapper round trip room, so that the
# checked path is the one with a layout, not the timeout fallback
SLOW_TIMEOUT_MS = "5000"


def _env(endpoint: str, data, record, preload: str | None, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LUSTRE_ALLOC_", "ASAN_", "UBSAN_"))}
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(LUSTRE_ALLOC_MAPPER=endpoint, LUSTRE_ALLOC_PATHS=str(data),
               LUSTRE_ALLOC_RECORD=str(record), LUSTRE_ALLOC_TIMEOUT_MS=SLOW_TIMEOUT_MS)
    env.update(extra)
    return env


def _run(cmd, env, timeout=120):
    p = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


@pytest.mark.parametrize("args,files", [(["-t", "3", "-n", "10"], 30),
                                        (["-a", "fopen", "-n", "10"], 10)])
def test_valgrind_clean_under_preload_with_mapper(shim_lib, real_mapper, create_files, tmp_path,
                                                  args, files):
    data, rec = tmp_path / "d", tmp_path / "rec.tsv"
    data.mkdir()
    _run(VALGRIND + [create_files, *args, data],
         _env(real_mapper.endpoint, data, rec, str(shim_lib)))
    recs = parse_records(rec)
    assert len(recs) == files and all(r["result"] == "layout" for r in recs)


def test_valgrind_clean_under_preload_with_mapper_stopped(shim_lib, dead_endpoint, create_files,
                                                          tmp_path):
    data, rec = tmp_path / "d", tmp_path / "rec.tsv"
    data.mkdir()
    _run(VALGRIND + [create_files, "-n", "3", data],
         _env(dead_endpoint, data, rec, str(shim_lib), LUSTRE_ALLOC_TIMEOUT_MS="50",
              LUSTRE_ALLOC_RETRY_MS="0"))
    assert [r["reason"] for r in parse_records(rec)] == ["mapper_unreachable"] * 3


def test_valgrind_clean_across_fork(shim_lib, real_mapper, create_files, tmp_path):
    data, rec = tmp_path / "d", tmp_path / "rec.tsv"
    data.mkdir()
    supp = LIBDIR / "tests" / "valgrind-fork.supp"
    _run(VALGRIND + [f"--suppressions={supp}", create_files, "-f", "-n", "5", data],
         _env(real_mapper.endpoint, data, rec, str(shim_lib)))
    assert len(parse_records(rec)) == 11


def test_valgrind_clean_explicit_api(shim_lib, real_mapper, tmp_path):
    rec = tmp_path / "rec.tsv"
    _run(VALGRIND + [LIBDIR / "tests" / "test_api", "up", tmp_path],
         _env(real_mapper.endpoint, tmp_path, rec, None))
    assert parse_records(rec)[0]["result"] == "layout"


@pytest.fixture(scope="module")
def san_build(shim_lib):
    """The library and C tests built with -fsanitize=address,undefined."""
    subprocess.run(["make", "-s", "-C", str(LIBDIR), "SAN=1", "BUILD=build-san"], check=True)
    libasan = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True,
                             text=True, check=True).stdout.strip()
    return LIBDIR / "build-san", libasan


SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=98",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}


def test_asan_ubsan_unit_tests_and_api(san_build, real_mapper, tmp_path):
    build, _ = san_build
    (tmp_path / "u").mkdir()
    p = _run([build / "tests" / "test_layout_abi", tmp_path / "u"],
             _env(real_mapper.endpoint, tmp_path, tmp_path / "r0", None, **SAN_ENV))
    assert "PASSED" in p.stdout
    p = _run([build / "tests" / "test_pfl", tmp_path / "u"],
             _env(real_mapper.endpoint, tmp_path, tmp_path / "r0", None, **SAN_ENV))
    assert "PASSED" in p.stdout
    p = _run([build / "tests" / "test_api", "up", tmp_path],
             _env(real_mapper.endpoint, tmp_path, tmp_path / "r1", None, **SAN_ENV))
    assert "PASSED" in p.stdout


@pytest.mark.parametrize("args,files", [(["-t", "8", "-n", "50"], 400),
                                        (["-f", "-t", "2", "-n", "20"], 81)])
def test_asan_ubsan_preloaded_threads_and_fork(san_build, real_mapper, tmp_path, args, files):
    build, libasan = san_build
    data, rec = tmp_path / "d", tmp_path / "rec.tsv"
    data.mkdir()
    p = _run([build / "tests" / "la_create_files", *args, data],
             _env(real_mapper.endpoint, data, rec, f"{libasan}:{build / 'liblustre_alloc.so'}",
                  **SAN_ENV))
    assert "runtime error" not in p.stderr and "AddressSanitizer" not in p.stderr
    recs = parse_records(rec)
    assert len(recs) == files and all(r["result"] == "layout" for r in recs)


# ---- the shim's safety paths under the checkers ----

def _safety_tree(tmp_path):
    """A data directory whose default layout (user xattr seam) carries a pool, a PFL
    directory inside it, and a symbolic link that leads back into it through '..'."""
    from .test_shim_safety import LOV_XATTR, lov_comp_header, lov_v3
    data = tmp_path / "d"
    (data / "real" / "sub").mkdir(parents=True)
    (data / "pfl").mkdir()
    os.setxattr(data / "real", LOV_XATTR, lov_v3(2, 2 << 20, "flash"))
    os.setxattr(data / "pfl", LOV_XATTR, lov_comp_header())
    (data / "lnk").symlink_to(data / "real" / "sub")
    return data


def _safety_runs(create_files, data) -> list[list]:
    """One create through the link and '..', one in the pool directory, one in the PFL one
    (separate runs: each is one process under the checker)."""
    return [[create_files, "-n", "1", "-p", "a", f"{data}/lnk/.."],
            [create_files, "-n", "1", "-p", "b", data / "real"],
            [create_files, "-n", "1", "-p", "c", data / "pfl"]]


def _safety_records(data, rec) -> dict[str, dict[str, str]]:
    recs = {os.path.relpath(r["path"], data): r for r in parse_records(rec)}
    assert {"real/amain_0_0", "real/bmain_0_0", "pfl/cmain_0_0"} <= set(recs)
    assert recs["pfl/cmain_0_0"]["reason"] == "dir_composite"
    return recs


def test_valgrind_clean_signal_handler_creates(shim_lib, real_mapper, tmp_path):
    data, rec = tmp_path / "d", tmp_path / "rec.tsv"
    data.mkdir()
    # 100 creates from the SIGALRM handler (every 5 ms: valgrind is ~20x slower)
    p = _run(VALGRIND + [LIBDIR / "tests" / "la_signal_creates", data, "100", "100", "5000"],
             _env(real_mapper.endpoint, data, rec, str(shim_lib), LUSTRE_ALLOC_START="load"),
             timeout=180)     # its first create is a handler's (test_shim_safety.py)
    assert "created=100 failed=0" in p.stdout
    assert len(parse_records(rec)) == 100


def test_valgrind_clean_dir_defaults_links_and_pfl(shim_lib, standin, create_files, tmp_path):
    m = standin("normal")
    data, rec = _safety_tree(tmp_path), tmp_path / "rec.tsv"
    for cmd in _safety_runs(create_files, data):
        _run(VALGRIND + cmd, _env(m.endpoint, data, rec, str(shim_lib)))
    recs = _safety_records(data, rec)
    assert recs["real/amain_0_0"]["pool"] == recs["real/bmain_0_0"]["pool"] == "flash"
    assert recs["real/amain_0_0"]["result"] == "layout"


def test_asan_ubsan_safety_paths(san_build, standin, tmp_path):
    build, libasan = san_build
    m = standin("normal")
    data, rec = _safety_tree(tmp_path), tmp_path / "rec.tsv"
    env = _env(m.endpoint, data, rec, f"{libasan}:{build / 'liblustre_alloc.so'}", **SAN_ENV,
               LUSTRE_ALLOC_TIMEOUT_MS="2000")
    for cmd in _safety_runs(build / "tests" / "la_create_files", data):
        p = _run(cmd, env)
        assert "runtime error" not in p.stderr and "AddressSanitizer" not in p.stderr
    recs = _safety_records(data, rec)
    assert recs["real/amain_0_0"]["pool"] == recs["real/bmain_0_0"]["pool"] == "flash"
    assert recs["real/amain_0_0"]["stripe_count"] == "2"
    p = _run([build / "tests" / "la_signal_creates", data / "real", "500", "60", "1000"],
             {**env, "LUSTRE_ALLOC_START": "load"})
    assert "created=500 failed=0" in p.stdout
    assert "runtime error" not in p.stderr and "AddressSanitizer" not in p.stderr


def test_asan_ubsan_explicit_api_pool(san_build, standin, tmp_path):
    build, _ = san_build
    m = standin("normal")
    p = _run([build / "tests" / "test_api", "pool", tmp_path],
             _env(m.endpoint, tmp_path, tmp_path / "rec.tsv", None, **SAN_ENV,
                  LUSTRE_ALLOC_TIMEOUT_MS="2000"))
    assert "PASSED" in p.stdout
    assert parse_records(tmp_path / "rec.tsv")[0]["pool"] == "ssd"


@pytest.mark.parametrize("server,files,result", [("mapper", 3, "layout"), ("rogue", 2, "default")])
def test_valgrind_clean_curve(shim_lib, curve_mapper, curve_keys, create_files, tmp_path,
                              server, files, result):
    data, rec = tmp_path / "d", tmp_path / "rec.tsv"
    data.mkdir()
    _run(VALGRIND + [create_files, "-n", str(files), data],
         _env(curve_mapper.endpoint, data, rec, str(shim_lib),
              LUSTRE_ALLOC_TIMEOUT_MS="5000" if result == "layout" else "300",
              LUSTRE_ALLOC_CURVE_SERVER_KEY=str(curve_keys[server][0]),
              LUSTRE_ALLOC_CURVE_SECRET_KEY=str(curve_keys["client"][1])))
    assert [r["result"] for r in parse_records(rec)] == [result] * files
