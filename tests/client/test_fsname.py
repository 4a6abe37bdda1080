"""LUSTRE_ALLOC_FSNAME: a mapper serving several file systems (state keyed by (fsname, OST
index)) places a shim's create only when the shim names its file system."""
from __future__ import annotations

import errno
import subprocess

import pytest

from .conftest import VENV_BIN, Mapper, free_port, wait_for_pong


@pytest.fixture(scope="module")
def two_fs_mapper():
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([str(VENV_BIN / "lustre-alloc-mapper"), "--bind", endpoint,
                             "--static-cluster", "4x2", "--fsname", "scratch", "--fsname", "home",
                             "--policy", "round_robin", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = Mapper(endpoint, proc, "real, two file systems")
    try:
        wait_for_pong(endpoint, proc)
        yield m
    finally:
        m.stop()


@pytest.mark.parametrize("fsname, result, reason", [
    ("scratch", "layout", ""),
    ("home", "layout", ""),
    ("", "default", f"mapper_error:{errno.EINVAL}"),      # which one? the mapper cannot tell
    ("nope", "default", f"mapper_error:{errno.ENODEV}"),  # not served here
])
def test_the_shim_names_its_file_system(two_fs_mapper, shim_run_factory, fsname, result, reason):
    run = shim_run_factory(two_fs_mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")
    target = run.data / "f"
    run.run(["sh", "-c", f"echo data > {target}"], LUSTRE_ALLOC_FSNAME=fsname)
    assert target.read_text() == "data\n"          # created either way: never fails the app
    [rec] = run.records()
    assert (rec["result"], rec["reason"]) == (result, reason)
    if result == "layout":
        assert rec["osts"] != ""
