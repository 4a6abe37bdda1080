"""Safety of the shim inside an application: signal handlers that
create files, paths that leave through a symbolic link, directory default
layouts (pool, PFL, changed during a run), the explicit API's pool, and
CURVE between the shim and the real mapper.

Directory defaults: not on Lustre, the record backend reads a directory's
default layout from the user xattr ``user.lustre_alloc.lov`` holding the
bytes ``LL_IOC_LOV_GETSTRIPE`` gives on Lustre (the seam's other side; the
Lustre side is driven through its ioctl in test_layout_abi.c)."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import LIBDIR, assert_valid_layout, parse_records

LOV_XATTR = "user.lustre_alloc.lov"
LOV_USER_MAGIC_V1 = 0x0BD10BD0
LOV_USER_MAGIC_V3 = 0x0BD30BD0
LOV_USER_MAGIC_COMP_V1 = 0x0BD60BD0
LOV_PATTERN_RAID0 = 0x1


def lov_v3(stripe_count: int, stripe_size: int, pool: str = "") -> bytes:
    """lov_user_md_v3 as GETSTRIPE returns a directory default (48 bytes,
    docs/reference/lustre-client-layout-api.md "Packed layouts")."""
    return struct.pack("<IIQQIHH16s", LOV_USER_MAGIC_V3, LOV_PATTERN_RAID0, 0, 0, stripe_size,
                       stripe_count & 0xFFFF, 0xFFFF, pool.encode())


def lov_comp_header(entries: int = 2) -> bytes:
    """The 32-byte lov_comp_md_v1 header of a PFL default alone (its entries missing):
    magic, size, layout_gen, flags, entry_count, mirror_count."""
    return struct.pack("<IIIHHH", LOV_USER_MAGIC_COMP_V1, 32 + 48 * entries, 0, 0, entries,
                       0).ljust(32, b"\0")


def set_dir_default(directory: Path, value: bytes) -> None:
    os.setxattr(directory, LOV_XATTR, value)


FS_IOC_FSGETXATTR = 0x801C581F      # _IOR('X', 31, struct fsxattr), 28 bytes
FS_XFLAG_PROJINHERIT = 0x00000200


def _inherited_projid(directory: Path) -> int | None:
    """The project id a new file in ``directory`` gets, read as ``lfs project`` does; None
    where the file system does not say (then the shim sends none)."""
    import fcntl
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        buf = bytearray(28)
        fcntl.ioctl(fd, FS_IOC_FSGETXATTR, buf)
    except OSError:
        return None
    finally:
        os.close(fd)
    xflags, _, _, projid = struct.unpack_from("<IIII", buf)
    return projid if xflags & FS_XFLAG_PROJINHERIT else 0


def _requests(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [q for q in map(json.loads, log.read_text().splitlines()) if q["op"] == "alloc"]


# ---- signal handlers ----

def test_sigalrm_handler_creates_2000_files_while_main_thread_is_in_malloc(shim_run_factory,
                                                                            standin):
    """open(O_CREAT) is async-signal-safe in libc; under the shim too.  A timer every 500 us
    (longer than one create with the stand-in mapper, so the main thread runs, inside malloc,
    between two handlers); an earlier shim aborted or hung here in 3 of 3 runs. The
    program's first create is a handler's, so the helper starts at load
    (``LUSTRE_ALLOC_START=load``): starting it at the first create (dlopen, pthread_create)
    is the one step that is not signal-safe (docs/client.md)."""
    shim = shim_run_factory(standin("normal").endpoint, LUSTRE_ALLOC_TIMEOUT_MS="2000",
                            LUSTRE_ALLOC_START="load")
    prog = LIBDIR / "tests" / "la_signal_creates"
    for run in range(3):
        data = shim.data / f"run{run}"
        data.mkdir()
        # a hung create path is caught by the timeout, not by waiting forever
        p = shim.run([prog, data, "2000", "60", "500"], timeout=90, check=False)
        assert p.returncode == 0, (run, p.returncode, p.stdout, p.stderr)
        assert "created=2000 failed=0" in p.stdout
        assert len(os.listdir(data)) == 2000
    recs = shim.records()
    assert len(recs) == 6000
    # the handler's creates asked the mapper like any other
    assert sum(r["result"] == "layout" for r in recs) >= 5900


# ---- where the file really lands ----

def test_symlink_then_dotdot_is_checked_and_recorded_where_the_file_lands(shim, tmp_path):
    real = shim.data / "real"
    (real / "sub").mkdir(parents=True)
    (shim.data / "lnk").symlink_to(real / "sub")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (shim.data / "esc").symlink_to(outside / "sub")
    script = f"""
open({str(shim.data / 'lnk' / '..' / 'f')!r}, 'w').write('f')
open({str(shim.data / 'esc' / '..' / 'g')!r}, 'w').write('g')
"""
    shim.run([sys.executable, "-c", script])
    # "lustre/lnk/../f" is lustre/real/f, not the lexical lustre/f
    assert (real / "f").read_text() == "f" and not (shim.data / "f").exists()
    # "lustre/esc/../g" leaves LUSTRE_ALLOC_PATHS: created, not touched
    assert (outside / "g").read_text() == "g"
    (rec,) = shim.records()
    assert rec["path"] == str(real / "f")
    assert_valid_layout(rec)


# ---- directory defaults ----

def test_directory_default_changed_mid_run_is_seen_after_the_cache_time(shim_run_factory, standin):
    m = standin("normal")
    run = shim_run_factory(m.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="2000")
    d = run.data
    script = f"""
import os, time
d = {str(d)!r}
def default(count):
    os.setxattr(d, {LOV_XATTR!r}, {lov_v3(2, 1 << 20)[:28]!r} + count.to_bytes(2, 'little')
                + {lov_v3(2, 1 << 20)[30:]!r})
default(2)
open(d + '/a', 'w')
default(4)                      # lfs setstripe -d during the run
open(d + '/b', 'w')             # within the cache time: the cached default
time.sleep(1.3)
open(d + '/c', 'w')             # after it: the new default
"""
    run.run([sys.executable, "-c", script], LUSTRE_ALLOC_CACHE_S="1")
    counts = {Path(r["path"]).name: r["req_count"] for r in run.records()}
    assert counts == {"a": "2", "b": "2", "c": "4"}
    # no cache at all: seen at once
    (d / "a").unlink(), (d / "b").unlink(), (d / "c").unlink()
    run.record.unlink()
    run.run([sys.executable, "-c", script.replace("time.sleep(1.3)", "")],
            LUSTRE_ALLOC_CACHE_S="0")
    counts = {Path(r["path"]).name: r["req_count"] for r in run.records()}
    assert counts == {"a": "2", "b": "4", "c": "4"}


def test_pool_of_the_directory_default_goes_to_the_mapper_and_into_the_layout(
        shim_run_factory, standin, create_files, tmp_path):
    log = tmp_path / "requests.jsonl"
    m = standin("normal", log=log)
    run = shim_run_factory(m.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="2000")
    set_dir_default(run.data, lov_v3(3, 4 << 20, "flash"))
    run.run([create_files, "-n", "2", run.data])
    reqs = _requests(log)
    assert len(reqs) == 2
    assert all(q["pool"] == "flash" and q["stripe_count"] == 3 and q["stripe_size"] == 4 << 20
               for q in reqs)
    # who creates, for the admin's scope rules: the process's effective ids, and the project
    # id the file inherits when the file system tells it (FS_IOC_FSGETXATTR)
    assert all(q["uid"] == os.geteuid() and q["gid"] == os.getegid() for q in reqs)
    assert [q.get("projid") for q in reqs] == [_inherited_projid(run.data)] * 2
    for r in run.records():
        assert_valid_layout(r, count=3)
        assert r["pool"] == "flash" and r["stripe_size"] == str(4 << 20)
    # the environment's pool wins over the directory's (as lfs setstripe -p would)
    run.run([create_files, "-n", "1", "-p", "env", run.data], LUSTRE_ALLOC_POOL="ssd")
    assert _requests(log)[-1]["pool"] == "ssd" and run.records()[-1]["pool"] == "ssd"


def test_an_unreadable_composite_default_is_passed_through_untouched_and_counted(
        shim_run_factory, standin, create_files, tmp_path):
    log = tmp_path / "requests.jsonl"
    m = standin("normal", log=log)
    run = shim_run_factory(m.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="2000")
    set_dir_default(run.data, lov_comp_header())
    p = run.run([create_files, "-n", "3", run.data])
    assert "created=3" in p.stdout
    # a header without its entries cannot be placed (test_composite.py places real ones):
    # no flat OST list replaces the PFL layout
    assert _requests(log) == []
    recs = run.records()
    assert len(recs) == 3
    assert all(r["result"] == "default" and r["reason"] == "dir_composite" and r["osts"] == ""
               for r in recs)


def test_explicit_api_applies_the_hints_pool(shim_lib, standin, tmp_path):
    log = tmp_path / "requests.jsonl"
    m = standin("normal", log=log)
    rec = tmp_path / "rec.tsv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.pop("LD_PRELOAD", None)
    env.update(LUSTRE_ALLOC_MAPPER=m.endpoint, LUSTRE_ALLOC_RECORD=str(rec),
               LUSTRE_ALLOC_POOL="flash", LUSTRE_ALLOC_TIMEOUT_MS="2000")
    p = subprocess.run([LIBDIR / "tests" / "test_api", "pool", tmp_path], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    (q,) = _requests(log)
    assert q["pool"] == "ssd"
    (r,) = parse_records(rec)
    assert r["op"] == "api" and r["pool"] == "ssd" and r["result"] == "layout"


# ---- CURVE ----

def test_curve_shim_with_the_pinned_key_gets_layouts(shim_run_factory, curve_mapper, curve_keys,
                                                     create_files):
    run = shim_run_factory(curve_mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000",
                           LUSTRE_ALLOC_CURVE_SERVER_KEY=str(curve_keys["mapper"][0]),
                           LUSTRE_ALLOC_CURVE_SECRET_KEY=str(curve_keys["client"][1]))
    run.run([create_files, "-n", "3", run.data])
    recs = run.records()
    assert len(recs) == 3
    for r in recs:
        assert_valid_layout(r)


@pytest.mark.parametrize("server,client", [
    ("rogue", "client"),   # wrong server key pinned: the real mapper is not the one trusted
    ("mapper", "rogue"),   # a client key the mapper does not authorise
    (None, None),          # no CURVE at all towards a CURVE mapper
])
def test_curve_mismatch_gets_no_layout_and_lustres_default(shim_run_factory, curve_mapper,
                                                           curve_keys, create_files, server,
                                                           client):
    extra = {"LUSTRE_ALLOC_TIMEOUT_MS": "300", "LUSTRE_ALLOC_RETRY_MS": "0"}
    if server:
        extra["LUSTRE_ALLOC_CURVE_SERVER_KEY"] = str(curve_keys[server][0])
        extra["LUSTRE_ALLOC_CURVE_SECRET_KEY"] = str(curve_keys[client][1])
    run = shim_run_factory(curve_mapper.endpoint, **extra)
    p = run.run([create_files, "-n", "2", run.data])
    assert "created=2" in p.stdout
    recs = run.records()
    assert len(recs) == 2
    assert all(r["result"] == "default" and r["osts"] == "" and
               r["reason"] in ("mapper_unreachable", "mapper_timeout") for r in recs)


def test_curve_unusable_key_files_are_refused_with_a_message(shim_run_factory, curve_mapper,
                                                             curve_keys, create_files, tmp_path):
    run = shim_run_factory(curve_mapper.endpoint,
                           LUSTRE_ALLOC_CURVE_SERVER_KEY=str(curve_keys["mapper"][0]),
                           # the public file has no secret key
                           LUSTRE_ALLOC_CURVE_SECRET_KEY=str(curve_keys["client"][0]))
    p = run.run([create_files, "-n", "1", run.data])
    assert "liblustre_alloc: CURVE key file" in p.stderr and ".key_secret" in p.stderr
    (r,) = run.records()
    assert r["result"] == "default" and r["reason"] == "curve_keys"


def test_more_threads_than_slots_all_files_created_none_hangs(shim_run_factory, standin,
                                                             create_files):
    """200 threads creating at once (128 workspaces, 128 mapper calls): the ones beyond the
    slots wait for a free workspace within the timeout budget; every file is created and,
    with a mapper answering in time, every create is recorded."""
    shim = shim_run_factory(standin("normal").endpoint, LUSTRE_ALLOC_TIMEOUT_MS="2000")
    p = shim.run([create_files, "-t", "200", "-n", "3", shim.data], timeout=120)
    assert "created=600" in p.stdout
    assert len(os.listdir(shim.data)) == 600
    recs = shim.records()
    assert len(recs) == 600
    assert {r["reason"] for r in recs} <= {"", "mapper_busy"}


def test_without_paths_only_lustre_is_touched(shim, create_files):
    """LUSTRE_ALLOC_PATHS unset: eligibility is fstatfs == LL_SUPER_MAGIC of the real parent;
    this file system is not Lustre, so nothing is asked or recorded."""
    p = shim.run([create_files, "-n", "3", shim.data], LUSTRE_ALLOC_PATHS="")
    assert "created=3" in p.stdout
    assert shim.records() == []
