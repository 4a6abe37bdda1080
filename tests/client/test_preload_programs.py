"""Real programs under LD_PRELOAD=liblustre_alloc.so against the real mapper
(static 4x2 cluster on 127.0.0.1): every new file is created, recorded once,
with a valid OST list from the mapper; nothing else is touched."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from collections import Counter

from .conftest import assert_valid_layout


def _by_path(records):
    return {r["path"]: r for r in records}


def test_cp_creates_destination_on_mapper_osts(shim):
    src = shim.root / "src.bin"
    src.write_bytes(os.urandom(200_000))
    shim.run(["cp", src, shim.data / "copy.bin"])
    assert (shim.data / "copy.bin").read_bytes() == src.read_bytes()
    (rec,) = shim.records()
    assert rec["path"] == str(shim.data / "copy.bin")
    assert rec["backend"] == "record"
    assert_valid_layout(rec)


def test_dd_output_file_recorded_with_layout(shim):
    shim.run(["dd", "if=/dev/zero", f"of={shim.data / 'dd.out'}", "bs=64k", "count=8"])
    assert (shim.data / "dd.out").stat().st_size == 8 * 65536
    (rec,) = shim.records()
    assert rec["path"] == str(shim.data / "dd.out")
    assert_valid_layout(rec)


def test_tar_extract_records_every_file_and_no_directory(shim):
    tree = shim.root / "tree"
    (tree / "sub").mkdir(parents=True)
    names = [f"sub/f{i}.txt" for i in range(6)] + ["top.txt"]
    for n in names:
        (tree / n).write_text(n)
    archive = shim.root / "t.tar"
    with tarfile.open(archive, "w") as t:
        t.add(tree, arcname="tree")
    shim.run(["tar", "-xf", archive, "-C", shim.data])
    recs = _by_path(shim.records())
    want = {str(shim.data / "tree" / n) for n in names}
    assert set(recs) == want
    for n in names:
        assert (shim.data / "tree" / n).read_text() == n
        assert_valid_layout(recs[str(shim.data / "tree" / n)])


def test_python_open_w_is_placed_and_stripe_hints_are_sent(shim):
    target = shim.data / "py.txt"
    shim.run([sys.executable, "-c", f"open({str(target)!r}, 'w').write('hello')"],
             LUSTRE_ALLOC_STRIPE_COUNT="3", LUSTRE_ALLOC_STRIPE_SIZE="4M")
    assert target.read_text() == "hello"
    (rec,) = shim.records()
    assert rec["req_count"] == "3" and rec["req_size"] == str(4 << 20)
    osts = assert_valid_layout(rec, count=3)
    assert int(rec["stripe_size"]) == 4 << 20
    assert len(set(osts)) == 3


def test_every_create_call_of_a_c_program_is_intercepted(shim, create_files):
    for api in ["open", "open64", "openat", "creat", "fopen", "fopen64"]:
        shim.run([create_files, "-a", api, "-n", "3", "-p", f"{api}_", shim.data])
    recs = shim.records()
    ops = Counter(r["op"] for r in recs)
    # openat(dirfd, relative name) is resolved through the directory fd
    assert ops == {api: 3 for api in ["open", "open64", "openat", "creat", "fopen", "fopen64"]}
    for r in recs:
        assert_valid_layout(r)
        assert os.path.exists(r["path"])
    fopened = shim.data / "fopen_main_0_0"
    assert fopened.read_text() == "fopen_main_0_0\n"


def test_sixteen_threads_thousand_creates_each_all_recorded(shim, create_files):
    p = shim.run([create_files, "-t", "16", "-n", "1000", shim.data], timeout=120)
    assert "created=16000" in p.stdout
    recs = shim.records()
    assert len(recs) == 16000
    assert len({r["path"] for r in recs}) == 16000
    assert len({r["tid"] for r in recs}) == 16
    for r in recs:
        assert_valid_layout(r)
    assert len(os.listdir(shim.data)) == 16000


def test_fork_child_and_parent_both_get_layouts(shim, create_files):
    p = shim.run([create_files, "-f", "-t", "2", "-n", "50", shim.data])
    assert "parent created=100" in p.stdout and "child created=100" in p.stdout
    recs = shim.records()
    assert len(recs) == 201
    pids = Counter(r["pid"] for r in recs)
    assert len(pids) == 2 and sorted(pids.values()) == [100, 101]
    for r in recs:
        assert_valid_layout(r)


def test_existing_files_reads_and_other_paths_are_untouched(shim, tmp_path):
    existing = shim.data / "existing.txt"
    existing.write_text("old\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    script = f"""
import os
open({str(existing)!r}, 'a').write('appended\\n')
open({str(existing)!r}, 'r').read()
os.close(os.open({str(existing)!r}, os.O_WRONLY | os.O_CREAT, 0o600))
os.listdir({str(shim.data)!r})
open({str(outside / 'new.txt')!r}, 'w').write('x')
"""
    shim.run([sys.executable, "-c", script])
    assert existing.read_text() == "old\nappended\n"
    assert (outside / "new.txt").exists()
    assert shim.records() == []


def test_application_flags_mode_and_errno_are_preserved(shim):
    script = f"""
import errno, os, stat
d = {str(shim.data)!r}
os.umask(0o022)
fd = os.open(d + '/m', os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DSYNC, 0o640)
assert os.fstat(fd).st_mode & 0o777 == 0o640
import fcntl
fl = fcntl.fcntl(fd, fcntl.F_GETFL)
assert fl & os.O_DSYNC and fl & os.O_ACCMODE == os.O_WRONLY, fl
assert not fl & 0o20000, 'FASYNC leaked'
os.close(fd)
# left to Lustre, never recorded: an O_APPEND create (the MDT's append layout,
# mdd_object_make_hint) and a program's own O_LOV_DELAY_CREATE (it sets its layout)
os.close(os.open(d + '/appended', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640))
os.close(os.open(d + '/delayed', os.O_WRONLY | os.O_CREAT | os.O_NOCTTY | 0o20000, 0o640))
fd = os.open(d + '/u', os.O_RDWR | os.O_CREAT, 0o777)
assert os.fstat(fd).st_mode & 0o777 == 0o755
os.close(fd)
for flags, want in [(os.O_WRONLY | os.O_CREAT | os.O_EXCL, errno.EEXIST)]:
    try:
        os.open(d + '/m', flags, 0o600)
    except OSError as e:
        assert e.errno == want, e
    else:
        raise SystemExit('O_EXCL on an existing file succeeded')
try:
    os.open(d + '/missing/dir/f', os.O_WRONLY | os.O_CREAT, 0o600)
except FileNotFoundError:
    pass
else:
    raise SystemExit('create in a missing directory succeeded')
os.chmod(d, 0o500)
try:
    if os.geteuid() != 0:
        try:
            os.open(d + '/denied', os.O_WRONLY | os.O_CREAT, 0o600)
        except PermissionError:
            pass
        else:
            raise SystemExit('create in a read-only directory succeeded')
finally:
    os.chmod(d, 0o700)
try:
    open(d + '/m', 'x')
except FileExistsError:
    pass
"""
    shim.run([sys.executable, "-c", script])
    recs = shim.records()
    assert sorted(os.path.basename(r["path"]) for r in recs) == ["m", "u"]


def test_job_identity_follows_lustre_jobid_rules(shim, create_files):
    shim.run([create_files, "-n", "1", "-p", "a", shim.data], LUSTRE_ALLOC_JOBID="ior.42")
    shim.run([create_files, "-n", "1", "-p", "b", shim.data], SLURM_JOB_ID="4242")
    shim.run([create_files, "-n", "1", "-p", "c", shim.data],
             LUSTRE_ALLOC_JOBID_VAR="PBS_JOBID", PBS_JOBID="77.pbs", SLURM_JOB_ID="1")
    shim.run([create_files, "-n", "1", "-p", "d", shim.data])
    jobs = [r["job"] for r in sorted(shim.records(), key=lambda r: r["path"])]
    assert jobs == ["ior.42", "4242", "77.pbs", f"la_create_files.{os.getuid()}"]


def test_disable_variable_passes_everything_through(shim, create_files):
    shim.run([create_files, "-n", "3", shim.data], LUSTRE_ALLOC_DISABLE="1")
    assert len(os.listdir(shim.data)) == 3
    assert shim.records() == []


def test_shim_loads_into_programs_that_never_create(shim):
    p = subprocess.run(["ls", "-la", str(shim.data)], env=shim.env(), capture_output=True, text=True)
    assert p.returncode == 0
    assert shim.records() == []


def test_record_file_is_private_and_never_followed_through_a_link(shim, tmp_path):
    script = f"""
import subprocess
open({str(shim.data / 'a.txt')!r}, 'w').write('a')
# the record descriptor is not inherited by exec'd programs (O_CLOEXEC)
out = subprocess.run(['sh', '-c', 'ls -l /proc/$$/fd'], close_fds=False,
                     capture_output=True, text=True).stdout
assert 'record' not in out, out
"""
    shim.run([sys.executable, "-c", script])
    assert shim.record.stat().st_mode & 0o777 == 0o600
    assert [os.path.basename(r["path"]) for r in shim.records()] == ["a.txt"]

    # a symbolic link planted where the record goes: refused, said once, the
    # link's target untouched, the application's files still created
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    shim.record.unlink()
    shim.record.symlink_to(victim)
    p = shim.run([sys.executable, "-c",
                  f"open({str(shim.data / 'b.txt')!r}, 'w'); open({str(shim.data / 'c.txt')!r}, 'w')"])
    assert victim.read_text() == "precious\n"
    assert (shim.data / "b.txt").exists() and (shim.data / "c.txt").exists()
    assert p.stderr.count("liblustre_alloc: record file") == 1
    assert "refused (a symbolic link)" in p.stderr
