"""The planner's inputs, read from what real Lustre tools print.

* File list: ``lfs find <dir> -type f -size +1G -printf '%s %p\\n'`` (Lustre 2.15+
  ``lfs find`` takes ``find(1)``'s ``-printf``): one line per file, the size in bytes
  (``%s``), one space, the path (``%p``, may contain spaces).
* Layouts: ``lfs getstripe <file>...`` (or ``lfs getstripe -r <dir>``), both the plain
  RAID0 form (``lmm_stripe_count:`` ... then the ``obdidx objid objid group`` table)
  and the composite/PFL form (``lcm_*``/``lcme_*`` keys, ``- 0: { l_ost_idx: 3, ...}``
  object lines). A file's OSTs are the objects of all its initialised components.
* Access rates (optional): ``<bytes per second> <path>`` per line, e.g. summed from
  ``job_stats`` or Darshan over the last day; files not listed count as 0.
* Cluster state: an ``lfs df`` snapshot (:func:`lustre_alloc.traces.lfs_df.read_lfs_df`, the last
  snapshot of the file) or a cluster-state JSON written by :func:`write_state_json`
  (what the mapper's :class:`~lustre_alloc.mapper.state.cluster_state.ClusterSnapshot` holds, with
  each OST's measured bandwidth).

Every reader raises :class:`~lustre_alloc.rebalance.plan.PlanInputError` with
``file:line: reason`` for a malformed line.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

from lustre_alloc.rebalance.plan import FileTable, MigrationOsts, PlanInputError
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OssState, OstFlag, OstState
from lustre_alloc.traces.lfs_df import LustreDumpFormatError, read_lfs_df

PRINTF_FORMAT = "%s %p\\n"
"""The ``lfs find -printf`` format string the file-list reader accepts."""


def _lines(path: str | Path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, start=1):
                yield n, line.rstrip("\r\n")
    except OSError as e:
        raise PlanInputError(f"{path}: {e.strerror}") from None


def read_find_printf(path: str | Path) -> tuple[list[str], list[float]]:
    """Paths and sizes (bytes) from ``lfs find ... -printf '%s %p\\n'`` output.

    Raises:
        PlanInputError: ``file:line`` for a line that is not ``<size> <path>``, or a
            path listed twice.
    """
    paths, sizes, seen = [], [], set()
    for n, line in _lines(path):
        if not line.strip():
            continue
        size, _, name = line.partition(" ")
        if not size.isdigit() or not name:
            raise PlanInputError(f"{path}:{n}: expected '<size bytes> <path>' "
                                 f"(lfs find -printf '{PRINTF_FORMAT}'), got {line[:80]!r}")
        if name in seen:
            raise PlanInputError(f"{path}:{n}: {name} listed twice")
        seen.add(name)
        paths.append(name)
        sizes.append(float(size))
    if not paths:
        raise PlanInputError(f"{path}: no file listed")
    return paths, sizes


_KEY = re.compile(r"^\s*(lmm_\w+|lcm_\w+|lcme_[\w.]+|obdidx\b)")
_OBJ_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(0x[0-9a-fA-F]+|\d+)\s+(\S+)\s*$")
_PFL_OBJ = re.compile(r"^\s*-\s*\d+:\s*\{\s*l_ost_idx:\s*(\d+)")
_STRIPE_SIZE = re.compile(r"^\s*lmm_stripe_size:\s+(\d+)")


def read_getstripe(path: str | Path) -> dict[str, tuple[list[int], int]]:
    """``lfs getstripe`` output -> {file path: (OST indices in stripe order, stripe size)}.

    A line that starts at column 0 and is not a layout key is a file name; the object
    lines under it give its OSTs. Directories (no objects) are left out.

    Raises:
        PlanInputError: ``file:line`` for an object line before any file name, or a
            malformed ``lmm_stripe_size``.
    """
    out: dict[str, tuple[list[int], int]] = {}
    cur: str | None = None
    osts: list[int] = []
    stripe = 0

    def flush() -> None:
        if cur is not None and osts:
            out[cur] = (list(osts), stripe)

    for n, line in _lines(path):
        if not line.strip():
            continue
        m = _PFL_OBJ.match(line) or (None if "objid" in line else _OBJ_ROW.match(line))
        if m:
            if cur is None:
                raise PlanInputError(f"{path}:{n}: object line before any file name")
            osts.append(int(m.group(1)))
            continue
        if not line[0].isspace() and not _KEY.match(line):
            flush()
            cur, osts, stripe = line.strip(), [], 0
            continue
        s = _STRIPE_SIZE.match(line)
        if s and not stripe:
            stripe = int(s.group(1))
    flush()
    return out


def read_access_rates(path: str | Path) -> dict[str, float]:
    """``<bytes per second> <path>`` lines -> {path: rate}. Raises PlanInputError."""
    rates = {}
    for n, line in _lines(path):
        if not line.strip():
            continue
        rate, _, name = line.partition(" ")
        try:
            value = float(rate)
        except ValueError:
            value = -1.0
        if not name or not value >= 0:
            raise PlanInputError(f"{path}:{n}: expected '<bytes per second> <path>', "
                                 f"got {line[:80]!r}")
        rates[name] = value
    return rates


def build_file_table(find_path: str | Path, getstripe_path: str | Path,
                     access_path: str | Path | None = None) -> FileTable:
    """Join the file list, the layouts and the access rates into a :class:`FileTable`.

    Raises:
        PlanInputError: a listed file with no layout in the ``getstripe`` output.
    """
    paths, sizes = read_find_printf(find_path)
    layouts = read_getstripe(getstripe_path)
    rates = read_access_rates(access_path) if access_path else {}
    osts, stripe = [], []
    for p in paths:
        lay = layouts.get(p)
        if lay is None:
            raise PlanInputError(f"{find_path}: {p}: no layout in {getstripe_path} "
                                 f"(lfs getstripe output)")
        osts.append(lay[0])
        stripe.append(lay[1])
    return FileTable.from_lists(paths, sizes, osts, [rates.get(p, 0.0) for p in paths], stripe)


def write_state_json(snapshot: ClusterSnapshot, bandwidth_bytes_s: dict[int, float],
                     path: str | Path) -> None:
    """Write ``snapshot`` and each OST's measured bandwidth (bytes/s) as JSON."""
    osts = []
    for o in snapshot.osts:
        d = asdict(o)
        d["flags"] = int(o.flags)
        d["bandwidth_bytes_s"] = float(bandwidth_bytes_s[o.index])
        osts.append(d)
    Path(path).write_text(json.dumps({"osts": osts}, indent=1) + "\n", encoding="utf-8")


_OST_FIELDS = ("index", "kbytes_total", "kbytes_free", "kbytes_avail")


def read_state(path: str | Path, ost_rate_bytes_s: float | None = None,
               fsname: str | None = None) -> MigrationOsts:
    """The cluster from a state JSON or an ``lfs df`` snapshot.

    ``ost_rate_bytes_s`` gives every OST's bandwidth when the file has none (``lfs df``
    never has it). ``fsname`` picks a file system when the ``lfs df`` output has several.

    Raises:
        PlanInputError: one line naming the file and the missing key or field.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise PlanInputError(f"{path}: {e.strerror}") from None
    if text.lstrip().startswith("{"):
        return _read_state_json(p, text, ost_rate_bytes_s)
    try:
        df = read_lfs_df(p)
    except LustreDumpFormatError as e:
        raise PlanInputError(str(e)) from None
    if not df.snapshots:
        raise PlanInputError(f"{path}: neither a state JSON nor lfs df output")
    fss = df.snapshots[-1].filesystems
    if fsname is None and len(fss) != 1:
        raise PlanInputError(f"{path}: {len(fss)} file systems ({', '.join(fss)}): "
                             f"choose one with --fsname")
    fs = fss.get(fsname) if fsname else next(iter(fss.values()))
    if fs is None or not fs.osts:
        raise PlanInputError(f"{path}: no OST of file system {fsname!r}")
    if ost_rate_bytes_s is None:
        raise PlanInputError(f"{path}: lfs df has no OST bandwidth: give --ost-rate-mib-s")
    osts = [OstState(index=t.index, oss="?", kbytes_total=t.kbytes_total,
                     kbytes_free=t.kbytes_total - t.kbytes_used, kbytes_avail=t.kbytes_avail)
            for t in fs.osts]
    snap = ClusterSnapshot(osts=osts, osses={"?": OssState("?")})
    return MigrationOsts.from_snapshot(snap, ost_rate_bytes_s)


def _read_state_json(p: Path, text: str, rate: float | None) -> MigrationOsts:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanInputError(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("osts"), list):
        raise PlanInputError(f"{p}: missing key 'osts' (a list of OSTs)")
    osts, rates = [], {}
    for i, d in enumerate(raw["osts"]):
        if not isinstance(d, dict):
            raise PlanInputError(f"{p}: osts[{i}] is not an object")
        for key in _OST_FIELDS:
            if not isinstance(d.get(key), int):
                raise PlanInputError(f"{p}: osts[{i}]: missing or non-integer field {key!r}")
        bw = d.get("bandwidth_bytes_s", rate)
        if bw is None:
            raise PlanInputError(f"{p}: osts[{i}]: no 'bandwidth_bytes_s' and no --ost-rate-mib-s")
        rates[d["index"]] = float(bw)
        osts.append(OstState(index=d["index"], oss=str(d.get("oss", "?")),
                             kbytes_total=d["kbytes_total"], kbytes_free=d["kbytes_free"],
                             kbytes_avail=d["kbytes_avail"],
                             files_free=int(d.get("files_free", 1 << 24)),
                             files_precreated=int(d.get("files_precreated", 128)),
                             active=bool(d.get("active", True)),
                             flags=OstFlag(int(d.get("flags", 0)))))
    if not osts:
        raise PlanInputError(f"{p}: 'osts' is empty")
    try:
        snap = ClusterSnapshot(osts=osts, osses={})
    except ValueError as e:
        raise PlanInputError(f"{p}: {e}") from None
    return MigrationOsts.from_snapshot(snap, rates)

