"""A stand-in for Lustre's ``lfs`` on the emulated stack: the three subcommands the migration
service runs, on real files whose layouts are the ``user.lustre_alloc.lov`` xattr the
emulated MDS writes (:data:`livestack.emulator.LOV_XATTR`, ``LL_IOC_LOV_GETSTRIPE``'s bytes).

``python -m livestack.lfs <subcommand> ...``; Lustre's rules it keeps, from
``lustre/utils/lfs.c`` (2.15.4 unless said):

* ``migrate [--non-block|-n] -c K [-S SIZE] -o I,J,.. [-W MIB_PER_S] FILE``
  (``lfs_setstripe_migrate()`` -> ``lfs_migrate()``): the data is copied to a volatile
  file (``O_TMPFILE`` here: nameless, gone if the process dies, as Lustre's volatile file
  is), then the layouts are swapped in one step (``llapi_fswap_layouts()``: here one
  ``setxattr``). The data version taken before the copy must still hold at the swap, else
  "file changed" and nothing changes (``migrate_block()``, ``SWAP_LAYOUTS_CHECK_DV1``; here
  size and mtime). With ``--non-block`` a file another process has open for writing is
  refused with EBUSY, before or during the copy (``llapi_lease_acquire()`` and
  ``check_lease()``). ``-W`` paces the copy (``--bandwidth``, 2.16.0 ``migrate_copy_data()``).
  Timestamps are kept (``migrate_set_timestamps()``).
* ``find DIR --ost I[,J..] --type f -printf '%s %p\\n'``: regular files with an object on
  one of the OSTs, size in bytes and path.
* ``getstripe FILE..``: the plain RAID0 form (``lmm_*`` keys, ``obdidx`` table).

Errors: one line ``lfs <cmd>: <file>: <reason>`` on stderr and exit status the errno, as
``lfs`` returns its negative ``rc`` (``lfs.c`` ``main()``).
"""
from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path

import psutil

from common import lustre_layout as ll
from livestack.emulator import LOV_XATTR, lov_user_md_v1

CHUNK_BYTES = 1 << 20


class LfsFailure(Exception):
    def __init__(self, err: int, message: str):
        super().__init__(message)
        self.errno = err


_SIZE_UNITS = {"": 1 << 20, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bandwidth(text: str) -> float:
    """``-W``'s value in bytes/s, as lfs reads it: a bare number is MiB/s, a suffix
    (k, m, g, t; b for bytes) names the unit (``lfs.c`` v2_16_0: ``llapi_parse_size()``
    with ``bandwidth_unit = ONE_MB``).

    Raises:
        LfsFailure: not a number with an optional suffix (EINVAL, as lfs).
    """
    t = text.strip().lower()
    unit = t[-1] if t and t[-1].isalpha() else ""
    try:
        value = float(t[:-1] if unit else t)
        return value * _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        raise LfsFailure(errno.EINVAL, f"bad value for bandwidth '{text}'") from None


def layout_of(path: str) -> tuple[list[int], int]:
    """(OST indices in stripe order, stripe size) of ``path``'s layout xattr."""
    try:
        lay = ll.parse(os.getxattr(path, LOV_XATTR))
    except OSError as exc:
        raise LfsFailure(exc.errno or errno.EIO, f"{path}: no layout ({exc.strerror})") from None
    except ValueError as exc:
        raise LfsFailure(errno.EINVAL, f"{path}: {exc}") from None
    return list(lay.osts), int(lay.stripe_size)


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


def migrate(args: list[str]) -> None:
    nonblock, count, size, osts, bw, rest = False, None, None, None, 0.0, []
    it = iter(args)
    for a in it:
        if a in ("-n", "--non-block"):
            nonblock = True
        elif a in ("-b", "--block"):
            nonblock = False
        elif a in ("-c", "--stripe-count"):
            count = int(next(it))
        elif a in ("-S", "--stripe-size"):
            size = int(next(it))
        elif a in ("-o", "--ost"):
            osts = [int(x) for x in next(it).split(",")]
        elif a in ("-W", "--bandwidth", "--bandwidth-limit"):
            bw = parse_bandwidth(next(it))
        else:
            rest.append(a)
    if len(rest) != 1 or not osts or (count is not None and count != len(osts)):
        raise LfsFailure(errno.EINVAL, "usage: migrate [-n] -c K [-S SIZE] -o I,.. [-W BW] FILE")
    path = rest[0]
    _, old_size = layout_of(path)
    if nonblock and _writers(path):
        raise LfsFailure(errno.EBUSY, f"{path}: cannot get lease: Device or resource busy")
    st = os.stat(path)
    t0 = time.monotonic()
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
            if nonblock and _writers(path):
                raise LfsFailure(errno.EBUSY, f"{path}: lease broken: Device or resource busy")
    finally:
        os.close(fd_src)
        os.close(fd_vol)
    now = os.stat(path)
    if (now.st_size, now.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise LfsFailure(errno.EAGAIN, f"{path}: cannot swap layout: file changed")
    os.setxattr(path, LOV_XATTR, lov_user_md_v1(osts, size or old_size))
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
            fmt = next(it)
        elif root is None:
            root = a
        else:
            raise LfsFailure(errno.EINVAL, f"find: unknown argument {a}")
    if root is None or fmt != "%s %p\\n":
        raise LfsFailure(errno.EINVAL, "usage: find DIR --ost I --type f -printf '%s %p\\n'")
    out = sys.stdout
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            p = os.path.join(dirpath, name)
            try:
                osts, _ = layout_of(p)
            except LfsFailure:
                continue
            if wanted is None or wanted & set(osts):
                out.write(f"{os.stat(p).st_size} {p}\n")


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


COMMANDS = {"migrate": migrate, "find": find, "getstripe": getstripe}


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
