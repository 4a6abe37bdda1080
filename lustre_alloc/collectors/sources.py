"""The two access paths to a server's statistics, behind one interface.

* :class:`FileSource` reads the files under a root directory (default ``/``) through
  :class:`lustre_alloc.collectors.locate.Locator`.
* :class:`LctlSource` runs ``lctl get_param`` once per interval (and ``lnetctl stats show`` when
  the LNet ``stats`` parameter is absent) and serves the same texts from the dump.

Both return raw text; parsing is the readers' job.
"""
from __future__ import annotations

import os
import shutil
from typing import Protocol, Sequence

from lustre_alloc.common.errors import LustreStatsError, SourceUnavailable
from lustre_alloc.collectors.locate import Locator, read_source
from lustre_alloc.collectors.readers.lctl_get_param import ParamDump, parse_get_param, run_lctl

#: Names a collector asks for per target kind.
OST_NAMES = ("stats", "job_stats", "brw_stats", "kbytesfree", "kbytestotal", "kbytesavail",
             "filesfree", "filestotal", "degraded")
MDT_NAMES = ("md_stats", "job_stats", "kbytesfree", "kbytestotal", "kbytesavail", "filesfree",
             "filestotal")


class StatsSource(Protocol):
    """What the collector needs from an access path."""

    description: str

    def refresh(self) -> None:
        """Take a fresh reading (run the command); files need nothing."""

    def targets(self, kind: str) -> list[str]:
        """Target names of ``kind`` (``ost`` or ``mdt``)."""

    def read_target(self, kind: str, target: str, name: str) -> tuple[str, str]:
        """``(text, where)`` of one target file; raises :class:`SourceUnavailable`."""

    def read_server(self, name: str) -> tuple[str, str]:
        """``(text, where)`` of ``lnet_stats``, ``lnetctl``, ``health_check`` or ``version``."""

    def read_family(self, family: str, leaf: str) -> dict[str, tuple[str, str]]:
        """MDS only: ``{device: (text, where)}`` of ``osp.<device>.<leaf>``, or
        ``{"<lod device>.<pool>": (text, where)}`` for ``family="lod"``, ``leaf="pools"``."""


class FileSource:
    """Statistics files under ``root``."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        self.locator = Locator(root)
        self.description = f"files under {self.locator.root}"

    def refresh(self) -> None:
        return None

    def targets(self, kind: str) -> list[str]:
        return self.locator.osts() if kind == "ost" else self.locator.mdts()

    def read_target(self, kind: str, target: str, name: str) -> tuple[str, str]:
        return self.locator.read_target(kind, target, name)

    def read_server(self, name: str) -> tuple[str, str]:
        if name == "lnetctl":
            raise SourceUnavailable("lnetctl", "missing", "file access path reads lnet_stats")
        return self.locator.read_server(name)

    def read_family(self, family: str, leaf: str) -> dict[str, tuple[str, str]]:
        # osp: /sys/fs/lustre/osp/<dev>/<leaf> (2.12+) or /proc/fs/lustre/osp/<dev>/<leaf>;
        # pools: /proc/fs/lustre/lod/<lod>/pools/<pool>
        if family == "osp":
            patterns = [f"sys/fs/lustre/osp/*/{leaf}", f"proc/fs/lustre/osp/*/{leaf}"]
        else:
            patterns = [f"proc/fs/lustre/lod/*/{leaf}/*", f"sys/fs/lustre/lod/*/{leaf}/*"]
        out: dict[str, tuple[str, str]] = {}
        for pattern in patterns:
            for path in sorted(self.locator.root.glob(pattern)):
                key = path.parent.name if family == "osp" else \
                    f"{path.parent.parent.name}.{path.name}"
                if key in out:
                    continue
                try:
                    out[key] = (read_source(path), str(path))
                except SourceUnavailable:
                    continue
        if not out:
            raise SourceUnavailable(f"{family}.*.{leaf}", "missing", "no such files")
        return out


class LctlSource:
    """``lctl get_param`` (and ``lnetctl stats show``) output, one run per :meth:`refresh`.

    Args:
        role: ``oss`` or ``mds``: which parameters to ask for.
        lctl_command: argv of ``lctl`` (tests use a script printing a saved dump).
        lnetctl_command: argv of ``lnetctl``, or empty to not use it.
        timeout_s: per command.
    """

    OSS_PARAMS = ("obdfilter.*.stats", "obdfilter.*.job_stats", "obdfilter.*.kbytes*",
                  "obdfilter.*.files*", "obdfilter.*.degraded", "osd-*.*.brw_stats",
                  "osd-*.*.kbytes*", "osd-*.*.files*", "health_check", "version", "stats")
    MDS_PARAMS = ("mdt.*.md_stats", "mdt.*.job_stats", "osd-*.*.kbytes*", "osd-*.*.files*",
                  "osp.*.active", "osp.*.max_create_count", "osp.*.prealloc_status",
                  "osp.*.prealloc_next_id", "osp.*.prealloc_last_id", "osp.*.prealloc_reserved",
                  "lod.*.pools.*", "health_check", "version", "stats")

    def __init__(self, role: str, lctl_command: Sequence[str] = ("lctl",),
                 lnetctl_command: Sequence[str] = ("lnetctl",), timeout_s: float = 10.0) -> None:
        self.role = role
        self.lctl_command = list(lctl_command)
        self.lnetctl_command = list(lnetctl_command)
        self.timeout_s = timeout_s
        self.description = f"{' '.join(self.lctl_command)} get_param"
        self._dump: ParamDump | None = None
        self._failure: SourceUnavailable | None = None
        self._lnetctl: str | None = None

    def refresh(self) -> None:
        params = self.OSS_PARAMS if self.role == "oss" else self.MDS_PARAMS
        self._dump, self._failure, self._lnetctl = None, None, None
        try:
            self._dump = parse_get_param(run_lctl(self.lctl_command, params, self.timeout_s),
                                         self.description)
        except SourceUnavailable as exc:
            self._failure = exc
        except LustreStatsError as exc:
            self._failure = SourceUnavailable(self.description, "garbled", str(exc))

    def _need_dump(self) -> ParamDump:
        if self._dump is None:
            raise self._failure or SourceUnavailable(self.description, "command", "not run yet")
        return self._dump

    def targets(self, kind: str) -> list[str]:
        dump = self._need_dump()
        names: set[str] = set()
        marker = "-OST" if kind == "ost" else "-MDT"
        for param in dump.values:
            head, _, rest = param.partition(".")
            target = rest.partition(".")[0]
            if kind == "ost" and head == "obdfilter" or kind == "mdt" and head == "mdt":
                names.add(target)
            elif head.startswith("osd-") and marker in target:
                names.add(target)
        return sorted(names)

    def read_target(self, kind: str, target: str, name: str) -> tuple[str, str]:
        dump = self._need_dump()
        heads = ("obdfilter", "osd-*") if kind == "ost" else ("mdt", "osd-*")
        for head in heads:
            found = dump.matching(head, name).get(target)
            if found is not None:
                return found, f"{head}.{target}.{name}"
        raise SourceUnavailable(f"{heads[0]}.{target}.{name}", "missing", "not in lctl output")

    def read_server(self, name: str) -> tuple[str, str]:
        if name == "lnetctl":
            return self._run_lnetctl()
        dump = self._need_dump()
        param = "stats" if name == "lnet_stats" else name
        if param in dump.values:
            return dump.values[param], param
        raise SourceUnavailable(param, "missing", "not in lctl output")

    def read_family(self, family: str, leaf: str) -> dict[str, tuple[str, str]]:
        dump = self._need_dump()
        out: dict[str, tuple[str, str]] = {}
        for param, text in dump.values.items():
            head, _, rest = param.partition(".")
            device, _, tail = rest.partition(".")
            if head != family or not device:
                continue
            if family == "osp" and tail == leaf:
                out[device] = (text, param)
            elif family == "lod" and tail.startswith(leaf + "."):
                out[f"{device}.{tail[len(leaf) + 1:]}"] = (text, param)
        if not out:
            raise SourceUnavailable(f"{family}.*.{leaf}", "missing", "not in lctl output")
        return out

    def _run_lnetctl(self) -> tuple[str, str]:
        import subprocess
        if not self.lnetctl_command or shutil.which(self.lnetctl_command[0]) is None:
            raise SourceUnavailable("lnetctl", "missing", "command not found")
        argv = [*self.lnetctl_command, "stats", "show"]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s,
                                  check=False, errors="replace")
        except (OSError, subprocess.SubprocessError) as exc:
            raise SourceUnavailable("lnetctl", "command", str(exc)) from exc
        if proc.returncode != 0:
            raise SourceUnavailable("lnetctl", "command", f"exit {proc.returncode}")
        return proc.stdout, " ".join(argv)


def make_source(kind: str, role: str, root: str, lctl_command: Sequence[str],
                lnetctl_command: Sequence[str]) -> StatsSource:
    """Pick the access path: ``files``, ``lctl``, or ``auto`` (lctl when it is on PATH and no
    root other than ``/`` was given, else files)."""
    if kind == "auto":
        use_lctl = root in ("/", "") and bool(lctl_command) and shutil.which(lctl_command[0])
        kind = "lctl" if use_lctl else "files"
    if kind == "lctl":
        return LctlSource(role, lctl_command, lnetctl_command)
    if kind == "files":
        return FileSource(root or "/")
    raise ValueError(f"unknown source kind {kind!r} (files, lctl, auto)")
