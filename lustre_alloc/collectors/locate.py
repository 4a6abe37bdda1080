"""Where each Lustre statistics file lives, per Lustre version, under a configurable root.

Candidates are tried newest layout first; the first one that is a readable file wins, so the
same code reads 2.10 (/proc), 2.12-2.14 (/sys for kbytes*) and 2.15+ (debugfs for brw_stats)
servers. Table from ``docs/reference/lustre-stats-formats.md`` (lustre-release sources):

=====================  ==============================================  ==========================
source                 candidates (relative to the root)                versions
=====================  ==============================================  ==========================
OST stats              sys/kernel/debug/lustre/obdfilter/T/,            debugfs 2.17+ (lproc_ofd.c
                       proc/fs/lustre/obdfilter/T/                      ldebugfs_alloc_obd_stats)
OST job_stats          proc/fs/lustre/obdfilter/T/                      all
OST kbytes*, files*    sys/fs/lustre/obdfilter/T/, proc/fs/lustre/      sys 2.12+, proc <= 2.10;
                       obdfilter/T/, {sys,proc}/fs/lustre/osd-*/T/      osd-* as fallback
brw_stats              sys/kernel/debug/lustre/osd-*/T/,                debugfs 2.15+ (LU-14927),
                       proc/fs/lustre/osd-*/T/, .../obdfilter/T/        proc <= 2.14
MDT md_stats,job_stats proc/fs/lustre/mdt/T/                            all
LNet stats             sys/kernel/debug/lnet/stats, proc/sys/lnet/stats 2.11+ (LU-8066), <= 2.10
health_check, version  sys/fs/lustre/, proc/fs/lustre/                  2.12+, older
=====================  ==============================================  ==========================

Dangling symlinks count as missing (2.15 leaves ``obdfilter/T/brw_stats`` pointing to a
missing /proc file); 2.10's ``obdfilter/T/brw_stats -> ../../osd-*/T/brw_stats`` is followed by
the kernel like any symlink.
"""
from __future__ import annotations

import errno
import glob
import os
from pathlib import Path

from lustre_alloc.common.errors import SourceUnavailable

PROC = "proc/fs/lustre"
SYS = "sys/fs/lustre"
DEBUG = "sys/kernel/debug/lustre"

#: OST file name -> candidate directory patterns (``{t}`` is the target name).
OST_FILES: dict[str, tuple[str, ...]] = {
    # 2.17.0 moved an OST's stats to debugfs (lproc_ofd.c: ldebugfs_alloc_obd_stats();
    # seen on 2.17.0: lctl list_param -p obdfilter.*.stats)
    "stats": (f"{DEBUG}/obdfilter/{{t}}", f"{PROC}/obdfilter/{{t}}"),
    "job_stats": (f"{PROC}/obdfilter/{{t}}",),
    "brw_stats": (f"{DEBUG}/osd-*/{{t}}", f"{PROC}/osd-*/{{t}}", f"{PROC}/obdfilter/{{t}}"),
    "degraded": (f"{SYS}/obdfilter/{{t}}", f"{PROC}/obdfilter/{{t}}"),
}
for _name in ("kbytesfree", "kbytestotal", "kbytesavail", "filesfree", "filestotal"):
    OST_FILES[_name] = (f"{SYS}/obdfilter/{{t}}", f"{PROC}/obdfilter/{{t}}", f"{SYS}/osd-*/{{t}}",
                        f"{PROC}/osd-*/{{t}}")

#: MDT file name -> candidate directory patterns.
MDT_FILES: dict[str, tuple[str, ...]] = {
    "md_stats": (f"{PROC}/mdt/{{t}}",),
    "job_stats": (f"{PROC}/mdt/{{t}}",),
}
for _name in ("kbytesfree", "kbytestotal", "kbytesavail", "filesfree", "filestotal"):
    MDT_FILES[_name] = (f"{SYS}/osd-*/{{t}}", f"{PROC}/osd-*/{{t}}")

#: Server-wide file -> candidate paths.
SERVER_FILES: dict[str, tuple[str, ...]] = {
    "lnet_stats": ("sys/kernel/debug/lnet/stats", "proc/sys/lnet/stats"),
    "health_check": (f"{SYS}/health_check", f"{PROC}/health_check"),
    "version": (f"{SYS}/version", f"{PROC}/version"),
}


def read_source(path: Path) -> str:
    """Text of one statistics file (symlinks followed by the OS).

    Raises:
        SourceUnavailable: missing file or dangling link (``missing``), no permission
            (``permission``), other OS errors (``io``).
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(4 << 20)
    except FileNotFoundError as exc:
        detail = "dangling symlink" if os.path.islink(path) else "no such file"
        raise SourceUnavailable(str(path), "missing", detail) from exc
    except PermissionError as exc:
        raise SourceUnavailable(str(path), "permission", "read denied (debugfs needs root)") from exc
    except IsADirectoryError as exc:
        raise SourceUnavailable(str(path), "missing", "is a directory") from exc
    except OSError as exc:
        reason = "missing" if exc.errno in (errno.ENOENT, errno.ENODEV) else "io"
        raise SourceUnavailable(str(path), reason, os.strerror(exc.errno or 0)) from exc
    return data.decode("utf-8", errors="replace")


class Locator:
    """Finds the statistics files of one server under ``root`` (default ``/``).

    Args:
        root: the directory holding ``proc/`` and ``sys/`` (a fixture tree in tests).
    """

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.root = Path(root)
        # (kind, target, name) -> path that worked last time: saves the glob of every candidate
        # on each interval; dropped as soon as that path fails (a remount, an upgrade).
        self._resolved: dict[tuple[str, str, str], Path] = {}

    def _dirs(self, pattern: str) -> list[str]:
        """Names of the directories matching ``<root>/<parent>/*`` (one ``*`` level in parent
        allowed)."""
        parent = pattern.rsplit("/", 1)[0]
        parents = glob.glob(str(self.root / parent)) if "*" in parent else [str(self.root / parent)]
        names: list[str] = []
        for base in parents:
            try:
                with os.scandir(base) as entries:
                    names.extend(e.name for e in entries if e.is_dir())
            except OSError:
                continue
        return names

    def osts(self) -> list[str]:
        """OST names (``fsname-OSTxxxx``) found in ``obdfilter`` and ``osd-*`` directories."""
        names = set(self._dirs(f"{PROC}/obdfilter/*")) | set(self._dirs(f"{SYS}/obdfilter/*"))
        for base in (PROC, SYS, DEBUG):
            names |= {n for n in self._dirs(f"{base}/osd-*/*") if "-OST" in n}
        return sorted(names)

    def mdts(self) -> list[str]:
        """MDT names (``fsname-MDTxxxx``) found in ``mdt`` directories."""
        names = set(self._dirs(f"{PROC}/mdt/*")) | set(self._dirs(f"{SYS}/mdt/*"))
        return sorted(n for n in names if "-MDT" in n)

    def candidates(self, kind: str, target: str, name: str) -> list[Path]:
        """Existing-or-not candidate paths for file ``name`` of ``target`` (``kind`` ost|mdt),
        globs expanded, in preference order."""
        table = OST_FILES if kind == "ost" else MDT_FILES
        out: list[Path] = []
        for pattern in table.get(name, ()):
            full = str(self.root / pattern.format(t=glob.escape(target)) / name)
            matches = sorted(glob.glob(full)) if "*" in pattern else [full]
            out.extend(Path(m) for m in matches)
        return out

    def read_target(self, kind: str, target: str, name: str) -> tuple[str, str]:
        """``(text, path)`` of the first readable candidate.

        Raises:
            SourceUnavailable: no candidate could be read; the reason of the most
                informative failure (permission over missing) is kept.
        """
        key = (kind, target, name)
        cached = self._resolved.get(key)
        if cached is not None:
            try:
                return read_source(cached), str(cached)
            except SourceUnavailable:
                del self._resolved[key]
        text, where = self._first(self.candidates(kind, target, name), f"{kind} {target} {name}")
        self._resolved[key] = Path(where)
        return text, where

    def read_server(self, name: str) -> tuple[str, str]:
        """``(text, path)`` of a server-wide file (``lnet_stats``, ``health_check``, ``version``)."""
        return self._first([self.root / p for p in SERVER_FILES[name]], name)

    @staticmethod
    def _first(paths: list[Path], what: str) -> tuple[str, str]:
        failure: SourceUnavailable | None = None
        for path in paths:
            try:
                return read_source(path), str(path)
            except SourceUnavailable as exc:
                if failure is None or (exc.reason != "missing" and failure.reason == "missing"):
                    failure = exc
        if failure is None:
            raise SourceUnavailable(what, "missing", "no candidate path")
        if failure.reason == "missing":
            raise SourceUnavailable(what, "missing", f"none of {len(paths)} candidate paths exists")
        raise failure
