"""Evacuation on the live stack: an emulated OST slows down, the mapper steers it, the
migration service (``lustre-alloc-rebalance run``, a process) sees the steering through the
mapper's admin socket and moves the files on it with the stand-in ``lfs`` (lustre_alloc/livestack/lfs.py);
killed with -9 while moves run and started again, it loses no file, moves none twice and
leaves none half-moved."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from lustre_alloc.livestack.emulator import LOV_XATTR, EmulatedCluster, lov_user_md_v1
from lustre_alloc.livestack.lfs import layout_of
from lustre_alloc.livestack.stack import EmulatorPump, LiveStack, command, spawn
from lustre_alloc.mapper.service import ctl

from .conftest import INTERVAL_S, READY_TIMEOUT_S, small_cluster
from .test_steer import Background, wait_for

pytestmark = pytest.mark.timeout(300)
SLOW_OST = 5
MIB = 1 << 20


def _files(root: Path, n: int, size: int) -> dict[str, str]:
    root.mkdir(parents=True)
    out = {}
    for i in range(n):
        p = root / f"ckpt.{i}"
        data = os.urandom(size)
        p.write_bytes(data)
        os.setxattr(p, LOV_XATTR, lov_user_md_v1([SLOW_OST] if i % 2 else [SLOW_OST, 2], MIB))
        old = time.time() - 7200
        os.utime(p, (old, old))
        out[str(p)] = hashlib.sha256(data).hexdigest()
    return out


def _journal(state: Path) -> list[dict]:
    path = state / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.endswith("}")]


def test_a_steered_ost_is_evacuated_and_a_killed_service_resumes_cleanly(tmp_path):
    emu = EmulatedCluster(small_cluster(), tmp_path / "servers")
    normal = emu.by_index[SLOW_OST].bandwidth_bytes_s
    pump = EmulatorPump(emu, None, INTERVAL_S / 2).start()
    control = f"ipc://{tmp_path}/control"
    steer = {"mode": "on", "action": "degraded", "interval_s": INTERVAL_S,
             "rate_smoothing": 1.0, "confirm_s": 1.0, "min_dwell_s": 2.0, "action_lease_s": 30.0,
             "max_fraction": 0.2, "rate_relax_s": 3600.0}
    stack = LiveStack(tmp_path, emu, interval_s=INTERVAL_S, steer=steer,
                      mapper_settings={"control_endpoint": control})
    bg = Background(emu, pump)
    files = _files(tmp_path / "mnt", 6, 4 * MIB)
    state = tmp_path / "migrate-state"
    config = tmp_path / "migrate.toml"
    # the slow OST's share is of its measured speed (about 1/50 of 80 MiB/s here): at all of
    # it, split between an OSS's 2 moves, a 4 MiB file takes seconds, so the kill finds some
    # running and the evacuation ends within the test
    config.write_text(f"""[migrate]
fsname = "demofs"
mount = "{tmp_path / 'mnt'}"
mode = "on"
ost_rate_mib_s = 80
mapper_socket = "{control}"
lfs = "{sys.executable} -m lustre_alloc.livestack.lfs"
lfs_bandwidth_option = true
state_dir = "{state}"
interval_s = 0.2
evacuate_after_s = 0
quiet_s = 600
retry_s = 0
[migrate.budget]
ost_share = 1.0
max_per_oss = 2
max_in_flight_ratio = 1.0
[migrate.development]
layout_xattr = "{LOV_XATTR}"
""")
    argv = [*command("lustre-alloc-rebalance", "lustre_alloc.rebalance"), "run", "--config",
            str(config)]
    migrator = None
    try:
        stack.start(READY_TIMEOUT_S)
        bg.start()
        emu.by_index[SLOW_OST].bandwidth_bytes_s = normal / 50

        def steered() -> bool:
            view = ctl.ask(control, {"op": "migration_view", "fsname": "demofs"})
            return view["ok"] and bool(view["osts"][SLOW_OST]["steered"])
        wait_for(steered, 60, "the mapper to steer the slow OST")

        migrator = spawn(argv, stack.log_path("migrate"))
        wait_for(lambda: any(e["event"] == "running" for e in _journal(state)), 60,
                 "a move to start")
        migrator.send_signal(signal.SIGKILL)
        migrator.wait(30)
        in_flight = {e["file"] for e in _journal(state) if e["event"] == "running"} - {
            e["file"] for e in _journal(state) if e["event"] in ("done", "failed", "settled")}
        assert in_flight, "the kill found no move running"

        migrator = spawn(argv, stack.log_path("migrate"))

        def all_moved() -> bool:
            return all(SLOW_OST not in layout_of(p)[0] for p in files)
        wait_for(all_moved, 120, "every file moved off the slow OST")
        wait_for(lambda: not {e["file"] for e in _journal(state) if e["event"] == "running"} - {
            e["file"] for e in _journal(state) if e["event"] in ("done", "settled")}, 30,
            "every move journaled as ended")
        wait_for(lambda: "migration demofs (on" in ctl.format_status(
            ctl.ask(control, {"op": "status"})), 30, "the status to show the migration")
    finally:
        if migrator is not None and migrator.poll() is None:
            migrator.send_signal(signal.SIGTERM)
            migrator.wait(30)
        bg.stop()
        pump.stop()
        stack.stop()
    for path, digest in files.items():
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest, path
    journal = _journal(state)
    ends = [e for e in journal if e["event"] in ("done", "settled") and e.get("result") != "gone"]
    assert sorted(e["file"] for e in ends) == sorted(files)             # each moved once
    for f in in_flight:             # settled by the second run before it started f again
        events = [e["event"] for e in journal if e["file"] == f]
        assert events[events.index("running") + 1] in ("settled", "failed"), events
    # the striped files kept two stripes; none landed on the slow OST
    assert sorted(len(layout_of(p)[0]) for p in files) == [1, 1, 1, 2, 2, 2]
    log = stack.log_path("migrate").read_text()
    assert "Traceback" not in log
