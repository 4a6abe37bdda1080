"""Reader of a Lustre Monitoring Tool (LMT) MySQL/SQLite database, pytokio ``connectors`` style.

LMT (https://github.com/LLNL/lmt) samples every OST's cumulative ``READ_BYTES`` and
``WRITE_BYTES`` counters (bytes since the OSS started), its ``KBYTES_FREE``/``KBYTES_USED``,
and every OSS's ``PCT_CPU`` every 5 s into ``OST_DATA``/``OSS_DATA`` rows keyed by
``TS_ID`` (``TIMESTAMP_INFO``); ``OST_INFO`` names the OSTs and their OSS. pytokio's
``tokio.connectors.lmtdb`` reads the same tables; this is our own small reader on the
standard library's ``sqlite3`` (the repository ships NERSC's snx11025 SQLite export,
``lustre_alloc_data/nersc-pytokio/snx11025_2018-01-28.sqlite3``).

Everything is returned as numpy arrays in OST order (``OST_INFO.OST_NAME`` sorted, i.e.
OST index order). Rates are bytes/s over each sampling interval (counter differences /
timestamp differences; a counter that goes backwards, an OSS restart, gives 0 for that
interval).
"""
from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np


class LmtError(ValueError):
    """An unreadable or inconsistent LMT database. ``str()`` is one line naming the file."""


@dataclass(frozen=True)
class LmtData:
    """Per-OST counters and rates of one LMT database.

    Attributes:
        path: the database file.
        ost_names: ``fsname-OSTxxxx`` in index order, shape (N,).
        ost_index: OST index (hex suffix of the name), shape (N,).
        oss_names: host name of each OST's OSS, shape (N,).
        times_s: sample times, seconds since the first sample, shape (T,).
        read_bytes, write_bytes: cumulative counters, shape (N, T).
        kbytes_used, kbytes_free: KiB, shape (N, T).
        oss_cpu_percent: CPU% of each OST's OSS, shape (N, T).
    """
    path: Path
    ost_names: tuple[str, ...]
    ost_index: np.ndarray
    oss_names: tuple[str, ...]
    times_s: np.ndarray
    read_bytes: np.ndarray
    write_bytes: np.ndarray
    kbytes_used: np.ndarray
    kbytes_free: np.ndarray
    oss_cpu_percent: np.ndarray

    @property
    def interval_s(self) -> np.ndarray:
        """Length of each sampling interval, seconds, shape (T-1,)."""
        return np.diff(self.times_s)

    def rates(self, which: str) -> np.ndarray:
        """``read`` or ``write`` bytes/s per OST and interval, shape (N, T-1), >= 0."""
        counter = {"read": self.read_bytes, "write": self.write_bytes}[which]
        d = np.diff(counter, axis=1)
        return np.maximum(d, 0.0) / self.interval_s[None, :]


def read_lmt(path: str | Path) -> LmtData:
    """Read an LMT SQLite database (tables ``OST_INFO``, ``OST_DATA``, ``TIMESTAMP_INFO``,
    ``OSS_DATA``, ``OSS_INFO``).

    Raises:
        LmtError: missing file, not SQLite, missing table/column, or an OST without a
            sample at some timestamp.
    """
    p = Path(path)
    if not p.is_file():
        raise LmtError(f"{p}: LMT database not found")
    try:
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            info = con.execute("SELECT OST_ID, OST_NAME, HOSTNAME FROM OST_INFO").fetchall()
            ts = con.execute("SELECT TS_ID, TIMESTAMP FROM TIMESTAMP_INFO ORDER BY TS_ID").fetchall()
            data = con.execute("SELECT OST_ID, TS_ID, READ_BYTES, WRITE_BYTES, KBYTES_USED, "
                               "KBYTES_FREE FROM OST_DATA").fetchall()
            oss_ids = dict(con.execute("SELECT HOSTNAME, OSS_ID FROM OSS_INFO").fetchall())
            cpu = con.execute("SELECT OSS_ID, TS_ID, PCT_CPU FROM OSS_DATA").fetchall()
        finally:
            con.close()
    except sqlite3.Error as e:
        raise LmtError(f"{p}: not a readable LMT database: {e}") from None
    if not info or not ts:
        raise LmtError(f"{p}: no OSTs or no timestamps")
    info.sort(key=lambda r: r[1])
    row_of = {ost_id: k for k, (ost_id, _, _) in enumerate(info)}
    ts_ids = [t for t, _ in ts]
    col_of = {t: k for k, t in enumerate(ts_ids)}
    try:
        when = [datetime.fromisoformat(str(s)) for _, s in ts]
    except ValueError as e:
        raise LmtError(f"{p}: TIMESTAMP_INFO.TIMESTAMP: {e}") from None
    times = np.array([(w - when[0]).total_seconds() for w in when])
    n, t = len(info), len(ts_ids)
    arrays = np.full((4, n, t), np.nan)
    for ost_id, ts_id, rb, wb, ku, kf in data:
        if ost_id in row_of and ts_id in col_of:
            arrays[:, row_of[ost_id], col_of[ts_id]] = (rb, wb, ku, kf)
    if np.isnan(arrays).any():
        k = np.argwhere(np.isnan(arrays[0]))[0] if np.isnan(arrays[0]).any() else \
            np.argwhere(np.isnan(arrays).any(axis=0))[0]
        raise LmtError(f"{p}: OST_DATA: no sample for {info[k[0]][1]} at TS_ID {ts_ids[k[1]]}")
    cpu_arr = np.zeros((n, t))
    oss_row: dict[int, list[int]] = {}
    for k, (_, _, host) in enumerate(info):
        oss_row.setdefault(oss_ids.get(host, -1), []).append(k)
    for oss_id, ts_id, pct in cpu:
        if ts_id in col_of:
            for k in oss_row.get(oss_id, ()):
                cpu_arr[k, col_of[ts_id]] = float(pct or 0.0)
    names = tuple(str(r[1]) for r in info)
    try:
        index = np.array([int(nm.rsplit("OST", 1)[1], 16) for nm in names])
    except (IndexError, ValueError):
        raise LmtError(f"{p}: OST_INFO.OST_NAME: expected fsname-OSTxxxx names, got {names[:3]}") from None
    return LmtData(path=p, ost_names=names, ost_index=index,
                   oss_names=tuple(str(r[2]) for r in info), times_s=times,
                   read_bytes=arrays[0], write_bytes=arrays[1], kbytes_used=arrays[2],
                   kbytes_free=arrays[3], oss_cpu_percent=cpu_arr)


STATISTICS = ("write_peak", "write_p95", "read_peak", "lifetime_bytes")
"""Per-OST statistics :func:`ost_spread` can derive (see its doc)."""


def ost_spread(data: LmtData, statistic: str) -> np.ndarray:
    """A per-OST statistic normalised to its median over the OSTs, shape (N,).

    * ``write_peak`` / ``read_peak``: the highest 5 s write / read rate of each OST over
      the database's window;
    * ``write_p95``: the 95th percentile of its 5 s write rates;
    * ``lifetime_bytes``: ``READ_BYTES + WRITE_BYTES`` at the first sample, i.e. what the OST
      served since its counters started (the longest history the database holds).

    Raises:
        LmtError: unknown statistic, or a median of 0 (nothing to normalise to).
    """
    if statistic == "write_peak":
        v = data.rates("write").max(axis=1)
    elif statistic == "read_peak":
        v = data.rates("read").max(axis=1)
    elif statistic == "write_p95":
        v = np.percentile(data.rates("write"), 95, axis=1)
    elif statistic == "lifetime_bytes":
        v = data.read_bytes[:, 0] + data.write_bytes[:, 0]
    else:
        raise LmtError(f"{data.path}: unknown statistic {statistic!r} (known: {', '.join(STATISTICS)})")
    med = float(np.median(v))
    if med <= 0:
        raise LmtError(f"{data.path}: {statistic}: median over the OSTs is 0")
    return v / med


BACKGROUND_MAGIC = "# lustre-alloc background v1"
BACKGROUND_COLUMNS = ("timestamp_s", "ost", "read_bytes", "write_bytes")


def background_rows(data: LmtData) -> list[tuple[float, int, int, int]]:
    """Per-OST background traffic of an LMT database: for every sampling interval and OST
    with traffic, the bytes read and written over that interval, stamped at the
    interval's start (seconds since the first sample), in time order."""
    r, w = data.rates("read"), data.rates("write")
    dt = data.interval_s
    rows = []
    for k in range(len(dt)):
        for o in range(len(data.ost_index)):
            rb, wb = int(round(r[o, k] * dt[k])), int(round(w[o, k] * dt[k]))
            if rb or wb:
                rows.append((float(data.times_s[k]), int(data.ost_index[o]), rb, wb))
    return rows


def write_background(path: str | Path, rows: list[tuple[float, int, int, int]],
                     comments: list[str] = ()) -> int:
    """Write a background-traffic file (CSV; magic line, ``#`` comments, header)."""
    lines = [BACKGROUND_MAGIC] + [f"# {c}" for c in comments] + [",".join(BACKGROUND_COLUMNS)]
    lines += [f"{t:.3f},{o},{rb},{wb}" for t, o, rb, wb in rows]
    Path(path).write_text("\n".join(lines) + "\n")
    return len(rows)


def read_background(path: str | Path) -> list[tuple[float, int, int, int]]:
    """Read a background-traffic file written by :func:`write_background`.

    Raises:
        LmtError: ``file:line: reason`` for a missing magic line, a bad field, or
            timestamps going backwards.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise LmtError(f"{p}: {e.strerror}") from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != BACKGROUND_MAGIC:
        raise LmtError(f"{p}:1: expected the magic line {BACKGROUND_MAGIC!r}")
    rows: list[tuple[float, int, int, int]] = []
    header = False
    last = -math.inf
    for ln, line in enumerate(lines[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        if not header:
            if tuple(x.strip() for x in line.split(",")) != BACKGROUND_COLUMNS:
                raise LmtError(f"{p}:{ln}: expected the header {','.join(BACKGROUND_COLUMNS)}")
            header = True
            continue
        parts = line.split(",")
        if len(parts) != 4:
            raise LmtError(f"{p}:{ln}: expected 4 fields, got {len(parts)}")
        try:
            t, o, rb, wb = float(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            raise LmtError(f"{p}:{ln}: expected timestamp_s,ost,read_bytes,write_bytes numbers") from None
        if not math.isfinite(t) or t < 0 or o < 0 or rb < 0 or wb < 0:
            raise LmtError(f"{p}:{ln}: negative or non-finite value")
        if t < last:
            raise LmtError(f"{p}:{ln}: timestamp {t} before the previous {last}")
        last = t
        rows.append((t, o, rb, wb))
    return rows
