"""A process under the shim that never creates a file in scope pays nothing for it: no
libzmq or libmsgpack-c mapped, no helper thread (liblustre_alloc/la_libs.c, la_create.c).
The first create in scope loads them and starts the helper; LUSTRE_ALLOC_START=load
starts them with the process, as before."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import LIBDIR, assert_valid_layout

# Prints the process's threads and whether libzmq / libmsgpack-c are mapped, after
# the action given as argv[1]: "read" (a file outside scope), "create OUT" (a create in
# scope), "create_outside OUT" (a create outside scope).
PROBE = """
import os, sys
act = sys.argv[1]
if act == "read":
    open("/proc/self/status").read()
elif act.startswith("create"):
    with open(sys.argv[2], "w") as f:
        f.write("x")
maps = open("/proc/self/maps").read()
print(len(os.listdir("/proc/self/task")), "libzmq" in maps, "libmsgpack" in maps)
"""


def _probe(shim, *args, **env) -> tuple[int, bool, bool]:
    p = shim.run([sys.executable, "-c", PROBE, *args], **env)
    threads, zmq, msgpack = p.stdout.split()
    return int(threads), zmq == "True", msgpack == "True"


def test_a_process_that_never_creates_in_scope_maps_no_libzmq_and_has_no_helper(shim, tmp_path):
    assert _probe(shim, "read") == (1, False, False)
    assert _probe(shim, "create_outside", str(tmp_path / "elsewhere")) == (1, False, False)
    assert (tmp_path / "elsewhere").read_text() == "x"
    assert shim.records() == []


def test_the_first_create_in_scope_loads_libzmq_starts_the_helper_and_is_placed(shim):
    out = shim.data / "f"
    threads, zmq, msgpack = _probe(shim, "create", str(out))
    assert threads >= 2 and zmq and msgpack       # the helper, and libzmq's own I/O threads
    (rec,) = shim.records()
    assert rec["path"] == str(out) and rec["result"] == "layout"
    assert_valid_layout(rec)


def test_start_at_load_keeps_the_old_behaviour(shim):
    assert _probe(shim, "read", LUSTRE_ALLOC_START="load") == (2, True, True)


def test_the_shim_exports_only_the_calls_it_wraps_and_the_api():
    """la_libs.c defines zmq_* and msgpack_* stand-ins; exported, they would interpose the
    application's own libzmq (pyzmq's, an MPI tool's)."""
    nm = "nm"           # binutils: installed with the compiler that built the shim
    for lib, want in (("liblustre_alloc.so", {"open", "open64", "openat", "openat64", "creat",
                                              "creat64", "__open_2", "__open64_2",
                                              "__openat_2", "fopen", "fopen64", "close",
                                              "fclose"}),
                      ("liblustre_alloc_api.so", set())):
        out = subprocess.run([nm, "-D", "--defined-only", str(LIBDIR / lib)], check=True,
                             capture_output=True, text=True).stdout
        names = {line.split()[-1] for line in out.splitlines() if line.strip()}
        assert names == want | {"lustre_alloc_create", "lustre_alloc_query",
                                "lustre_alloc_ping"}, (lib, names)
        needed = subprocess.run(["objdump", "-p", str(LIBDIR / lib)], check=True,
                                capture_output=True, text=True).stdout
        assert "libzmq" not in needed and "msgpack" not in needed, lib


@pytest.mark.skipif(os.geteuid() != 0,
                    reason="only root can drop privileges (the tier runs it on Lustre as root: "
                           "tests/lustre/test_shim.py)")
def test_a_program_that_drops_privileges_and_never_creates_runs(shim):
    """glibc applies setresuid to every thread; a helper thread started at load got EPERM
    after setpriv's capset on the main thread, and glibc aborted the process
    (docs/client.md). Without a helper until the first create, nothing aborts."""
    p = shim.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "true"],
                 check=False)
    assert p.returncode == 0, (p.returncode, p.stderr)


def test_without_libzmq_creates_get_lustres_default_and_one_line_says_why(shim, tmp_path):
    """A node without libzmq (a package missing): the first create cannot start the helper;
    it and every later create get Lustre's default, none fails."""
    build = tmp_path / "build"
    subprocess.run(["make", "-s", "-C", str(LIBDIR), f"BUILD={build}", "ZMQ_SONAME=libzmq-absent.so.0",
                    str(build / "liblustre_alloc.so")], check=True, capture_output=True)
    script = ("import sys\nfor i in range(3):\n    open(sys.argv[1] + str(i), 'w').write('x')\n")
    p = shim.run([sys.executable, "-c", script, str(shim.data / "f")],
                 LD_PRELOAD=str(build / "liblustre_alloc.so"))
    assert [line for line in p.stderr.splitlines() if "libzmq-absent.so.0" in line] \
        == [p.stderr.strip()]
    recs = shim.records()
    assert len(recs) == 3 and all(r["result"] == "default" for r in recs), recs
    assert {r["reason"] for r in recs} == {"mapper_no_helper"}
    assert all((shim.data / f"f{i}").read_text() == "x" for i in range(3))
