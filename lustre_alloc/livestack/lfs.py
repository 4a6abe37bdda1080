"""A stand-in for Lustre's ``lfs`` on the emulated stack: the subcommands the migration
service runs, on real files whose layouts are the ``user.lustre_alloc.lov`` xattr the
emulated MDS writes (:data:`lustre_alloc.livestack.emulator.LOV_XATTR`, the bytes ``lustre.lov`` and
``LL_IOC_LOV_GETSTRIPE`` give: plain or composite, :mod:`lustre_alloc.common.lustre_layout`).

``python -m lustre_alloc.livestack.lfs <subcommand> ...``; Lustre's rules it keeps, from
``lustre/utils/lfs.c`` (2.17.0 unless said), each checked on Lustre 2.17.0 by
tests/lustre/test_migrate_lfs.py:

* ``migrate [--non-block|-n] [LAYOUT OPTIONS] [-W MIB_PER_S] FILE``
  (``lfs_setstripe_internal()`` -> ``lfs_migrate()``):

  - the new layout is built from the options alone, as ``comp_args_to_layout()`` does:
    ``-E END`` starts a component (PFL; ``-1``/``eof`` the end of file), each with its own
    ``-c``, ``-S``, ``-p``, ``-i`` and ``-o``; ``-L mdt`` a Data-on-MDT component, which
    refuses ``-c``/``-o``/``-i``/``-p`` (EINVAL). A pool is kept only when ``-p`` names it
    (``llapi_layout_pool_name_set(layout, "")`` otherwise); a ``-c`` other than the
    ``-o`` list's length is EINVAL (``lsa_args_stripe_count_check()``). So a PFL file moved
    with ``-c/-o`` alone comes out plain, and its pool is gone (seen on 2.17.0);
  - with no layout option the old layout is kept (``lfs_migrate()`` copies it): here with
    the same OSTs (LOD would choose);
  - a listed OST outside the pool is refused, EINVAL, and the file is left as it was (seen
    on 2.17.0: ``lfs migrate -p flash -o 3`` with OST 3 outside ``flash``); pools are
    :envvar:`LIVESTACK_LFS_POOLS` (JSON ``{"pool": [ost, ...]}``);
  - components the data reaches get objects (their ``-o``, else the first OSTs, a
    stand-in LOD); the others keep count, size and pool and no objects;
  - the data is copied to a volatile file (``O_TMPFILE`` here: nameless, gone if the
    process dies, as Lustre's volatile file is), then the layouts are swapped in one step
    (``llapi_fswap_layouts()``: here one ``setxattr``). The data version taken before the
    copy must still hold at the swap, else "file changed" and nothing changes
    (``migrate_block()``, ``SWAP_LAYOUTS_CHECK_DV1``; here size and mtime). With
    ``--non-block`` a file another process has open for writing is refused with EBUSY,
    before or during the copy (``llapi_lease_acquire()`` and ``check_lease()``). ``-W``
    paces the copy (``--bandwidth``, 2.16.0 ``migrate_copy_data()``). Timestamps are kept
    (``migrate_set_timestamps()``).
* ``find DIR --ost I[,J..] --type f (-print0 | -printf '%s %p\\n')``: regular files with an
  object on one of the OSTs; ``-print0`` in every release, ``-printf`` from 2.15.0.

The release it plays is :envvar:`LIVESTACK_LFS_RELEASE` (default 2.17.0): before 2.15.0
``find -printf`` is an unknown option, before 2.16.0 ``migrate -W`` is (EINVAL, as
``getopt_long`` makes lfs answer).
* ``getstripe FILE..``: the plain RAID0 form (``lmm_*`` keys, ``obdidx`` table).
* ``pool_list FSNAME.POOL``: ``Pool: FSNAME.POOL`` then ``FSNAME-OSTxxxx_UUID`` lines
  (``llapi_poollist()``); an unknown pool is EINVAL.
* ``path2fid PATH``: a FID, ``[0x200000007:0x1:0x0]`` for any path (the root's FID on
  Lustre, what Robinhood names the root by).

Errors: one line ``lfs <cmd>: <file>: <reason>`` on stderr and exit status the errno, as
``lfs`` returns its negative ``rc`` (``lfs.c`` ``main()``).
"""
from __future__ import annotations

import errno
import json
import os
import sys
import time
from pathlib import Path

import psutil

from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.livestack.emulator import LOV_XATTR
from lustre_alloc.rebalance.keep import objects

CHUNK_BYTES = 1 << 20
POOLS_ENV = "LIVESTACK_LFS_POOLS"
RELEASE_ENV = "LIVESTACK_LFS_RELEASE"


def release() -> tuple[int, ...]:
    """The Lustre release this stand-in plays (:data:`RELEASE_ENV`, default 2.17.0)."""
    return tuple(int(x) for x in os.environ.get(RELEASE_ENV, "2.17.0").split("."))


def _since(version: tuple[int, ...], option: str) -> None:
    if release() < version:
        raise LfsFailure(errno.EINVAL, f"unrecognized option '{option}' (lfs "
                                       f"{'.'.join(map(str, release()))})")
ROOT_FID = "[0x200000007:0x1:0x0]"


class LfsFailure(Exception):
    def __init__(self, err: int, message: str):
        super().__init__(message)
        self.errno = err


_SIZE_UNITS = {"": 1 << 20, "b": 512, "c": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
               "t": 1 << 40}


def parse_bandwidth(text: str) -> float:
    """``-W``'s value in bytes/s, as lfs reads it (``llapi_parse_size()`` with
    ``bandwidth_unit = ONE_MB`` and ``bytes_spec`` 0, lfs.c v2_16_0): a bare number (a
    fraction allowed) is MiB/s; a suffix names the unit: ``k``, ``m``, ``g``, ``t``, ``c``
    for bytes and ``b`` for 512-byte blocks.

    Raises:
        LfsFailure: not a number with an optional suffix (EINVAL, as lfs).
    """
    t = text.strip().lower()
    unit = t[-1] if t and t[-1].isalpha() else ""
    try:
        value = float(t[:-1] if unit else t)
        if value < 0:
            raise ValueError(text)
        return value * _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        raise LfsFailure(errno.EINVAL, f"bad value for bandwidth '{text}'") from None


def read_layout(path: str) -> ll.Layout:
    """``path``'s whole layout (its layout xattr)."""
    try:
        return ll.parse(os.getxattr(path, LOV_XATTR))
    except OSError as exc:
        raise LfsFailure(exc.errno or errno.EIO, f"{path}: no layout ({exc.strerror})") from None
    except ValueError as exc:
        raise LfsFailure(errno.EINVAL, f"{path}: {exc}") from None


def layout_of(path: str) -> tuple[list[int], int]:
    """(the OSTs ``path`` has objects on, in order of first appearance; the stripe size of
    its first component with objects)."""
    lay = read_layout(path)
    parts = lay.components or [lay]
    size = next((c.stripe_size for c in parts if c.osts), parts[0].stripe_size)
    return objects(lay), int(size)


def pools() -> dict[str, list[int]]:
    raw = os.environ.get(POOLS_ENV, "")
    return {k: [int(o) for o in v] for k, v in json.loads(raw).items()} if raw else {}


def _writers(path: str) -> bool:
    """Another process has ``path`` open for writing (what breaks a read lease)."""
    real = os.path.realpath(path)
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            for f in proc.open_files():
                if f.path == real and f.mode in ("w", "a", "r+", "a+"):
                    return True
        except (psutil.Error, OSError):
            continue
    return False


_LAYOUT_OPTS = {"-E", "--component-end", "-c", "--stripe-count", "-S", "--stripe-size",
                "-o", "--ost", "-p", "--pool", "-i", "--stripe-index", "-L", "--layout"}


def _end(text: str) -> int:
    return ll.LUSTRE_EOF if text in ("-1", "eof", "EOF") else int(text)


def _component(opts: dict, start: int, end: int, size_of_file: int) -> ll.Layout:
    """One component from its options (``comp_args_to_layout()``)."""
    if opts.get("L") == "mdt":
        if any(k in opts for k in ("c", "o", "i", "p")):
            raise LfsFailure(errno.EINVAL, "Option 'stripe-count', 'ost-list', 'stripe-offset' "
                                           "or 'pool' can't be specified with Data-on-MDT")
        return ll.Layout(magic=ll.LOV_USER_MAGIC_V1, stripe_count=0, stripe_size=end,
                         pattern=ll.LOV_PATTERN_MDT, start=start, end=end,
                         flags=ll.LCME_FL_INIT if size_of_file > start else 0)
    listed = opts.get("o")
    count = int(opts.get("c", len(listed) if listed else 1))
    if listed and count not in (0, -1) and count != len(listed):
        raise LfsFailure(errno.EINVAL, f"stripe_count({count}) != nr_tgts({len(listed)})")
    pool = opts.get("p", "")
    known = pools()
    if pool and listed and not set(listed) <= set(known.get(pool, [])):
        raise LfsFailure(errno.EINVAL, f"OSTs {listed} not all in pool {pool}")
    reached = size_of_file > start or start == 0
    osts = (listed or list(range(max(count, 1)))) if reached else []
    return ll.Layout(magic=ll.LOV_USER_MAGIC_V3 if pool else ll.LOV_USER_MAGIC_V1,
                     stripe_count=(len(osts) if osts else count & 0xFFFF),
                     stripe_size=int(opts.get("S", 1 << 20)), pool=pool,
                     pattern=ll.LOV_PATTERN_RAID0, osts=osts, start=start, end=end,
                     flags=ll.LCME_FL_INIT if osts else 0)


def new_layout(groups: list[dict], old: ll.Layout, size_of_file: int) -> ll.Layout:
    """The layout ``lfs migrate`` makes from its option groups (one per ``-E``, or one)."""
    if not groups:
        return old
    if len(groups) == 1 and "E" not in groups[0]:
        return _component(groups[0], 0, ll.LUSTRE_EOF, size_of_file)
    comps, start = [], 0
    for g in groups:
        end = _end(g["E"])
        c = _component(g, start, end, size_of_file)
        comps.append(c)
        start = end
    return ll.Layout(magic=ll.LOV_USER_MAGIC_COMP_V1, components=comps)


def migrate(args: list[str]) -> None:
    nonblock, bw, rest = False, 0.0, []
    groups: list[dict] = []
    it = iter(args)
    for a in it:
        if a in ("-n", "--non-block"):
            nonblock = True
        elif a in ("-b", "--block"):
            nonblock = False
        elif a in ("-W", "--bandwidth", "--bandwidth-limit"):
            _since((2, 16, 0), a)
            bw = parse_bandwidth(next(it))
        elif a in _LAYOUT_OPTS:
            key = {"--component-end": "E", "--stripe-count": "c", "--stripe-size": "S",
                   "--ost": "o", "--pool": "p", "--stripe-index": "i",
                   "--layout": "L"}.get(a, a[1:])
            value = next(it)
            if key == "E" or not groups:
                groups.append({})
            if key in groups[-1]:
                raise LfsFailure(errno.EINVAL, f"option {a} given twice for a component")
            groups[-1][key] = ([int(x) for x in value.split(",")] if key == "o" else value)
        else:
            rest.append(a)
    if len(rest) != 1:
        raise LfsFailure(errno.EINVAL, "usage: migrate [-n] [LAYOUT OPTIONS] [-W BW] FILE")
    path = rest[0]
    old = read_layout(path)
    if nonblock and _writers(path):
        raise LfsFailure(errno.EBUSY, f"{path}: cannot get lease: Device or resource busy")
    st = os.stat(path)
    layout = new_layout(groups, old, st.st_size)
    t0 = time.monotonic()
    next_check = t0 + 0.5
    copied = 0
    fd_src = os.open(path, os.O_RDONLY)
    fd_vol = os.open(os.path.dirname(os.path.abspath(path)), os.O_TMPFILE | os.O_WRONLY, 0o600)
    try:
        while True:
            buf = os.read(fd_src, CHUNK_BYTES)
            if not buf:
                break
            os.write(fd_vol, buf)
            copied += len(buf)
            if bw > 0:                       # pace to the bandwidth limit
                ahead = copied / bw - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            # check_lease() is an ioctl per chunk in lfs; here a scan of every process's
            # open files, so at most twice a second (a writer is seen within 0.5 s)
            if nonblock and time.monotonic() >= next_check:
                next_check = time.monotonic() + 0.5
                if _writers(path):
                    raise LfsFailure(errno.EBUSY, f"{path}: lease broken: Device or resource busy")
    finally:
        os.close(fd_src)
        os.close(fd_vol)
    now = os.stat(path)
    if (now.st_size, now.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise LfsFailure(errno.EAGAIN, f"{path}: cannot swap layout: file changed")
    os.setxattr(path, LOV_XATTR, ll.pack(layout))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def find(args: list[str]) -> None:
    root, wanted, fmt = None, None, None
    it = iter(args)
    for a in it:
        if a in ("--ost", "-O", "--obd"):
            wanted = {int(x) for x in next(it).split(",")}
        elif a in ("--type", "-type", "-t"):
            if next(it) != "f":
                raise LfsFailure(errno.EINVAL, "find: only --type f")
        elif a in ("-printf", "--printf"):
            _since((2, 15, 0), a)
            fmt = next(it)
        elif a in ("-print0", "--print0", "-0"):
            fmt = "print0"
        elif root is None:
            root = a
        else:
            raise LfsFailure(errno.EINVAL, f"find: unknown argument {a}")
    if root is None or fmt not in ("%s %p\\n", "print0"):
        raise LfsFailure(errno.EINVAL, "usage: find DIR --ost I --type f "
                                       "(-print0 | -printf '%s %p\\n')")
    out = sys.stdout.buffer
    for dirpath, _, names in os.walk(os.fsencode(root)):
        for name in sorted(names):
            p = os.path.join(dirpath, name)
            try:
                osts, _ = layout_of(os.fsdecode(p))
                size = os.stat(p).st_size
            except (LfsFailure, OSError):
                continue
            if wanted is None or wanted & set(osts):
                out.write(p + b"\0" if fmt == "print0" else b"%d %s\n" % (size, p))
    out.flush()


def getstripe(args: list[str]) -> None:
    for path in args:
        osts, size = layout_of(path)
        sys.stdout.write(f"{path}\nlmm_stripe_count:  {len(osts)}\nlmm_stripe_size:   {size}\n"
                         f"lmm_pattern:       raid0\nlmm_layout_gen:    0\n"
                         f"lmm_stripe_offset: {osts[0]}\n"
                         "\tobdidx\t\t objid\t\t objid\t\t group\n")
        for i, o in enumerate(osts):
            sys.stdout.write(f"\t{o:6d}\t{1000 + i:12d}\t{hex(1000 + i):>12}\t{0:12d}\n")
        sys.stdout.write("\n")


def pool_list(args: list[str]) -> None:
    if len(args) != 1 or "." not in args[0]:
        raise LfsFailure(errno.EINVAL, "usage: pool_list FSNAME.POOL")
    fsname, pool = args[0].split(".", 1)
    known = pools()
    if pool not in known:
        raise LfsFailure(errno.EINVAL, f"pool_list: {args[0]}: no such pool")
    sys.stdout.write(f"Pool: {fsname}.{pool}\n")
    for o in known[pool]:
        sys.stdout.write(f"{fsname}-OST{o:04x}_UUID\n")


def path2fid(args: list[str]) -> None:
    for p in args:
        if not os.path.lexists(p):
            raise LfsFailure(errno.ENOENT, f"path2fid: {p}: No such file or directory")
        sys.stdout.write(ROOT_FID + "\n")


COMMANDS = {"migrate": migrate, "find": find, "getstripe": getstripe, "pool_list": pool_list,
            "path2fid": path2fid}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        sys.stderr.write(f"lfs: commands: {', '.join(COMMANDS)}\n")
        return errno.EINVAL
    try:
        COMMANDS[argv[0]](argv[1:])
    except LfsFailure as exc:
        sys.stderr.write(f"lfs {argv[0]}: {exc}\n")
        return exc.errno
    except (ValueError, StopIteration) as exc:
        sys.stderr.write(f"lfs {argv[0]}: bad arguments: {exc}\n")
        return errno.EINVAL
    return 0


if __name__ == "__main__":
    sys.exit(main())
