"""Running Lustre's ``lfs`` for the migration service: file lists, layouts, pools, migrations.

The commands, as ``lfs`` takes them (``lustre/utils/lfs.c``, 2.12.0 .. 2.17.0):

* file list of one OST: ``lfs find <mount> --ost <index> --type f -print0`` (``-print0``
  in every release; ``-printf`` only from 2.15.0): NUL-separated names, so any byte but
  NUL may be in a name; each listed file's size is then read with ``lstat`` here, and a
  file gone meanwhile drops out. ``lfs find`` exits non-zero when an entry vanished
  during its walk; a list whose only errors are such "No such file or directory" lines is
  kept;
* a file's whole layout: its ``lustre.lov`` extended attribute (what ``lfs getstripe``
  prints, ``llite/xattr.c`` ``ll_xattr_get_common()``; plain, PFL, DoM, SEL and FLR
  layouts alike, parsed by :mod:`lustre_alloc.common.lustre_layout`), read per file, so one file deleted
  or unreadable drops out alone;
* a pool's OSTs: ``lfs pool_list <fsname>.<pool>`` (``<fsname>-OSTxxxx_UUID`` lines);
* a move: ``lfs migrate --non-block <layout options> [-W <MiB/s>] <file>``, the layout
  options from :func:`lustre_alloc.rebalance.keep.migrate_options` (everything of the old layout
  but its OSTs). ``-W`` (``--bandwidth``, 2.16.0; ``--bandwidth-limit`` in 2.17) reads a bare
  number in MiB/s (``lfs.c`` v2_16_0 ``lfs_setstripe_internal()``: ``llapi_parse_size()``
  with ``bandwidth_unit = ONE_MB``; checked on 2.17.0: ``-W 10`` moved 20 MiB in 2.37 s) and
  a ``k`` suffix as KiB/s, which the service passes (:func:`bandwidth_arg`);
  ``--non-block`` so a file open for writing is refused (EBUSY) instead of blocking its
  writers behind a group lock, and retried later; the swap is atomic and a failed
  migration leaves the file as it was (``lfs_migrate()``).

A missing or failing ``lfs`` raises :class:`LfsError` with one line naming the command.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from lustre_alloc.common import lustre_layout as ll

LAYOUT_XATTR = "lustre.lov"
"""The extended attribute a Lustre client serves a file's layout under."""
GONE = "No such file or directory"
POOL_OST = re.compile(r"-OST([0-9a-fA-F]{4,8})_UUID\s*$")
CHUNK_BYTES = 1 << 20
MIB = 1 << 20


def bandwidth_arg(bytes_s: float) -> str:
    """``lfs migrate -W``'s value for a cap of ``bytes_s``: whole KiB/s with the ``k`` suffix
    (``llapi_parse_size()`` takes ``k`` whatever the default unit, MiB for ``-W``; a bare
    number would round a cap below 1 MiB/s, a failing OST's share, to 0 or 1 MiB/s), rounded
    down so the cap holds, at least ``1k`` (0 would mean no cap)."""
    return f"{max(1, int(bytes_s // 1024))}k"


class FileListError(RuntimeError):
    """A file list or layout could not be had (one line): ``lfs``, or a Robinhood database."""


class LfsError(FileListError):
    """``lfs`` missing, failing or printing what cannot be read (one line)."""


@dataclass(frozen=True)
class Lfs:
    """How to run ``lfs``.

    Attributes:
        command: the ``lfs`` command, split like a shell would (``"lfs"``, or a wrapper).
        bandwidth_option: pass ``--bandwidth`` to ``lfs migrate`` (Lustre 2.16+ only).
        timeout_s: the longest a find may run, s.
        layout_xattr: the extended attribute holding a file's layout (:data:`LAYOUT_XATTR`;
            the emulated stack's stand-in keeps layouts under another name).
    """
    command: str = "lfs"
    bandwidth_option: bool = False
    timeout_s: float = 3600.0
    layout_xattr: str = LAYOUT_XATTR

    def argv(self, *args: str) -> list[str]:
        return [*shlex.split(self.command), *args]

    def _run(self, args: list[str], out_path: Path, tolerate: str | None = None) -> None:
        """Run ``lfs args`` with stdout into ``out_path``. A non-zero exit raises
        :class:`LfsError`, unless every stderr line contains ``tolerate``."""
        argv = self.argv(*args)
        try:
            with open(out_path, "wb") as out:
                done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE,
                                      timeout=self.timeout_s, check=False)
        except FileNotFoundError:
            raise LfsError(f"{argv[0]}: not found (the [migrate] lfs command)") from None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LfsError(f"{' '.join(argv[:3])}: {exc}") from None
        if done.returncode != 0:
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            if tolerate and lines and all(tolerate in x for x in lines):
                return
            last = (lines or ["(no message)"])[-1]
            raise LfsError(f"{' '.join(argv[:3])} failed ({done.returncode}): {last}")

    def files_on_ost(self, mount: str, ost: int, workdir: Path) -> list[tuple[str, int]]:
        """``(path, size bytes)`` of every regular file with an object on ``ost`` (module
        doc), each file once whatever its number of names (hard links); names that are not
        UTF-8 come back as :func:`os.fsdecode` gives them."""
        out = workdir / f"find-OST{ost:04x}.bin"
        self._run(["find", mount, "--ost", str(ost), "--type", "f", "-print0"], out,
                  tolerate=GONE)
        got, seen = [], set()
        for path in nul_separated(out):
            try:
                st = os.lstat(path)
            except OSError:
                continue                      # gone since the walk
            if (st.st_dev, st.st_ino) in seen:
                continue                      # another name of a file listed (a hard link)
            seen.add((st.st_dev, st.st_ino))
            got.append((path, int(st.st_size)))
        return got

    def layout(self, path: str) -> ll.Layout | None:
        """``path``'s whole layout; None when the file is gone, has none, or it cannot be
        read or parsed (it drops out of this pass and is listed again later)."""
        try:
            return ll.parse(os.getxattr(path, self.layout_xattr, follow_symlinks=False))
        except (OSError, ValueError):
            return None

    def layouts(self, paths: list[str]) -> dict[str, ll.Layout]:
        """``{path: layout}`` of the files whose layout could be read now."""
        got = {}
        for p in paths:
            lay = self.layout(p)
            if lay is not None:
                got[p] = lay
        return got

    def pool_osts(self, fsname: str, pool: str, workdir: Path) -> set[int]:
        """The OST indices of pool ``fsname.pool``. Raises :class:`LfsError`."""
        out = workdir / "pool_list.txt"
        self._run(["pool_list", f"{fsname}.{pool}"], out)
        osts = set()
        for line in out.read_text(errors="replace").splitlines():
            m = POOL_OST.search(line.strip())
            if m:
                osts.add(int(m.group(1), 16))
        return osts

    def migrate_argv(self, path: str, options: list[str], bandwidth_bytes_s: float) -> list[str]:
        """The ``lfs migrate`` command of one move: ``options`` from
        :func:`lustre_alloc.rebalance.keep.migrate_options`."""
        args = ["migrate", "--non-block", *options]
        if self.bandwidth_option and bandwidth_bytes_s > 0:
            args += ["-W", bandwidth_arg(bandwidth_bytes_s)]
        return self.argv(*args, path)


def nul_separated(path: Path) -> Iterator[str]:
    """The NUL-terminated names in ``path`` (as ``-print0`` writes them), decoded with
    :func:`os.fsdecode` (any bytes survive the round trip to the file system)."""
    rest = b""
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            parts = (rest + chunk).split(b"\0")
            rest = parts.pop()
            for name in parts:
                if name:
                    yield os.fsdecode(name)
    if rest:
        yield os.fsdecode(rest)
