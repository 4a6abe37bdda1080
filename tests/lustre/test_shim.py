"""The shim on a real Lustre 2.17.0 client: every file gets the layout it asked for (the
mapper's list, or the program's or user's own), what the application sees matches plain
Lustre, and the record says what Lustre did. The stand-in mapper
(:class:`lustre_alloc.selftest.responder.ListResponder`) answers with the lists each test sets."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.common.record_file import read_records
from lustre_alloc.selftest.responder import ListResponder

from .conftest import (FSNAME, NOBODY, SHIM, all_osts_ready, lctl_get, lctl_set, osp, rule,
                       sh, wait_for)

MIB = 1 << 20


def layout(path: Path) -> ll.Layout | None:
    """The file's whole layout (``lustre.lov``, as liblustreapi reads it); None without."""
    try:
        return ll.parse(os.getxattr(path, "lustre.lov"))
    except OSError as exc:
        if exc.errno == errno.ENODATA:
            return None
        raise


def first_osts(lay: ll.Layout | None) -> list[int]:
    if lay is None:
        return []
    return lay.components[0].osts if lay.components else lay.osts


@pytest.fixture
def mapper():
    with ListResponder() as m:
        yield m


def shim_env(mapper: ListResponder, record: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.update(LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=mapper.endpoint,
               LUSTRE_ALLOC_TIMEOUT_MS="10000", LUSTRE_ALLOC_RECORD=str(record),
               LUSTRE_ALLOC_LEASE="0")
    env.update(extra)
    return env


def python(code: str, env: dict[str, str], user: int | None = None) -> dict:
    """Run ``code`` in a Python child (it fills ``out``); returns ``out``."""
    prog = ("import errno, fcntl, json, os, sys\nout = {}\ntry:\n"
            + textwrap.indent(textwrap.dedent(code), "    ")
            + "\nexcept OSError as e:\n    out['error'] = errno.errorcode[e.errno]\n"
            "print('OUT ' + json.dumps(out))\n")
    cmd = [sys.executable, "-c", prog]
    if user is not None:
        # setpriv itself runs under the shim: it creates nothing, so the shim starts no
        # helper thread in it, and glibc's setxid has no thread that cannot follow the
        # privilege drop (nptl_setxid.c setxid_error(): it aborted while the helper
        # started at load; docs/client.md)
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return __import__("json").loads([x for x in p.stdout.splitlines()
                                      if x.startswith("OUT ")][-1][4:])


WRITE = """
fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
out['written'] = os.write(fd, b'x' * SIZE)
os.close(fd)
"""


def create(path: Path, env: dict[str, str], size: int = 65536) -> dict:
    return python(f"PATH = {str(path)!r}\nSIZE = {size}\n" + WRITE, env)


def records_for(record: Path, path: Path) -> list[dict]:
    return [r for r in read_records(record) if r["path"] == str(path)] if record.exists() else []


def test_an_explicit_list_is_the_files_layout_in_order(work, mapper, tmp_path):
    """lod_qos.c lod_alloc_ost_list(): a LOV_USER_MAGIC_SPECIFIC list is the layout, in
    its order (rule 3 of docs/reference/lustre-semantics.md)."""
    sh("lfs", "setstripe", "-c", "2", str(work))
    mapper.answer_with([3, 1])
    f = work / "f"
    out = create(f, shim_env(mapper, tmp_path / "rec"))
    got = first_osts(layout(f))
    (rec,) = records_for(tmp_path / "rec", f)
    rule("a SPECIFIC list is applied as given, in order", "lod_qos.c lod_alloc_ost_list()",
         "lustre_model.c lm_instantiate_blob(): the list, in order", f"asked [3, 1], got {got}",
         got == [3, 1])
    assert out == {"written": 65536} and got == [3, 1]
    assert (rec["result"], rec["osts"], rec["asked"]) == ("layout", "3,1", "3,1")


def test_a_file_created_without_any_stripe_size_gets_lustres_default_stripe_size(
        work, mapper, tmp_path):
    """lod_qos.c lod_qos_parse_config() -> lod_adjust_stripe_size(): 0 is lov.stripesize
    (4 MiB from 2.16.0); the shim had set 1 MiB."""
    plain = work / "plain"
    plain.write_bytes(b"x")
    mapper.answer_with([2])
    f = work / "shim"
    create(f, shim_env(mapper, tmp_path / "rec"))
    want, got = layout(plain).stripe_size, layout(f).stripe_size
    rule("a list with stripe size 0 gets the LOD default stripe size",
         "lod_qos.c lod_qos_parse_config(), lod_object.c lod_adjust_stripe_size()",
         "lustre_model.c: 0 -> default_size (4 MiB)", f"plain {want}, shim {got}",
         got == want == 4 * MIB)
    assert got == want == int(lctl_get(f"lod.{FSNAME}-MDT0000-mdtlov.stripesize"))


REFUSED = [
    # (OSP parameter, value, the OST, errno, what the stand-in encodes, source)
    ("max_create_count", "0", 1, errno.ENOBUFS, "nocreate -> ENOBUFS",
     "lod_qos.c lod_statfs_and_check(): OS_STATFS_NOCREATE"),
    ("active", "0", 2, errno.EREMOTEIO, "inactive -> EREMOTEIO",
     "lod_qos.c lod_alloc_ost_list(), lod_statfs_and_check(): OSP -ENOTCONN"),
]


@pytest.mark.parametrize("param,value,ost,err,standin,source", REFUSED,
                         ids=["drained", "inactive"])
def test_a_list_naming_an_ost_that_takes_no_object_gets_the_default_layout_and_writes(
        work, mapper, tmp_path, restore_osts, param, value, ost, err, standin, source):
    """LOD refuses a list naming an OST that cannot take an object (all or nothing); the
    shim asks Lustre's allocator for the same count, and the write succeeds."""
    lctl_set(f"{osp(ost, '*')}.{param}", value)
    mapper.answer_with([ost])
    f = work / "f"
    out = create(f, shim_env(mapper, tmp_path / "rec"))
    (rec,) = records_for(tmp_path / "rec", f)
    got = first_osts(layout(f))
    want = f"setstripe_rejected:{err}+default_layout"
    rule(f"a list naming an OST with {param}={value} is refused {errno.errorcode[err]}",
         source, f"lustre_model.c lm_ost_errno(): {standin}", rec["reason"],
         rec["reason"] == want)
    assert out == {"written": 65536} and got and ost not in got
    assert rec["reason"] == want
    assert rec["osts"] == ",".join(map(str, got)) and rec["asked"] == str(ost)


def test_every_ost_drained_the_open_fails_as_plain_lustres_and_leaves_no_file(
        work, mapper, tmp_path, restore_osts):
    """With no OST taking objects plain Lustre fails the open ENOSPC and leaves no file;
    the shim had reopened /proc/self/fd/N (llite reuses the write handle, och_usecount),
    leaving a file whose every write failed EBADF."""
    for i in range(4):
        lctl_set(f"{osp(i, '*')}.max_create_count", "0")

    def plain_fails() -> bool:
        probe = work / "probe"
        p = sh("dd", "if=/dev/zero", f"of={probe}", "bs=4k", "count=1", check=False)
        probe.unlink(missing_ok=True)
        return p.returncode != 0
    wait_for(plain_fails, what="plain creates failing (osp maxage)")
    mapper.answer_with([0])
    outcomes = {}
    for label, env in (("plain", None), ("shim", shim_env(mapper, tmp_path / "rec"))):
        f = work / label
        out = python(f"PATH = {str(f)!r}\nSIZE = 4096\n" + WRITE, env or dict(os.environ))
        outcomes[label] = (out.get("error"), out.get("written"), f.exists())
    rule("every OST drained: open(O_CREAT|O_WRONLY) fails ENOSPC, no file left",
         "mdt_open.c mdt_reint_open() -> mdt_create_data(); lod_qos.c lod_alloc_rr()",
         "lustre_model.c lm_after_open(): a failed create is undone", str(outcomes),
         outcomes["plain"] == ("ENOSPC", None, False))
    assert outcomes["shim"] == outcomes["plain"] == ("ENOSPC", None, False)
    assert records_for(tmp_path / "rec", work / "shim") == []


def test_a_reopen_through_proc_self_fd_makes_no_layout(work, restore_osts):
    """llite/file.c ll_file_open(): the write open handle is reused (och_usecount), no MDS
    open, no layout: what the shim's old fallback relied on does not happen."""
    f = work / "f"
    out = python(f"""
fd = os.open({str(f)!r}, os.O_WRONLY | os.O_CREAT | os.O_EXCL | 0o400 | 0o20000, 0o644)
fd2 = os.open('/proc/self/fd/%d' % fd, os.O_WRONLY)
try:
    os.write(fd2, b'x')
    out['write'] = 'ok'
except OSError as e:
    out['write'] = errno.errorcode[e.errno]
""", dict(os.environ))
    rule("a /proc/self/fd reopen of a file held for write makes no layout",
         "llite/file.c ll_file_open(): och_usecount",
         "lustre_model.c lm_after_open(): via_fd_link", f"write: {out.get('write')}, "
         f"layout: {layout(f)}", out.get("write") == "EBADF" and layout(f) is None)
    assert out.get("write") == "EBADF" and layout(f) is None


def test_leased_layouts_are_the_files_layouts(work, mapper, tmp_path):
    """Protocol v2 leases: every file of a lease gets its list."""
    mapper.answer_with([2])
    env = shim_env(mapper, tmp_path / "rec", LUSTRE_ALLOC_LEASE="1")
    out = python(f"""
for i in range(20):
    with open({str(work)!r} + '/f%d' % i, 'wb') as fh:
        fh.write(b'x' * 4096)
out['ok'] = 1
""", env)
    got = {first_osts(layout(work / f"f{i}"))[0] for i in range(20)}
    assert out == {"ok": 1} and got == {2}
    assert any(a.op == "lease" for a in mapper.asked)


def test_a_plain_directory_default_is_asked_for_and_kept(work, mapper, tmp_path):
    """lod_object.c lod_ah_init(): the directory's count and size; the shim asks for them."""
    sh("lfs", "setstripe", "-c", "2", "-S", "2M", str(work))
    mapper.answer_with([1, 3])
    f = work / "f"
    create(f, shim_env(mapper, tmp_path / "rec"))
    lay = layout(f)
    assert mapper.asked[-1].stripe_count == 2 and mapper.asked[-1].stripe_size == 2 * MIB
    assert lay.osts == [1, 3] and lay.stripe_size == 2 * MIB


def test_a_pfl_default_places_its_first_component_and_lustre_the_rest(
        work, mapper, tmp_path):
    """lod_qos.c lod_qos_prep_create(): a component is instantiated when I/O reaches it;
    the later one is Lustre's, and the write that reaches it succeeds."""
    sh("lfs", "setstripe", "-E", "1M", "-c", "1", "-E", "-1", "-c", "2", str(work))
    mapper.answer_with([3])
    f = work / "f"
    out = create(f, shim_env(mapper, tmp_path / "rec"), size=2 * MIB + 65536)
    comps = layout(f).components
    rule("a PFL default's later component is instantiated by the write that reaches it",
         "lod_object.c lod_declare_instantiate_components()",
         "lustre_model.c lm_before_write()",
         f"{[(c.start, c.osts, bool(c.flags & ll.LCME_FL_INIT)) for c in comps]}",
         len(comps) == 2 and comps[0].osts == [3] and len(comps[1].osts) == 2)
    assert out == {"written": 2 * MIB + 65536}
    assert len(comps) == 2 and comps[0].osts == [3] and len(comps[1].osts) == 2


def test_a_sel_default_is_left_to_lustre(work, mapper, tmp_path):
    """A self-extending default (lfs setstripe -z) is Lustre's to grow: not asked."""
    sh("lfs", "setstripe", "-E", "-1", "-c", "1", "-z", "64M", str(work))
    f = work / "f"
    out = create(f, shim_env(mapper, tmp_path / "rec"))
    (rec,) = records_for(tmp_path / "rec", f)
    comps = layout(f).components
    assert out == {"written": 65536} and rec["reason"] == "dir_sel" and not mapper.asked
    assert any(c.flags & ll.LCME_FL_EXTENSION for c in comps)


def test_an_o_append_create_gets_lustres_append_layout(work, mapper, tmp_path):
    """mdd_object.c mdd_object_make_hint(): an O_APPEND create gets append_stripe_count
    stripes (mdd.*.append_stripe_count, 1), not the directory's 2; the shim leaves it."""
    sh("lfs", "setstripe", "-c", "2", str(work))
    mapper.answer_with([0, 1])
    counts = {}
    for label, env in (("plain", dict(os.environ)),
                       ("shim", shim_env(mapper, tmp_path / "rec"))):
        f = work / label
        python(f"os.close(os.open({str(f)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))",
               env)
        counts[label] = len(first_osts(layout(f)))
    rule("an O_APPEND create gets append_stripe_count stripes (1)",
         "mdd_object.c mdd_object_make_hint(), mdd_device.c append_stripe_count",
         "lustre_model.c lm_after_open(): append_count", str(counts), counts["plain"] == 1)
    assert counts == {"plain": 1, "shim": 1} and not mapper.asked


def test_a_0444_create_by_a_user_keeps_the_mappers_layout(work, mapper, tmp_path):
    """mdt_open.c makes the layout before the open's permission check: a user's
    SETSTRIPE on a 0444 file answers EACCES with the layout made, which the creating
    descriptor does not see until a write; the shim reads it back through a new open."""
    work.chmod(0o1777)
    shared = Path(tempfile.mkdtemp(prefix="la-user-", dir="/tmp"))
    shared.chmod(0o777)                     # the user's record (pytest's tmp is root's)
    record = shared / "rec"
    mapper.answer_with([2])
    probe = work / "probe"
    seen = python(f"""
fd = os.open({str(probe)!r}, os.O_WRONLY | os.O_CREAT | os.O_EXCL | 0o400 | 0o20000, 0o444)
try:
    fcntl.ioctl(fd, 0x4008669A, bytes.fromhex({ll.specific([2], 0).hex()!r}))
    out['setstripe'] = 'ok'
except OSError as e:
    out['setstripe'] = errno.errorcode[e.errno]
buf = bytearray(4096)
buf[0:4] = (0x0BD30BD0).to_bytes(4, 'little')
buf[28:30] = (100).to_bytes(2, 'little')
try:
    fcntl.ioctl(fd, 0x4008669B, buf)
    out['fd_getstripe'] = int.from_bytes(buf[48 + 20:48 + 24], 'little')
except OSError as e:
    out['fd_getstripe'] = errno.errorcode[e.errno]
try:
    os.write(fd, b'x')
    out['fd_write'] = 'ok'
except OSError as e:
    out['fd_write'] = errno.errorcode[e.errno]
""", dict(os.environ), user=NOBODY)
    by_path = first_osts(layout(probe))
    rule("SETSTRIPE by a user on a 0444 file it created: EACCES; the layout is made "
         "(mdt_open.c: before the permission check) but the creating descriptor never "
         "sees it",
         "mdt_open.c mdt_reint_open(); llite/file.c ll_lov_setstripe_ea_info()",
         "lustre_model.c lm_setstripe(): no owner write -> layout made, EACCES; the "
         "descriptor's GETSTRIPE ENODATA until a write refreshes it",
         f"{seen}, layout by path {by_path}",
         seen == {"setstripe": "EACCES", "fd_getstripe": "ENODATA", "fd_write": "ok"}
         and by_path == [2])
    f = work / "ro"
    out = python(f"""
fd = os.open({str(f)!r}, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
out['written'] = os.write(fd, b'x')
""", shim_env(mapper, record), user=NOBODY)
    (rec,) = records_for(record, f)
    assert out == {"written": 1} and first_osts(layout(f)) == [2]
    assert (rec["result"], rec["reason"], rec["osts"]) == \
        ("layout", f"setstripe_late:{errno.EACCES}", "2")


@pytest.mark.parametrize("args,want", [(["-c", "4"], 4), (["-o", "1,3"], [1, 3]),
                                       (["-c", "1", "-i", "2"], [2])],
                         ids=["count", "ost-list", "offset"])
def test_lfs_setstripe_of_a_new_file_under_the_shim_gets_what_it_asked(
        work, mapper, tmp_path, args, want):
    """liblustreapi opens with O_LOV_DELAY_CREATE and sets its own layout
    (llapi_file_open_param()); the shim had taken the open over ("stripe already set")."""
    mapper.answer_with([0])
    f = work / "f"
    p = subprocess.run(["lfs", "setstripe", *args, str(f)],
                       env=shim_env(mapper, tmp_path / "rec"), capture_output=True, text=True)
    got = first_osts(layout(f))
    assert p.returncode == 0, p.stderr
    assert (len(got) if isinstance(want, int) else got) == want
    assert not mapper.asked


def test_a_directory_default_naming_a_start_ost_is_left_to_lustre(work, mapper, tmp_path):
    """lfs setstripe -i 2 -c 1 DIR: LOD starts at OST 2 (lod_qos.c
    lod_ost_alloc_specific()); the shim had placed the file elsewhere."""
    sh("lfs", "setstripe", "-i", "2", "-c", "1", str(work))
    mapper.answer_with([0])
    f = work / "f"
    create(f, shim_env(mapper, tmp_path / "rec"))
    (rec,) = records_for(tmp_path / "rec", f)
    assert first_osts(layout(f)) == [2] and rec["reason"] == "dir_offset"


LLAPI = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <lustre/lustreapi.h>
int main(int argc, char **argv)
{
	struct llapi_layout *l = llapi_layout_alloc();
	llapi_layout_stripe_count_set(l, 3);
	int fd = llapi_layout_file_create(argv[1], O_WRONLY, 0644, l);
	if (fd < 0) { perror("llapi_layout_file_create"); return 1; }
	return write(fd, "x", 1) == 1 ? 0 : 2;
}
"""


def test_an_llapi_layout_create_under_the_shim_gets_its_layout(work, mapper, tmp_path):
    """llapi_layout_file_create(): O_LOV_DELAY_CREATE then its own SETSTRIPE."""
    src, exe = tmp_path / "llapi.c", tmp_path / "llapi"
    src.write_text(LLAPI)
    sh("gcc", "-o", str(exe), str(src), "-llustreapi")
    mapper.answer_with([0])
    f = work / "f"
    p = subprocess.run([str(exe), str(f)], env=shim_env(mapper, tmp_path / "rec"),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert len(first_osts(layout(f))) == 3 and not mapper.asked


def test_cp_dd_and_python_write_under_the_shim_with_a_drained_ost_in_the_lists(
        work, mapper, tmp_path, restore_osts):
    lctl_set(f"{osp(1, '*')}.max_create_count", "0")
    mapper.answer_with([1])
    src = tmp_path / "src"
    src.write_bytes(os.urandom(256 * 1024))
    env = shim_env(mapper, tmp_path / "rec", LUSTRE_ALLOC_LEASE="1")
    script = (f"for i in 1 2 3 4 5; do cp {src} {work}/cp$i && "
              f"dd if={src} of={work}/dd$i bs=64k status=none || exit 1; done")
    assert subprocess.run(["sh", "-c", script], env=env).returncode == 0
    python(f"open({str(work)!r} + '/py', 'wb').write(open({str(src)!r}, 'rb').read())", env)
    files = sorted(work.iterdir())
    assert len(files) == 11
    for f in files:
        assert f.read_bytes() == src.read_bytes()
        assert first_osts(layout(f)) and 1 not in first_osts(layout(f))


@pytest.mark.parametrize("own_count", [None, 2], ids=["directory-default", "env-count"])
def test_a_class_left_to_lustre_is_placed_by_lods_allocator_with_the_layout_asked(
        work, mapper, tmp_path, own_count):
    """A lease answered ``allocator: "lustre"`` (the default mcmf on alike OSTs): the shim
    creates plainly (the directory's 1 stripe) or, with the environment's stripe count,
    with ``SETSTRIPE`` of that count and no start OST (``lmm_stripe_offset`` -1:
    lod_qos.c lod_qos_parse_config() keeps LOD's choice); LOD's round-robin places the
    files over every OST, and the record says ``lustre_allocator``."""
    sh("lfs", "setstripe", "-c", "1", str(work))
    mapper.leave_to_lustre()
    extra = {"LUSTRE_ALLOC_STRIPE_COUNT": str(own_count)} if own_count else {}
    env = shim_env(mapper, tmp_path / "rec", LUSTRE_ALLOC_LEASE="1", **extra)
    code = ("for i in range(8):\n"
            "    fd = os.open(f'{DIR}/f{i}', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n"
            "    os.write(fd, b'x' * 65536)\n    os.close(fd)\n")
    python(f"DIR = {str(work)!r}\n" + code, env)
    got = [first_osts(layout(work / f"f{i}")) for i in range(8)]
    recs = [r for r in read_records(tmp_path / "rec")]
    want = own_count or 1
    used = {o for osts in got for o in osts}
    rule("a create with no OST list (plain, or SETSTRIPE with offset -1) is placed by LOD",
         "lod_qos.c lod_qos_parse_config(), lod_alloc_rr()",
         "lustre_model.c: offset -1 -> the model's allocator",
         f"stripes per file {sorted({len(g) for g in got})}, OSTs used {sorted(used)}",
         all(len(g) == want for g in got) and len(used) > 1)
    assert all(len(g) == want for g in got), got
    assert len(used) > 1, got
    assert len(recs) == 8 and {r["reason"] for r in recs} == {"lustre_allocator"}, recs[:2]
    assert [a.op for a in mapper.asked] == ["lease"], mapper.asked
