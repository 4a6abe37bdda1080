"""One test per rule of the Lustre client stand-in (liblustre_alloc/tests/lustre_model.c),
each naming the lustre-release source it restates (docs/reference/lustre-semantics.md).
Python children on the modelled mount make the system calls, as any program would."""
from __future__ import annotations

import errno
import os

import pytest

from lustre_alloc.common import lustre_layout as ll

from .lustre_model import make_model

MIB = 1 << 20

# In the child: a file opened as the shim opens it, then SETSTRIPE with LUM.
DELAY_CREATE = """
fd = os.open(PATH, os.O_WRONLY | os.O_CREAT | os.O_EXCL | ll.O_LOV_DELAY_CREATE, 0o644)
"""


@pytest.fixture
def model(tmp_path):
    return make_model(tmp_path, osts=8)


def test_a_file_created_with_delay_create_has_no_layout_and_its_writes_fail_ebadf(model):
    """lov/lov_io.c lov_io_init_empty(): CIT_WRITE -> -EBADF, CIT_READ reads nothing."""
    path = model.root / "f"
    out = model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
try:
    os.write(fd, b"x")
except OSError as e:
    out['write'] = errno.errorcode[e.errno]
out['read'] = len(os.read(os.open(PATH, os.O_RDONLY), 10))
""")
    assert out == {"write": "EBADF", "read": 0}
    assert model.layout(path) is None


def test_a_later_write_open_instantiates_the_default_and_a_read_open_does_not(model):
    """mdt/mdt_open.c mdt_mfd_open() -> mdt_create_data() when md_should_create()
    (lustre_mds.h: no MDS_OPEN_DELAY_CREATE and MDS_FMODE_WRITE); sanity.sh test_27F."""
    path = model.root / "f"
    out = model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
fd2 = os.open(PATH, os.O_WRONLY)
out['written'] = os.write(fd2, b"abc")
""")
    assert out["written"] == 3
    layout = model.layout(path)
    assert layout is not None and len(layout.osts) == 1   # lov.stripecount 1


def test_a_read_only_open_leaves_the_layout_empty(model):
    path = model.root / "f"
    model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
os.close(os.open(PATH, os.O_RDONLY))
""")
    assert model.layout(path) is None


def test_setstripe_gives_the_empty_file_its_layout_and_the_descriptor_writes(model):
    path = model.root / "f"
    out = model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.specific([5, 2], 4 << 20))
out['written'] = os.write(fd, b"hello")
""")
    assert out == {"written": 5}
    layout = model.layout(path)
    assert layout.osts == [5, 2] and layout.stripe_size == 4 * MIB


def test_a_second_setstripe_is_eexist(model):
    """mdt/mdt_open.c mdt_open_by_fid_lock(): "We should not change file's existing LOV
    EA" -> -EEXIST."""
    out = model.python(f"""
PATH = {str(model.root / 'f')!r}
{DELAY_CREATE}
fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.specific([1], MIB := 1 << 20))
fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.specific([2], MIB))
""")
    assert out == {"error": "EEXIST"}


@pytest.mark.parametrize("state, osts, want", [
    ({}, [1, 8], "EINVAL"),                      # not in lod_ost_bitmap
    ({}, [3, 3], "EINVAL"),                      # lod_qos_is_tgt_used()
    ({"inactive": {4}}, [1, 4], "EREMOTEIO"),    # osp_statfs -ENOTCONN, lod_statfs_and_check
    ({"enospc": {4}}, [4], "ENOSPC"),            # lod_statfs_check OS_STATFS_ENOSPC
    ({"readonly": {4}}, [4, 1], "EROFS"),        # OS_STATFS_READONLY
    ({"nocreate": {4}}, [2, 4], "ENOBUFS"),      # max_create_count=0: OS_STATFS_NOCREATE
])
def test_an_ost_list_is_all_or_nothing(model, state, osts, want):
    """lod/lod_qos.c lod_alloc_ost_list(): one OST that cannot take an object fails the
    whole SETSTRIPE with its errno, and the file keeps no layout (a second SETSTRIPE
    succeeds)."""
    for k, v in state.items():
        setattr(model, k, v)
    path = model.root / "f"
    out = model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
try:
    fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.specific({osts!r}, 1 << 20))
except OSError as e:
    out['first'] = errno.errorcode[e.errno]
fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.plain(2, 1 << 20))
out['written'] = os.write(fd, b"x")
""")
    assert out == {"first": want, "written": 1}
    layout = model.layout(path)
    assert len(layout.osts) == 2 and not set(layout.osts) & (
        model.inactive | model.enospc | model.readonly | model.nocreate)


def test_lustres_allocator_skips_osts_that_take_no_objects(model):
    """lod_qos.c lod_alloc_rr()/lod_check_and_reserve_ost() skip what
    lod_statfs_and_check() refuses; a count above the usable OSTs is reduced."""
    model.nocreate, model.inactive = {0, 1}, {2}
    model.set_default(model.root, ll.plain(2, MIB))
    wide = model.root / "wide"
    wide.mkdir()
    model.set_default(wide, ll.plain(-1, MIB))                 # -c -1: every OST
    out = model.python(f"""
for i in range(10):
    os.close(os.open({str(model.root)!r} + f'/f{{i}}', os.O_WRONLY | os.O_CREAT, 0o644))
os.close(os.open({str(wide / 'all')!r}, os.O_WRONLY | os.O_CREAT, 0o644))
""")
    assert out == {}
    used = set()
    for i in range(10):
        osts = model.layout(model.root / f"f{i}").osts
        assert len(osts) == 2
        used |= set(osts)
    assert used == set(range(3, 8))
    assert sorted(model.layout(wide / "all").osts) == [3, 4, 5, 6, 7]


def test_the_effective_default_is_the_directorys_else_the_roots_else_lods(model):
    """lod/lod_object.c lod_ah_init(): the parent's default, else the root's
    (lod_md_root); lod_xattr_get(): a root without one answers lov.stripecount."""
    model.default_count = 3
    d1, d2 = model.root / "own", model.root / "none"
    d1.mkdir(), d2.mkdir()
    model.set_default(d1, ll.plain(2, 2 * MIB))
    model.python(f"""
for p in ({str(d1 / 'a')!r}, {str(d2 / 'a')!r}):
    os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
""")
    assert len(model.layout(d1 / "a").osts) == 2
    assert model.layout(d1 / "a").stripe_size == 2 * MIB
    assert len(model.layout(d2 / "a").osts) == 3               # the LOD default
    model.set_default(model.root, ll.plain(4, 4 * MIB))       # lfs setstripe -c 4 /mnt
    model.python(f"os.close(os.open({str(d2 / 'b')!r}, os.O_WRONLY | os.O_CREAT, 0o644))")
    assert len(model.layout(d2 / "b").osts) == 4


def test_a_plain_default_with_count_0_inherits_the_roots_count(model):
    """lod_object.c lod_need_inherit_more(): stripe count or size <= 0 -> the root's."""
    d = model.root / "d"
    d.mkdir()
    model.set_default(model.root, ll.plain(4, MIB))
    model.set_default(d, ll.plain(0, 8 * MIB))
    model.python(f"os.close(os.open({str(d / 'a')!r}, os.O_WRONLY | os.O_CREAT, 0o644))")
    layout = model.layout(d / "a")
    assert len(layout.osts) == 4 and layout.stripe_size == 8 * MIB


@pytest.mark.parametrize("client, want", [("2.15.4", 4), ("2.12.9", "ENODATA")])
def test_getstripe_on_a_directory_without_a_default(model, client, want):
    """llite/dir.c ll_dir_getstripe_default() (2.13.51+, LU-11656): the root's default;
    older clients answer ENODATA.  The root itself always answers (lod_xattr_get())."""
    model.client = client
    d = model.root / "d"
    d.mkdir()
    model.set_default(model.root, ll.plain(4, MIB))
    out = model.python(f"""
buf = ll.getstripe_buffer()
fcntl.ioctl(os.open({str(model.root)!r}, os.O_RDONLY), ll.LL_IOC_LOV_GETSTRIPE, buf)
out['root'] = ll.parse(bytes(buf)).stripe_count
buf = ll.getstripe_buffer()
fcntl.ioctl(os.open({str(d)!r}, os.O_RDONLY), ll.LL_IOC_LOV_GETSTRIPE, buf)
out['dir'] = ll.parse(bytes(buf)).stripe_count
""")
    assert out["root"] == 4
    assert out.get("dir", out.get("error")) == want


def test_pfl_components_after_the_first_are_instantiated_when_io_reaches_them(model):
    """lod_qos.c lod_qos_prep_create(): at create only components with start <= size (0);
    lod_object.c lod_declare_layout_change()/lod_declare_instantiate_components(): the
    others at the write that reaches them, where a named OST that takes no object fails
    that write."""
    path = model.root / "f"
    lum = ll.composite([ll.Component(0, MIB, ll.specific([1], MIB)),
                        ll.Component(MIB, ll.LUSTRE_EOF, ll.specific([2, 3], MIB))])
    out = model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, {lum!r})
out['first'] = os.write(fd, b"x" * 4096)
""")
    assert out == {"first": 4096}
    comps = model.layout(path).components
    assert comps[0].initialized and comps[0].osts == [1]
    assert not comps[1].initialized
    model.nocreate = {3}                               # drained before I/O gets there
    out = model.python(f"""
fd = os.open({str(path)!r}, os.O_WRONLY)
os.pwrite(fd, b"y", 2 << 20)
""")
    assert out == {"error": "ENOBUFS"}
    model.nocreate = set()
    out = model.python(f"""
fd = os.open({str(path)!r}, os.O_WRONLY)
out['n'] = os.pwrite(fd, b"y", 2 << 20)
""")
    assert out == {"n": 1}
    assert model.layout(path).components[1].osts == [2, 3]


def test_a_self_extending_default_reads_back_as_a_composite(model):
    """lod/lod_object.c lod_xattr_get(): LOV_MAGIC_SEL is returned as LOV_MAGIC_COMP_V1;
    the extension component keeps LCME_FL_EXTENSION."""
    d = model.root / "sel"
    d.mkdir()
    sel = ll.composite([ll.Component(0, 64 * MIB, ll.plain(1, MIB)),
                        ll.Component(64 * MIB, ll.LUSTRE_EOF, ll.plain(1, MIB),
                                     ll.LCME_FL_EXTENSION)], magic=ll.LOV_USER_MAGIC_SEL)
    model.set_default(d, sel)
    out = model.python(f"""
buf = ll.getstripe_buffer()
fcntl.ioctl(os.open({str(d)!r}, os.O_RDONLY), ll.LL_IOC_LOV_GETSTRIPE, buf)
got = ll.parse(bytes(buf))
out['magic'] = got.magic
out['flags'] = [c.flags for c in got.components]
""")
    assert out == {"magic": ll.LOV_USER_MAGIC_COMP_V1, "flags": [0, ll.LCME_FL_EXTENSION]}


def test_the_ioctl_numbers_are_built_for_the_machine():
    """lustre_user.h: _IOW('f', 154, long) and _IOW('f', 155, long)."""
    import platform
    if platform.machine() in ("x86_64", "aarch64"):
        assert (ll.LL_IOC_LOV_SETSTRIPE, ll.LL_IOC_LOV_GETSTRIPE) == (0x4008669A, 0x4008669B)
    saved = platform.machine
    try:
        platform.machine = lambda: "ppc64le"
        assert ll._iow(154, 8) == 0x8008669A
    finally:
        platform.machine = saved


# -- rules checked on Lustre 2.17.0 (tests/lustre, docs/reference/lustre-on-lustre.md) ----
def test_a_reopen_through_proc_self_fd_of_a_file_held_for_write_makes_no_layout(model):
    """llite/file.c ll_file_open(): an open without a lookup intent of an inode this
    process holds open for write reuses the write open handle (och_usecount), so no MDS
    open runs and no layout is made; seen on 2.17.0: every write then fails EBADF."""
    path = model.root / "f"
    out = model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
fd2 = os.open('/proc/self/fd/%d' % fd, os.O_WRONLY)
try:
    os.write(fd2, b"x")
except OSError as e:
    out['write'] = errno.errorcode[e.errno]
""")
    assert out == {"write": "EBADF"} and model.layout(path) is None


def test_a_zero_stripe_size_in_a_list_is_the_lod_default(model):
    """lod_qos.c lod_qos_parse_config() -> lod_adjust_stripe_size(): 0 takes
    lov.stripesize (4 MiB since 2.16.0, LOV_DESC_STRIPE_SIZE_DEFAULT)."""
    path = model.root / "f"
    model.python(f"""
PATH = {str(path)!r}
{DELAY_CREATE}
fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.specific([3], 0))
""")
    assert model.layout(path).stripe_size == 4 * MIB


def test_an_o_append_create_gets_the_append_stripe_count_not_the_directory_default(model):
    """mdd_object.c mdd_object_make_hint(): dah_append_stripe_count = append_stripe_count
    (mdd_device.c: default 1), a plain layout even under a wider default."""
    model.set_default(model.root, ll.plain(4, MIB))
    path = model.root / "log"
    model.python(f"os.close(os.open({str(path)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND))")
    assert len(model.layout(path).osts) == 1


def test_a_0444_create_by_a_user_gets_its_layout_then_eacces(model):
    """mdt_open.c: SETSTRIPE (an MDS open for write) makes the layout before its
    permission check: a user gets EACCES with the layout made; the descriptor is not
    refreshed (GETSTRIPE ENODATA) until its write (seen on 2.17.0). Root squashed to a
    user here, as the tests run as root."""
    model.root_squash = True
    path = model.root / "ro"
    out = model.python(f"""
fd = os.open({str(path)!r}, os.O_WRONLY | os.O_CREAT | os.O_EXCL | ll.O_LOV_DELAY_CREATE, 0o444)
try:
    fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, ll.specific([2], MIB))
except OSError as e:
    out['setstripe'] = errno.errorcode[e.errno]
out['written'] = os.write(fd, b"ok")
""".replace("MIB", str(MIB)))
    assert out == {"setstripe": "EACCES", "written": 2}
    assert model.layout(path).osts == [2]


def test_a_composite_directory_default_goes_through_the_xattr_not_the_ioctl(model):
    """llite/dir.c LL_IOC_LOV_SETSTRIPE takes a v1/v3 default only (EOPNOTSUPP; 2.17.0);
    ``lustre.lov`` takes any and gives the whole layout back."""
    pfl = ll.composite([ll.Component(0, MIB, ll.plain(1, MIB)),
                        ll.Component(MIB, ll.LUSTRE_EOF, ll.plain(2, MIB))])
    d = model.root / "pfl"
    d.mkdir()
    out = model.python(f"""
fd = os.open({str(d)!r}, os.O_RDONLY | os.O_DIRECTORY)
try:
    fcntl.ioctl(fd, ll.LL_IOC_LOV_SETSTRIPE, bytearray({pfl!r}))
except OSError as e:
    out['ioctl'] = errno.errorcode[e.errno]
os.setxattr({str(d)!r}, 'lustre.lov', {pfl!r})
out['xattr'] = len(os.getxattr({str(d)!r}, 'lustre.lov'))
""")
    assert out == {"ioctl": errno.errorcode[errno.EOPNOTSUPP], "xattr": len(pfl)}
