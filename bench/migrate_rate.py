"""The migration service's per-move rate under its budget, measured in the emulated stack
(the service's own loop, the stand-in ``lfs migrate`` pacing its copy at ``-W``) and in the
simulator (the same budget code deciding the cap of each move's transfers), side by side:

    python bench/migrate_rate.py [--ost-mib-s 40] [--share 0.1] [--files 8] [--mib 8]

One setup for both: 4 OSTs on 2 OSSes, each rated ``--ost-mib-s``, OSTs 0 and 1 at 80% full
and 2 and 3 empty, the service balancing fill (``balance_fill``) with ``ost_share``
``--share``, ``max_per_oss`` 2 and ``lfs_bandwidth_option`` on (Lustre 2.16+: every move
capped with ``-W`` at :meth:`lustre_alloc.rebalance.budget.MigrationBudget.bandwidth_limit`, here
``share x rate / 2``). Emulated: ``--files`` files of ``--mib`` MiB on OSTs 0 and 1 (real
files, copied by the stand-in lfs); each move's rate is its bytes over the time from its
``running`` to its ``done`` journal record (loop: 0.1 s). Simulated: the same world with the
used space as 1 GiB files (``files_gib``); each move's rate is its bytes over the time from
its start to its layout swap. Per OST: bytes moved off it over the span of its moves.

Without ``-W`` (before 2.16, the default) the two cannot be compared this way: the stand-in
copies at the host disk's speed, the simulator at the OSTs' modelled bandwidth; the budget
then spaces the starts only (docs/rebalance.md, "What the budget bounds, per release").
Prints one JSON object; ``ratio`` is emulated over simulated per-move MiB/s.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client import CollectorRegistry  # noqa: E402

from lustre_alloc.common import lustre_layout as ll  # noqa: E402
from lustre_alloc.livestack.emulator import LOV_XATTR  # noqa: E402
from lustre_alloc.rebalance.budget import BudgetParams  # noqa: E402
from lustre_alloc.rebalance.config import MigrateConfig  # noqa: E402
from lustre_alloc.rebalance.service import MigrationService  # noqa: E402
from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy  # noqa: E402
from lustre_alloc.simulator.scenario import load_scenario  # noqa: E402

MIB = 1 << 20
OSTS, PER_OSS = 4, 2
FILL = (0.8, 0.8, 0.0, 0.0)


class FillView:
    """The mapper's ``migration_view``: 4 alike OSTs on 2 OSSes, 0 and 1 full."""

    def view(self, report: dict) -> dict:
        total = 1 << 30
        return {"fsname": "demofs", "time_s": time.time(), "osts": [
            {"ost": i, "oss": f"oss{i // PER_OSS}", "kbytes_total": total,
             "kbytes_used": int(FILL[i] * total), "available": True, "degraded": False,
             "receives": True, "speed_ratio": 1.0, "jobs_bytes_s": 0.0, "steered": None}
            for i in range(OSTS)]}


def _budget(share: float) -> BudgetParams:
    return BudgetParams(ost_share=share, max_per_oss=2, max_in_flight_ratio=1.0)


def emulated(ost_mib_s: float, share: float, files: int, mib: int) -> dict:
    """Per-move and per-OST MiB/s of the service with the stand-in lfs."""
    tmp = Path(tempfile.mkdtemp(prefix="migrate-rate-"))
    root = tmp / "mnt"
    root.mkdir()
    for i in range(files):
        p = root / f"f{i}"
        p.write_bytes(os.urandom(mib * MIB))
        os.setxattr(p, LOV_XATTR, ll.stored([i % 2], MIB))
        os.utime(p, (time.time() - 7200,) * 2)
    cfg = MigrateConfig(fsname="demofs", mount=str(root), ost_rate_mib_s=ost_mib_s, mode="on",
                        lfs=f"{sys.executable} -m lustre_alloc.livestack.lfs", layout_xattr=LOV_XATTR,
                        lfs_bandwidth_option=True, state_dir=str(tmp / "state"),
                        interval_s=0.1, quiet_s=0.0, retry_s=0.0, balance_fill=True,
                        budget=_budget(share))
    svc = MigrationService(cfg, FillView(), registry=CollectorRegistry())
    end = time.monotonic() + 600
    while time.monotonic() < end:
        svc.step()
        if svc.planned_at > 0 and not svc.queue and not len(svc.runner):
            break
        time.sleep(cfg.interval_s)
    events = [json.loads(x) for x in (tmp / "state/journal.jsonl").read_text().splitlines()]
    running = {e["file"]: e["t"] for e in events if e["event"] == "running"}
    started = {e["file"]: e for e in events if e["event"] == "started"}
    moves = [(started[e["file"]]["bytes"], e["t"] - running[e["file"]],
              tuple(started[e["file"]]["from"]), running[e["file"]], e["t"])
             for e in events if e["event"] == "done"]
    return _rates(moves)


def simulated(ost_mib_s: float, share: float) -> dict:
    """Per-move and per-OST MiB/s of the simulator's migrate event."""
    tmp = Path(tempfile.mkdtemp(prefix="migrate-rate-sim-"))
    (tmp / "t.csv").write_text("# lustre-alloc trace v1\ntimestamp_s,op,job_id,file_id,bytes,"
                               "stripe_count,stripe_size,ost,ops\n10,write,a,x,1048576,1,,,1\n")
    (tmp / "w.toml").write_text(f"""name = "migrate-rate"
duration_s = 7200
seed = 1
policies = ["round_robin"]

[cluster]
oss_count = {OSTS // PER_OSS}
osts_per_oss = {PER_OSS}
ost_size_gib = 64
ost_bandwidth_mib_s = {ost_mib_s}
stats_interval_s = 5
statfs_interval_s = 5

[cluster.initial_fill]
mode = "explicit"
used_fraction = {list(FILL)}
files_gib = 1

[[event]]
kind = "migrate"
every_s = 60
start_s = 0
balance_fill = true
quiet_s = 0
ost_share = {share}
max_per_oss = 2
max_in_flight_ratio = 1.0
lfs_bandwidth_option = true

[[workload]]
trace = "t.csv"
""")
    sc = load_scenario(tmp / "w.toml")
    sim = build_simulation(sc, prepare(sc), scenario_policy(sc, "round_robin"))
    sim.run()
    return _rates([(b, s, osts, 0.0, s) for b, s, osts in sim.rebal.finished], spans=False)


def _rates(moves: list, spans: bool = True) -> dict:
    per_move = [b / s / MIB for b, s, *_ in moves if s > 0]
    out = {"moves": len(per_move),
           "per_move_mib_s": {"median": statistics.median(per_move), "min": min(per_move),
                              "max": max(per_move)} if per_move else None}
    if spans:
        per_ost = {}
        for ost in sorted({o for _, _, osts, *_ in moves for o in osts}):
            mine = [m for m in moves if ost in m[2]]
            span = max(m[4] for m in mine) - min(m[3] for m in mine)
            per_ost[ost] = sum(m[0] / len(m[2]) for m in mine) / span / MIB if span else None
        out["per_source_ost_mib_s"] = per_ost
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ost-mib-s", type=float, default=40.0)
    ap.add_argument("--share", type=float, default=0.1)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--mib", type=int, default=8)
    args = ap.parse_args()
    cap = args.share * args.ost_mib_s / 2
    emu = emulated(args.ost_mib_s, args.share, args.files, args.mib)
    sim = simulated(args.ost_mib_s, args.share)
    ratio = emu["per_move_mib_s"]["median"] / sim["per_move_mib_s"]["median"]
    print(json.dumps({"cap_mib_s": cap, "emulated": emu, "simulated": sim,
                      "ratio": round(ratio, 3)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
