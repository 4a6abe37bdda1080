"""The flow-level model's calibration: link goodput efficiency measured with ns-3.

``lustre_alloc/simulator/data/net_calibration.json`` (written by ``bench/network_calibrate.py``)
holds, per MTU and link type, the aggregate TCP goodput ns-3 achieves when ``n``
connections share one link of that type, divided by the link's nominal rate::

    {"format": 1, "ns3_version": "3.44", "window_ms": ..., "warmup_ms": ...,
     "mtu": {"1500": {"client": {"connections": [1, 2, 4, ...],
                                 "efficiency": [0.96, 0.96, ...]}, "router": {...}, "oss": {...}}}}

Between measured connection counts the efficiency is interpolated linearly in
``log2(n)``; beyond the last it stays at the last value. An MTU that was not measured
uses the header overhead of TCP/IPv4 with timestamps over a point-to-point link,
``(mtu - 52) / (mtu + 2)`` (the ns-3 PPP header is 2 bytes), which is what ns-3
achieves with few connections.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

CALIBRATION_PATH = Path(__file__).resolve().parent.parent / "data" / "net_calibration.json"
TCP_IP_HEADER_BYTES = 52
"""IPv4 (20) + TCP (20) + TCP timestamp option (12): what a segment carries besides data."""
PPP_HEADER_BYTES = 2
"""ns-3 point-to-point framing (PPP protocol field) per packet."""


class CalibrationError(ValueError):
    """The calibration file is missing or malformed; the message names the file and key."""


@dataclass(frozen=True)
class Calibration:
    """Efficiency tables: ``tables[(mtu, link_type)] = (connections, efficiency)``."""
    tables: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]
    meta: dict

    def efficiency(self, link_type: str, connections: np.ndarray, mtu: int) -> np.ndarray:
        """Goodput / nominal rate for links of ``link_type`` carrying ``connections``
        TCP connections each (array), at ``mtu``."""
        n = np.maximum(np.asarray(connections, dtype=float), 1.0)
        table = self.tables.get((int(mtu), link_type))
        if table is None:
            return np.full(n.shape, (mtu - TCP_IP_HEADER_BYTES) / (mtu + PPP_HEADER_BYTES))
        conns, eff = table
        return np.interp(np.log2(n), np.log2(conns), eff)


@lru_cache(maxsize=4)
def load_calibration(path: str | Path = CALIBRATION_PATH) -> Calibration:
    """Read a calibration file (cached per path).

    Raises:
        CalibrationError: missing file, bad JSON, or a table whose arrays differ in
            length or are not increasing in connections.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CalibrationError(f"{path}: calibration file not found "
                               f"(regenerate: python bench/network_calibrate.py)") from None
    except json.JSONDecodeError as e:
        raise CalibrationError(f"{path}: not valid JSON: {e}") from None
    tables = {}
    for mtu, by_type in data.get("mtu", {}).items():
        for lt, t in by_type.items():
            where = f"{path}: mtu.{mtu}.{lt}"
            conns = np.asarray(t.get("connections", []), dtype=float)
            eff = np.asarray(t.get("efficiency", []), dtype=float)
            if len(conns) == 0 or len(conns) != len(eff):
                raise CalibrationError(f"{where}: connections and efficiency must be non-empty "
                                       f"and of equal length")
            if (np.diff(conns) <= 0).any() or conns[0] < 1:
                raise CalibrationError(f"{where}: connections must be increasing and >= 1")
            if ((eff <= 0) | (eff > 1)).any():
                raise CalibrationError(f"{where}: efficiency must be within (0, 1]")
            tables[(int(mtu), lt)] = (conns, eff)
    meta = {k: v for k, v in data.items() if k != "mtu"}
    return Calibration(tables=tables, meta=meta)
