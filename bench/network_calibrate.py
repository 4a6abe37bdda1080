"""Regenerate the flow-level network model's calibration from ns-3 runs.

For each link type (client, LNet router, OSS) and each number of TCP connections ``n``
in 1, 2, 4, ... 64, builds the smallest topology where ``n`` greedy connections share
one link of that type and nothing else is shared (client: one client writing to ``n``
OSSes; oss: ``n`` clients writing to one OSS; router: ``n`` clients behind one LNet
router writing to ``n`` OSSes), measures the aggregate goodput with ns-3
(:func:`lustre_alloc.simulator.network.ns3.measure`) and records goodput / nominal link rate. Writes
``lustre_alloc/simulator/data/net_calibration.json`` (format: :mod:`lustre_alloc.simulator.network.calibration`) and
prints the table. About a minute on 2 cores.

Usage: .venv/bin/python bench/network_calibrate.py [--mtu 1500] [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lustre_alloc.simulator.network.calibration import CALIBRATION_PATH
from lustre_alloc.simulator.network.ns3 import Connection, import_ns3, measure
from lustre_alloc.simulator.network.topology import LnetSpec

CONNECTIONS = (1, 2, 4, 8, 16, 32, 64)
WARMUP_MS, WINDOW_MS = 5.0, 30.0


def connections(link_type: str, n: int) -> tuple[LnetSpec, list[Connection]]:
    """The topology and connections that put ``n`` connections on one ``link_type`` link."""
    if link_type == "client":
        return LnetSpec(client_nodes=1), [Connection(0, s, True) for s in range(n)]
    if link_type == "oss":
        return LnetSpec(client_nodes=n), [Connection(c, 0, True) for c in range(n)]
    return LnetSpec(client_nodes=n, routers=1), [Connection(c, c, True) for c in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mtu", type=int, action="append", help="MTU(s) to calibrate (default 1500)")
    ap.add_argument("--out", type=Path, default=CALIBRATION_PATH)
    args = ap.parse_args()
    console = Console(width=120)
    t0 = time.perf_counter()
    import_ns3()
    console.print(f"ns-3 import {time.perf_counter() - t0:.1f} s")
    ns_version = "3.44"
    try:
        from importlib.metadata import version
        ns_version = version("ns3")
    except Exception:  # noqa: BLE001 - metadata is informative only
        pass
    data = {"format": 1, "source": "bench/network_calibrate.py", "ns3_version": ns_version,
            "warmup_ms": WARMUP_MS, "window_ms": WINDOW_MS, "link_gbit_s": 10.0,
            "link_delay_us": LnetSpec().link_delay_us, "mtu": {}}
    table = Table(title="ns-3 goodput / nominal link rate, by concurrent TCP connections")
    table.add_column("MTU")
    table.add_column("link")
    for n in CONNECTIONS:
        table.add_column(str(n), justify="right")
    for mtu in args.mtu or [1500]:
        by_type = {}
        for lt in ("client", "router", "oss"):
            effs = []
            for n in CONNECTIONS:
                spec, conns = connections(lt, n)
                spec = LnetSpec(**{**spec.__dict__, "mtu_bytes": mtu})
                good = measure(spec, conns, warmup_ms=WARMUP_MS, window_ms=WINDOW_MS)
                effs.append(round(float(good.sum() / spec.link_bytes_s(lt)), 4))
            by_type[lt] = {"connections": list(CONNECTIONS), "efficiency": effs}
            table.add_row(str(mtu), lt, *(f"{e:.4f}" for e in effs))
        data["mtu"][str(mtu)] = by_type
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    console.print(table)
    console.print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
