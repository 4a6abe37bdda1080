"""An admin's mover: drain an OST they name, pause and resume without a restart, per OST
what is left, the rate, an ETA and "drained", scope by pool and path with exclusions, time
windows, an absolute cap, and the plan to review; through ``lustre-alloc-rebalance`` and the
state directory, with the stand-in lfs (lustre_alloc/livestack/lfs.py)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.livestack.emulator import LOV_XATTR
from lustre_alloc.rebalance import admin
from lustre_alloc.rebalance.budget import BudgetParams
from lustre_alloc.rebalance.cli import main as rebalance_main
from lustre_alloc.rebalance.service import MigrationService
from lustre_alloc.rebalance.windows import Window, open_now, parse_window
from tests.rebalance.test_migrate_service import STANDIN_LFS, View, _until_idle

MIB = 1 << 20
DRAINED = 3


def _tree(root: Path) -> dict[str, list[int]]:
    """Files on OST 3 (and one on OST 1): path -> OSTs."""
    layout = {"a/f1": [DRAINED], "a/f2": [DRAINED, 1], "b/keep.tmp": [DRAINED],
              "b/f3": [DRAINED], "c/other": [1]}
    for rel, osts in layout.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(MIB))
        os.setxattr(p, LOV_XATTR, ll.stored(osts, MIB))
        os.utime(p, (time.time() - 7200,) * 2)
    return {str(root / k): v for k, v in layout.items()}


def _config(tmp: Path, **extra) -> Path:
    lines = [f'fsname = "demofs"', f'mount = "{tmp / "mnt"}"', 'mode = "on"',
             "ost_rate_mib_s = 1000", f'lfs = "{STANDIN_LFS}"',
             f'state_dir = "{tmp / "state"}"', "interval_s = 0.1", "quiet_s = 600",
             "retry_s = 0"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    cfg = tmp / "migrate.toml"
    cfg.write_text("[migrate]\n" + "\n".join(lines) + "\n[migrate.budget]\nost_share = 1.0\n"
                   "max_per_oss = 4\nmax_in_flight_ratio = 1.0\n"
                   f'[migrate.development]\nlayout_xattr = "{LOV_XATTR}"\n')
    return cfg


def _service(cfg: Path, registry: CollectorRegistry | None = None) -> MigrationService:
    from lustre_alloc.rebalance.config import load
    return MigrationService(load(cfg), View(), registry=registry or CollectorRegistry())


def _osts(path: str) -> list[int]:
    from lustre_alloc.livestack.lfs import layout_of
    return layout_of(path)[0]


def test_an_admin_drains_an_ost_pauses_resumes_and_sees_it_drained(tmp_path, capsys):
    files = _tree(tmp_path / "mnt")
    cfg = _config(tmp_path, exclude=["*.tmp"])
    registry = CollectorRegistry()
    svc = _service(cfg, registry)
    assert rebalance_main(["pause", "--config", str(cfg), "--reason", "month-end"]) == 0
    assert rebalance_main(["drain", "--config", str(cfg), "demofs-OST0003"]) == 0
    svc.step()
    assert svc.evacuating == [DRAINED] and svc.paused == "by the admin: month-end"
    assert not len(svc.runner) and svc.queue                          # planned, not started
    plan = json.loads((tmp_path / "state" / admin.PLAN_FILE).read_text())
    assert {m["file"] for m in plan["moves"]} == {p for p in files if "a/" in p or "b/f3" in p}
    capsys.readouterr()
    assert rebalance_main(["status", "--config", str(cfg), "--moves"]) == 0
    out = capsys.readouterr().out
    assert "paused: by the admin: month-end" in out and "OST0003 (drained by the admin)" in out
    assert "move " in out
    assert rebalance_main(["resume", "--config", str(cfg)]) == 0
    _until_idle(svc)
    for p, osts in files.items():
        moved = _osts(p)
        assert (DRAINED in moved) == p.endswith(".tmp"), p                # excluded stays
    (ost,) = svc.status()["osts"]
    assert ost["drained"] and ost["unmovable_files"] == 1 and ost["left_bytes"] == 0
    assert ost["eta_s"] == 0.0 and ost["rate_bytes_s"] > 0
    metrics = generate_latest(registry).decode()
    assert 'lustre_alloc_migrate_ost_drained{ost="OST0003"} 1.0' in metrics
    assert 'lustre_alloc_migrate_ost_left_bytes{ost="OST0003"} 0.0' in metrics
    st = admin.read_status(tmp_path / "state")
    assert st["osts"][0]["drained"] and st["drains"] == [DRAINED]
    assert rebalance_main(["undrain", "--config", str(cfg), "3"]) == 0
    svc.step()
    assert svc.evacuating == []


def test_scope_by_path_and_pool(tmp_path):
    files = _tree(tmp_path / "mnt")
    pooled = tmp_path / "mnt" / "a" / "pooled"
    pooled.write_bytes(os.urandom(MIB))
    os.setxattr(pooled, LOV_XATTR, ll.stored([DRAINED], MIB, pool="flash"))
    os.utime(pooled, (time.time() - 7200,) * 2)
    os.environ["LIVESTACK_LFS_POOLS"] = json.dumps({"flash": [DRAINED, 5]})
    try:
        cfg = _config(tmp_path, paths=[str(tmp_path / "mnt" / "a")], pools=["flash"])
        admin.write_orders(tmp_path / "state", admin.AdminOrders(drains={DRAINED: {}}))
        svc = _service(cfg)
        _until_idle(svc)
    finally:
        del os.environ["LIVESTACK_LFS_POOLS"]
    assert _osts(str(pooled)) == [5]                            # in scope: moved, in its pool
    assert all(DRAINED in _osts(p) for p, o in files.items() if DRAINED in o)   # out of scope
    assert svc.skipped["out of scope"] == 4
    (ost,) = svc.status()["osts"]
    assert ost["drained"] and ost["unmovable_files"] == 4       # all it may move, moved


def test_outside_its_windows_nothing_starts(tmp_path):
    _tree(tmp_path / "mnt")
    hour = time.localtime().tm_hour
    closed = f"{(hour + 2) % 24:02d}:00-{(hour + 3) % 24:02d}:00"
    cfg = _config(tmp_path, windows=[closed])
    admin.write_orders(tmp_path / "state", admin.AdminOrders(drains={DRAINED: {}}))
    svc = _service(cfg)
    svc.step()
    assert svc.paused == "outside its time windows" and svc.queue and not len(svc.runner)
    assert admin.read_status(tmp_path / "state")["outside_windows"]


@pytest.mark.parametrize("text,inside,outside", [
    ("22:00-06:00", [(0, 23 * 60), (1, 5 * 60)], [(0, 12 * 60), (0, 6 * 60)]),
    ("sat,sun 00:00-24:00", [(5, 0), (6, 1439)], [(4, 1439), (0, 0)]),
    ("fri 22:00-02:00", [(4, 23 * 60), (5, 60)], [(5, 23 * 60), (3, 23 * 60)]),
])
def test_windows(text, inside, outside):
    w = parse_window(text)
    assert all(w.contains(d, m) for d, m in inside)
    assert not any(w.contains(d, m) for d, m in outside)


def test_bad_admin_input_is_one_line(tmp_path, capsys):
    cfg = _config(tmp_path)
    assert rebalance_main(["drain", "--config", str(cfg), "OSTzz"]) == 2
    err = capsys.readouterr().err
    assert "OSTzz" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / admin.ADMIN_FILE).write_text("{not json")
    svc = _service(cfg)
    svc.step()                                                  # keeps serving
    assert "admin.json" in svc.last_error
    with pytest.raises(ValueError, match="window"):
        parse_window("25:00-26:00")
    assert open_now((), time.time()) and isinstance(parse_window("00:00-24:00"), Window)


def test_an_absolute_cap_spaces_all_moves(tmp_path):
    from lustre_alloc.rebalance.budget import MigrationBudget, Move, OstLoad
    loads = {i: OstLoad(oss=f"oss{i}", rate_bytes_s=1000 * MIB) for i in range(4)}
    b = MigrationBudget(BudgetParams(ost_share=1.0, max_per_oss=8, max_in_flight_ratio=1.0,
                                     max_mib_s=10))
    b.refill(0.0, loads)
    b.start(Move("/a", 100 * MIB, [0], [1]), loads)
    assert b.refusal(Move("/b", MIB, [2], [3]), loads, 1e15) == "all moves at 10 MiB/s"
    b.refill(9.0, loads)
    assert b.refusal(Move("/b", MIB, [2], [3]), loads, 1e15) is not None
    b.refill(11.0, loads)
    assert b.refusal(Move("/b", MIB, [2], [3]), loads, 1e15) is None
    capped = MigrationBudget(BudgetParams(max_mib_s=10, max_per_oss=2), rate_capped=True)
    assert capped.bandwidth_limit(Move("/c", MIB, [0], [1]), loads) == 5 * MIB
