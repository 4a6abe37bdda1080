"""Readers of real Lustre client tool output: ``lfs df`` (OST fill) and ``lctl dl -t``
(OST -> OSS NID), as NERSC's pytokio collects them.

Both files may hold one bare dump or a series of snapshots, each opening with a line
``BEGIN <epoch seconds>`` (pytokio's ``sample_ost-fullness.txt`` and
``sample_ost-map.txt``). Plain text or gzip (``.gz``).

Error policy (as whamcloud/lustre-collector does): a line of a kind the reader knows
(a target line, a device line, ``BEGIN``) that does not parse raises
:class:`LustreDumpFormatError` ``file:line: reason``; a line of an unknown kind (an
``inactive device`` line, a message from the tool, a truncated line) is skipped and
returned in ``skipped`` as ``(line number, text)``, never fatal.
"""
from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator


class LustreDumpFormatError(ValueError):
    """A malformed line of a known kind. ``str()`` is ``file:line: reason``."""

    def __init__(self, path: str, line: int, reason: str):
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{self.path}:{line}: {reason}")


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    p = Path(path)
    with _open(p) as fh:
        for n, line in enumerate(fh, start=1):
            yield n, line.rstrip("\r\n")


_BEGIN = re.compile(r"^BEGIN\s+(\S+)\s*$")


def _begin_epoch(name: str, n: int, m: re.Match) -> int:
    try:
        return int(float(m.group(1)))
    except ValueError:
        raise LustreDumpFormatError(name, n, f"BEGIN: not an epoch time: {m.group(1)!r}") from None


# ---------------------------------------------------------------------------------------
# lfs df
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TargetDf:
    """One OST or MDT line of ``lfs df``. Sizes in KiB (``lfs df`` prints 1K blocks)."""
    kind: str           # "OST" or "MDT"
    index: int
    kbytes_total: int
    kbytes_used: int
    kbytes_avail: int

    @property
    def fill(self) -> float:
        """Used / total, 0..1 (``lfs df``'s ``Use%`` is used / (used + avail), rounded up)."""
        return self.kbytes_used / self.kbytes_total if self.kbytes_total else 0.0


@dataclass
class FilesystemDf:
    """The targets of one file system in one snapshot, OSTs and MDTs in file order."""
    fsname: str
    mount: str
    osts: list[TargetDf] = field(default_factory=list)
    mdts: list[TargetDf] = field(default_factory=list)


@dataclass
class DfSnapshot:
    """One ``lfs df`` run: ``timestamp`` is the ``BEGIN`` epoch (None for a bare dump)."""
    timestamp: int | None
    filesystems: dict[str, FilesystemDf] = field(default_factory=dict)


@dataclass
class LfsDf:
    """What :func:`read_lfs_df` returns: snapshots in file order, skipped lines."""
    path: str
    snapshots: list[DfSnapshot]
    skipped: list[tuple[int, str]]


_DF_TARGET_START = re.compile(r"^\s*\S+-(OST|MDT)[0-9a-fA-F]+_UUID\b")
_DF_TARGET = re.compile(
    r"^\s*(?P<fs>\S+)-(?P<kind>OST|MDT)(?P<hex>[0-9a-fA-F]+)_UUID\s+"
    r"(?P<total>\d+)\s+(?P<used>\d+)\s+(?P<avail>\d+)\s+(?P<pct>\d+|-)%\s+"
    r"(?P<mount>\S+)\[(?P<kind2>OST|MDT):(?P<idx>\d+)\]\s*$")
_DF_KNOWN_SKIP = re.compile(r"^\s*(UUID\s+1K-blocks\b|filesystem[ _]summary:|$)")


def read_lfs_df(path: str | Path) -> LfsDf:
    """Read ``lfs df`` output (one dump, or ``BEGIN <epoch>`` snapshots).

    A target line (pytokio ``sample_ost-fullness.txt``)::

        snx11035-OST0000_UUID 90767651352 65371112780 24440205704  73% /scratch2[OST:0]

    Columns: target UUID (``<fsname>-OST<hex index>_UUID``), ``1K-blocks`` (total,
    KiB), ``Used`` (KiB), ``Available`` (KiB), ``Use%``, mount point with
    ``[OST:<index>]`` or ``[MDT:<index>]``. The ``UUID 1K-blocks ...`` header, blank
    lines and ``filesystem summary:`` lines are known and ignored. File systems are
    keyed by fsname (``snx11035``), the name ``lctl dl`` uses too.

    Raises:
        FileNotFoundError: no such file.
        LustreDumpFormatError: a malformed ``BEGIN`` or target line (``file:line:
            reason``), or a target whose hex name and ``[OST:n]`` index disagree.
    """
    name = str(path)
    snapshots: list[DfSnapshot] = []
    skipped: list[tuple[int, str]] = []
    current: DfSnapshot | None = None
    for n, line in _lines(path):
        m = _BEGIN.match(line)
        if m:
            current = DfSnapshot(_begin_epoch(name, n, m))
            snapshots.append(current)
            continue
        if _DF_KNOWN_SKIP.match(line):
            continue
        if not _DF_TARGET_START.match(line) or "inactive device" in line:
            skipped.append((n, line))
            continue
        m = _DF_TARGET.match(line)
        if not m:
            raise LustreDumpFormatError(
                name, n, "lfs df target line: expected '<fs>-OSTxxxx_UUID <1K-blocks> "
                f"<used> <available> <use%> <mount>[OST:<n>]', got {line.strip()!r}")
        kind, index = m["kind"], int(m["idx"])
        if m["kind2"] != kind or int(m["hex"], 16) != index:
            raise LustreDumpFormatError(
                name, n, f"target {m['fs']}-{kind}{m['hex']} does not match "
                f"[{m['kind2']}:{m['idx']}]")
        total, used, avail = int(m["total"]), int(m["used"]), int(m["avail"])
        if used > total or avail > total:
            raise LustreDumpFormatError(
                name, n, f"used {used} or available {avail} KiB exceeds total {total} KiB")
        if current is None:
            current = DfSnapshot(None)
            snapshots.append(current)
        fs = current.filesystems.get(m["fs"])
        if fs is None:
            fs = current.filesystems[m["fs"]] = FilesystemDf(m["fs"], m["mount"])
        target = TargetDf(kind, index, total, used, avail)
        (fs.osts if kind == "OST" else fs.mdts).append(target)
    return LfsDf(name, snapshots, skipped)


# ---------------------------------------------------------------------------------------
# lctl dl -t
# ---------------------------------------------------------------------------------------

@dataclass
class DeviceMapSnapshot:
    """One ``lctl dl -t`` run: per fsname, target index -> server NID.

    ``timestamp`` is the ``BEGIN`` epoch (None for a bare dump). ``ost_nids`` comes
    from the ``osc`` devices (the OSS serving each OST), ``mdt_nids`` from ``mdc``.
    """
    timestamp: int | None
    ost_nids: dict[str, dict[int, str]] = field(default_factory=dict)
    mdt_nids: dict[str, dict[int, str]] = field(default_factory=dict)

    def osts_by_nid(self, fsname: str) -> dict[str, list[int]]:
        """The OST indices each OSS NID serves, sorted: ``{nid: [ost, ...]}``."""
        out: dict[str, list[int]] = {}
        for ost, nid in sorted(self.ost_nids.get(fsname, {}).items()):
            out.setdefault(nid, []).append(ost)
        return out


@dataclass
class LctlDl:
    """What :func:`read_lctl_dl` returns: snapshots in file order, skipped lines."""
    path: str
    snapshots: list[DeviceMapSnapshot]
    skipped: list[tuple[int, str]]


_DL_DEVICE = re.compile(
    r"^\s*(?P<dev>\d+)\s+(?P<status>[A-Z]{2})\s+(?P<type>\S+)\s+(?P<name>\S+)\s+"
    r"(?P<uuid>\S+)\s+(?P<refs>\d+)(?:\s+(?P<nid>\S+))?\s*$")
_DL_TARGET = re.compile(r"^(?P<fs>.+)-(?P<kind>OST|MDT)(?P<hex>[0-9a-fA-F]+)-(?:osc|mdc)-")


def read_lctl_dl(path: str | Path) -> LctlDl:
    """Read ``lctl dl -t`` output (one dump, or ``BEGIN <epoch>`` snapshots).

    A device line (pytokio ``sample_ost-map.txt``)::

          4 UP osc snx11035-OST0014-osc-ffff885f81a64000 8dbdc7f6-8f86-86ea-052f-357e2db2a7d9 5 10.100.101.25@o2ib2

    Columns: device number, status (``UP``, ``ST``, ``AT``, ``IN``), device type
    (``osc``, ``mdc``, ``mgc``, ``lov``, ``lmv``, ...), device name
    (``<fsname>-OST<hex index>-osc-<client instance>``), client UUID, reference count,
    and with ``-t`` the target's server NID. Only ``osc`` (OST -> OSS NID) and ``mdc``
    (MDT -> MDS NID) lines are used; other device types are known and ignored.

    Raises:
        FileNotFoundError: no such file.
        LustreDumpFormatError: a malformed ``BEGIN`` line, or an ``osc``/``mdc`` line
            without a target name or without the NID column (``lctl dl`` run without
            ``-t``).
    """
    name = str(path)
    snapshots: list[DeviceMapSnapshot] = []
    skipped: list[tuple[int, str]] = []
    current: DeviceMapSnapshot | None = None
    for n, line in _lines(path):
        m = _BEGIN.match(line)
        if m:
            current = DeviceMapSnapshot(_begin_epoch(name, n, m))
            snapshots.append(current)
            continue
        if not line.strip():
            continue
        d = _DL_DEVICE.match(line)
        if not d:
            skipped.append((n, line))
            continue
        if d["type"] not in ("osc", "mdc"):
            continue
        t = _DL_TARGET.match(d["name"])
        if not t:
            raise LustreDumpFormatError(
                name, n, f"{d['type']} device name {d['name']!r} is not "
                f"'<fsname>-OST<hex>-{d['type']}-<instance>'")
        if not d["nid"]:
            raise LustreDumpFormatError(
                name, n, f"{d['type']} device {d['name']} has no NID column (run "
                "'lctl dl -t')")
        if current is None:
            current = DeviceMapSnapshot(None)
            snapshots.append(current)
        table = current.ost_nids if t["kind"] == "OST" else current.mdt_nids
        table.setdefault(t["fs"], {})[int(t["hex"], 16)] = d["nid"]
    return LctlDl(name, snapshots, skipped)
