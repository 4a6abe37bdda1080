"""The C unit tests (layout bytes, Lustre backend through its ioctl seam,
reply decoder, paths) and the explicit API, run from pytest."""
from __future__ import annotations

import os
import subprocess

from .conftest import LIBDIR, parse_records


def test_lov_user_md_bytes_and_lustre_backend_fallbacks(shim_lib, tmp_path):
    p = subprocess.run([LIBDIR / "tests" / "test_layout_abi", tmp_path], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASSED: 0 failure(s)" in p.stdout
    assert "FAIL" not in p.stdout


def test_composite_layout_bytes_at_the_ioctl_seam(shim_lib, tmp_path):
    p = subprocess.run([LIBDIR / "tests" / "test_pfl", tmp_path], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASSED: 0 failure(s)" in p.stdout and "FAIL" not in p.stdout


def _api_env(endpoint, record, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.pop("LD_PRELOAD", None)
    env.update(LUSTRE_ALLOC_MAPPER=endpoint, LUSTRE_ALLOC_RECORD=str(record), **extra)
    return env


def test_explicit_api_with_mapper(shim_lib, real_mapper, tmp_path):
    rec = tmp_path / "rec.tsv"
    p = subprocess.run([LIBDIR / "tests" / "test_api", "up", tmp_path], capture_output=True,
                       text=True, env=_api_env(real_mapper.endpoint, rec, LUSTRE_ALLOC_TIMEOUT_MS="5000"),
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    (r,) = parse_records(rec)
    assert r["op"] == "api" and r["result"] == "layout" and r["req_count"] == "2"
    assert r["stripe_size"] == str(4 << 20)


def test_explicit_api_without_mapper(shim_lib, dead_endpoint, tmp_path):
    rec = tmp_path / "rec.tsv"
    p = subprocess.run([LIBDIR / "tests" / "test_api", "down", tmp_path], capture_output=True,
                       text=True, env=_api_env(dead_endpoint, rec), timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    (r,) = parse_records(rec)
    assert r["result"] == "default" and r["reason"] == "mapper_unreachable"
