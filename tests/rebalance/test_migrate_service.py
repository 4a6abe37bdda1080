"""The migration service on real files, with the stand-in ``lfs`` (lustre_alloc/livestack/lfs.py) and a
mapper view given by the test: evacuation of a steered OST, dry run, recovery, pauses, a
missing or failing ``lfs``, a writer holding a file, and a restart while moves run."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
from pathlib import Path

import psutil
import pytest
from prometheus_client import CollectorRegistry

from lustre_alloc.livestack.emulator import LOV_XATTR, lov_user_md_v1
from lustre_alloc.livestack.lfs import layout_of
from lustre_alloc.rebalance.budget import BudgetParams
from lustre_alloc.rebalance.config import MigrateConfig, MigrateConfigError, from_table
from lustre_alloc.rebalance.journal import JournalError, MoveJournal
from lustre_alloc.rebalance.service import MigrationService, ViewError
from tests.support import wait_for

MIB = 1 << 20
SLOW = 5
STANDIN_LFS = f"{sys.executable} -m lustre_alloc.livestack.lfs"
ROOT = Path(__file__).resolve().parents[2]


class View:
    """The mapper's ``migration_view`` as the test sets it: 8 OSTs on 4 OSSes."""

    def __init__(self) -> None:
        self.steered: dict[int, float] = {}      # OST -> since (mapper clock)
        self.degraded: set[int] = set()
        self.down = False
        self.reports: list[dict] = []
        self.ahead_s = 0.0                       # the mapper's clock, ahead of ours by this

    def view(self, report: dict) -> dict:
        self.reports.append(report)
        if self.down:
            raise ViewError("no answer from ipc:///run/lustre-alloc/control")
        now = time.time() + self.ahead_s
        return {"fsname": "demofs", "time_s": now, "osts": [
            {"ost": i, "oss": f"oss{i // 2}", "kbytes_total": 1 << 30, "kbytes_used": 1 << 20,
             "available": True, "degraded": i in self.degraded or i in self.steered,
             "receives": i not in self.steered and i not in self.degraded,
             "speed_ratio": 0.1 if i in self.steered else 1.0, "jobs_bytes_s": 0.0,
             "steered": ({"kind": "degraded", "since_s": self.steered[i], "reason": "slow"}
                         if i in self.steered else None)} for i in range(8)]}


def _files(root: Path, n: int = 4, size: int = 2 * MIB) -> dict[str, str]:
    """``n`` files on the slow OST (two of them striped over OSTs 5 and 1) and ``n`` on
    OST 2; path -> sha256 of the contents."""
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for i in range(2 * n):
        p = root / f"f{i}"
        data = os.urandom(size)
        p.write_bytes(data)
        osts = [SLOW] if i < n - 2 else [SLOW, 1] if i < n else [2]
        os.setxattr(p, LOV_XATTR, lov_user_md_v1(osts, MIB))
        old = time.time() - 7200            # quiet for two hours
        os.utime(p, (old, old))
        out[str(p)] = hashlib.sha256(data).hexdigest()
    return out


def _cfg(tmp: Path, **over) -> MigrateConfig:
    args = dict(fsname="demofs", mount=str(tmp / "mnt"), ost_rate_mib_s=1000.0, mode="on",
                lfs=STANDIN_LFS, layout_xattr=LOV_XATTR, state_dir=str(tmp / "state"),
                interval_s=0.1,
                evacuate_after_s=3600.0, quiet_s=600.0, retry_s=0.0,
                budget=BudgetParams(ost_share=1.0, max_per_oss=2, max_in_flight_ratio=1.0))
    args.update(over)
    return MigrateConfig(**args)


def _service(tmp: Path, view: View, **over) -> MigrationService:
    return MigrationService(_cfg(tmp, **over), view, registry=CollectorRegistry())


def _until_idle(svc: MigrationService, timeout_s: float = 60) -> None:
    def idle() -> bool:
        svc.step()
        return not svc.queue and not len(svc.runner)
    wait_for(idle, timeout_s, "the service to run out of moves")


def _on(path: str) -> list[int]:
    return layout_of(path)[0]


def _journal(tmp: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp / "state/journal.jsonl").read_text().splitlines()]


def test_a_steered_ost_is_evacuated_after_its_dwell_and_the_data_is_kept(tmp_path):
    files = _files(tmp_path / "mnt")
    mtimes = {p: os.stat(p).st_mtime_ns for p in files}
    view = View()
    svc = _service(tmp_path, view)
    view.steered[SLOW] = time.time() - 60         # steered for a minute: not yet
    svc.step()
    assert svc.evacuating == [] and not svc.queue
    view.steered[SLOW] = time.time() - 7200       # for two hours: evacuated
    _until_idle(svc)
    assert svc.evacuating == [SLOW]
    for path, digest in files.items():
        osts = _on(path)
        assert SLOW not in osts
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest
        assert os.stat(path).st_mtime_ns == mtimes[path]            # timestamps kept
    moved = [p for p in files if int(Path(p).name[1:]) < 4]
    assert {e["file"] for e in _journal(tmp_path) if e["event"] == "done"} == set(moved)
    # the striped files keep their stripe count; the files not on the slow OST stay put
    assert all(len(_on(p)) == 2 for p in moved[2:])
    assert all(_on(p) == [2] for p in files if p not in moved)
    svc.step()                                     # the mapper gets the status with each view
    status = view.reports[-1]
    assert status["done"] == 4 and status["evacuating"] == [SLOW] and status["mode"] == "on"
    assert svc.metrics.moves.labels("done")._value.get() == 4


def test_dry_run_plans_and_moves_nothing(tmp_path):
    files = _files(tmp_path / "mnt")
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = _service(tmp_path, view, mode="dry_run")
    for _ in range(3):
        svc.step()
    assert len(svc.queue) == 4 and svc.status()["queued_bytes"] == 4 * 2 * MIB
    assert all(SLOW in _on(p) for p in list(files)[:4])
    assert not (tmp_path / "state/journal.jsonl").read_text()


def test_recovery_stops_the_evacuation_and_nothing_moves_back(tmp_path):
    """An OST the steering returns is still evacuated for ``evacuate_after_s`` (the
    steering's probe of a slow OST returns it for a while); after that it has recovered."""
    files = _files(tmp_path / "mnt")
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = _service(tmp_path, view, mode="dry_run")
    svc.step()
    assert svc.queue
    del view.steered[SLOW]                        # the steering returned it: a probe?
    svc.step()
    assert svc.evacuating == [SLOW]               # not yet: the steering may take it back
    view.ahead_s = 3600.0                         # an hour unsteered: it recovered
    svc.step()
    assert svc.evacuating == [] and not svc.queue
    assert all(SLOW in _on(p) for p in list(files)[:4])


def test_a_fault_the_service_did_not_cause_pauses_it(tmp_path):
    _files(tmp_path / "mnt")
    view = View()
    view.steered[SLOW] = time.time() - 7200
    view.degraded.add(3)                           # a RAID rebuild, not our steering
    svc = _service(tmp_path, view)
    for _ in range(3):
        svc.step()
    assert svc.paused == "OST 3: degraded" and not len(svc.runner)
    svc.step()
    assert view.reports[-1]["paused"] == "OST 3: degraded"
    view.degraded.clear()
    _until_idle(svc)
    assert svc.status()["done"] == 4


def test_recently_modified_files_wait(tmp_path):
    files = _files(tmp_path / "mnt")
    fresh = list(files)[0]
    os.utime(fresh)                                # written just now
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = _service(tmp_path, view)
    _until_idle(svc)
    assert SLOW in _on(fresh) and svc.skipped["recently modified"] == 1


def test_lfs_missing_is_one_line_and_changes_nothing(tmp_path):
    files = _files(tmp_path / "mnt")
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = _service(tmp_path, view, lfs=str(tmp_path / "no" / "lfs"))
    svc.step()
    assert svc.last_error.startswith(str(tmp_path / "no" / "lfs")) and "\n" not in svc.last_error
    assert not svc.queue and not (tmp_path / "state/journal.jsonl").read_text()
    assert all(SLOW in _on(p) for p in list(files)[:4])
    view.down = True                               # the mapper unreachable: the same
    svc.step()
    assert svc.last_error.startswith("mapper: no answer")


def _failing_lfs(tmp: Path, code: int) -> str:
    """The stand-in for find and getstripe; ``migrate`` fails with exit status ``code``."""
    script = tmp / "lfs-failing"
    script.write_text(f"#!/bin/sh\nif [ \"$1\" = migrate ]; then echo 'lfs migrate: "
                      f"cannot swap layout: Input/output error' >&2; exit {code}; fi\n"
                      f"cd {ROOT} && exec {STANDIN_LFS} \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_failing_migration_keeps_the_data_and_is_given_up_after_its_attempts(tmp_path):
    files = _files(tmp_path / "mnt", n=2)
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = _service(tmp_path, view, lfs=_failing_lfs(tmp_path, 5), max_attempts=2, replan_s=0.1)
    wait_for(lambda: svc.step() or svc.status()["given_up"] == 2, 60, "both given up")
    for path, digest in list(files.items())[:2]:
        assert SLOW in _on(path)
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest
    gave_up = [e for e in _journal(tmp_path) if e["event"] == "given_up"]
    assert len(gave_up) == 2 and "Input/output error" in gave_up[0]["error"]
    # planned again once replan_s has passed: a given-up file is not
    wait_for(lambda: svc.step() or (not svc.queue and svc.skipped["given up"] == 2), 10,
             "a new plan that skips the given-up files")


def test_a_file_open_for_writing_is_retried_not_given_up(tmp_path):
    files = _files(tmp_path / "mnt", n=2)
    busy = list(files)[0]
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = _service(tmp_path, view, max_attempts=1)
    with open(busy, "r+b"):                        # a writer holds it: --non-block refuses
        wait_for(lambda: svc.step() or any(e["event"] == "failed" and e["file"] == busy
                                           for e in _journal(tmp_path)), 60, "EBUSY")
        assert SLOW in _on(busy)
    _until_idle(svc)
    assert SLOW not in _on(busy) and svc.status()["given_up"] == 0


def test_a_restart_waits_for_running_moves_and_moves_no_file_twice(tmp_path):
    """The first service is dropped while its moves run (as after kill -9: its ``lfs
    migrate`` processes live on in their own sessions); the second adopts them and settles
    them from the layout before it starts anything."""
    files = _files(tmp_path / "mnt", n=4, size=4 * MIB)
    view = View()
    view.steered[SLOW] = time.time() - 7200
    # 2 MiB/s per move: each takes about 2 s
    slow = dict(lfs_bandwidth_option=True, ost_rate_mib_s=40.0)   # the slow OST: 4 MiB/s
    first = _service(tmp_path, view, **slow)
    wait_for(lambda: first.step() or len(first.runner) >= 2, 30, "two moves running")
    first.journal.close()
    del first
    second = _service(tmp_path, view, **slow)
    seen_twice = []

    def step_and_check() -> bool:
        second.step()
        per_file: dict[str, int] = {}
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "migrate" in cmd:
                per_file[cmd[-1]] = per_file.get(cmd[-1], 0) + 1
        seen_twice.extend(f for f, n in per_file.items() if n > 1)
        return not second.queue and not len(second.runner) and not second.journal.in_flight()
    wait_for(step_and_check, 90, "every move done after the restart")
    assert not seen_twice
    for path, digest in list(files.items())[:4]:
        assert SLOW not in _on(path)
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest
    ends = [e for e in _journal(tmp_path) if e["event"] in ("done", "settled")]
    assert sorted(e["file"] for e in ends) == sorted(list(files)[:4])      # once each
    # the moves the first service left running were settled from their layouts
    assert sum(e["event"] == "settled" and e["result"] == "moved" for e in ends) >= 2


def test_journal_torn_last_line_is_skipped_and_a_bad_one_is_an_error(tmp_path):
    j = MoveJournal(tmp_path / "j.jsonl")
    j.record("started", "/a", t=1.0, to=[1], bytes=5)
    j.close()
    with open(tmp_path / "j.jsonl", "a") as fh:
        fh.write('{"t": 2.0, "event": "do')
    again = MoveJournal(tmp_path / "j.jsonl")
    assert again.torn_lines == 1 and [m.file for m in again.in_flight()] == ["/a"]
    again.close()
    (tmp_path / "k.jsonl").write_text('garbage\n{"t":1,"event":"done","file":"/a"}\n')
    with pytest.raises(JournalError, match=r"k.jsonl:1:"):
        MoveJournal(tmp_path / "k.jsonl")


@pytest.mark.parametrize("table, match", [
    ({"fsname": "x", "mount": "/m", "ost_rate_mib_s": 1, "speed": 3}, "migrate.speed: unknown"),
    ({"fsname": "x", "mount": "/m", "ost_rate_mib_s": 1, "budget": {"share": 1}},
     "migrate.budget.share: unknown"),
    ({"fsname": "x", "mount": "/m", "ost_rate_mib_s": 1, "mode": "go"}, "mode must be"),
    ({"fsname": "x", "mount": "/m"}, "ost_rate_mib_s"),
    ({"fsname": "x", "mount": "/m", "ost_rate_mib_s": 1, "budget": {"ost_share": 2}},
     "ost_share"),
    ({"fsname": "x", "mount": "/m", "ost_rate_mib_s": 1, "robinhood": {"db": "x"}},
     "migrate.robinhood.db: unknown"),
])
def test_bad_configuration_is_one_line_naming_the_key(table, match):
    with pytest.raises(MigrateConfigError, match=match) as got:
        from_table(table, "migrate.toml")
    assert str(got.value).startswith("migrate.toml: ") and "\n" not in str(got.value)


def _robinhood_db(path: Path, files: dict[str, str]) -> "sqlite3.Connection":
    """The Robinhood 3.x tables the service reads (lustre_alloc/rebalance/robinhood.py), in SQLite,
    filled from the files' layout xattrs; names are bytes (``VARBINARY``), the root's id is
    ``0x0`` and ``this_path`` returns what Robinhood's stored function does
    (``<root id>/<path>``, or ``<missing ancestor's id>/<partial path>``)."""
    import sqlite3
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE ENTRIES (id TEXT PRIMARY KEY, size INTEGER, type TEXT, last_mod INTEGER);
        CREATE TABLE NAMES (id TEXT, parent_id TEXT, name BLOB);
        CREATE TABLE STRIPE_INFO (id TEXT, validator INTEGER, stripe_count INTEGER,
                                  stripe_size INTEGER, pool_name TEXT);
        CREATE TABLE STRIPE_ITEMS (id TEXT, stripe_index INTEGER, ostidx INTEGER, details BLOB);
        INSERT INTO ENTRIES VALUES ('0x1', 4096, 'dir', 0);
        INSERT INTO NAMES VALUES ('0x1', '0x0', x'6d6e74');""")
    for n, p in enumerate(files):
        _robinhood_file(db, f"0x{100 + n:x}", "0x1", os.fsencode(Path(p).name), p)
    db.commit()
    return db


def _robinhood_file(db, fid: str, parent: str, name: bytes, path: str) -> None:
    osts, size = layout_of(path)
    db.execute("INSERT OR IGNORE INTO ENTRIES VALUES (?, ?, 'file', 0)", (fid, os.stat(path).st_size))
    db.execute("INSERT INTO NAMES VALUES (?, ?, ?)", (fid, parent, name))
    db.execute("INSERT INTO STRIPE_INFO VALUES (?, 0, ?, ?, '')", (fid, len(osts), size))
    for i, o in enumerate(osts):
        db.execute("INSERT INTO STRIPE_ITEMS VALUES (?, ?, ?, x'')", (fid, i, o))


def _this_path(db):
    def this_path(pid, name):
        path = bytes(name)
        while True:
            row = db.execute("SELECT parent_id, name FROM NAMES WHERE id = ?", (pid,)).fetchone()
            if row is None:
                return pid.encode() + b"/" + path
            pid, path = row[0], bytes(row[1]) + b"/" + path
    return this_path


def _robinhood(tmp_path: Path) -> "RobinhoodFiles":
    import sqlite3
    from lustre_alloc.rebalance.lfs import Lfs
    from lustre_alloc.rebalance.robinhood import RobinhoodFiles

    def connect():
        db = sqlite3.connect(tmp_path / "rbh.db")
        db.create_function("this_path", 2, _this_path(db))
        return db
    # Robinhood's paths are below the file system's root: here the mount is tmp/mnt's parent
    return RobinhoodFiles(connect, str(tmp_path), time.time, placeholder="?",
                          lfs=Lfs(STANDIN_LFS, layout_xattr=LOV_XATTR), root_id="0x0",
                          workdir=tmp_path)


def test_file_lists_from_a_robinhood_database(tmp_path):
    """``[migrate.robinhood]``: the files on the evacuated OST come from Robinhood's tables;
    the moves are the same as with ``lfs find``."""
    import sqlite3
    from lustre_alloc.rebalance.lfs import FileListError
    from lustre_alloc.rebalance.robinhood import RobinhoodFiles
    files = _files(tmp_path / "mnt")
    _robinhood_db(tmp_path / "rbh.db", files).close()
    view = View()
    view.steered[SLOW] = time.time() - 7200
    rbh = _robinhood(tmp_path)
    assert sorted(p for p, _ in rbh.files_on_ost(SLOW)) == sorted(list(files)[:4])
    svc = MigrationService(_cfg(tmp_path), view, registry=CollectorRegistry(), files=rbh)
    _until_idle(svc)
    assert all(SLOW not in _on(p) for p in files) and svc.status()["done"] == 4
    broken = RobinhoodFiles(lambda: sqlite3.connect(tmp_path / "nowhere" / "x.db"),
                            str(tmp_path), time.time, placeholder="?", root_id="0x0")
    with pytest.raises(FileListError, match=r"^robinhood: OperationalError"):
        broken.files_on_ost(SLOW)


def test_robinhood_rows_partial_paths_odd_names_hard_links_and_lag(tmp_path):
    """Rows whose ancestors are missing from NAMES are skipped (their partial path could name
    another file: here it names a real one); a name that is not UTF-8 is moved; a file with
    two names is planned once; a file the database still shows on the OST, but already moved,
    is not moved again."""
    files = _files(tmp_path / "mnt")
    paths = list(files)
    db = _robinhood_db(tmp_path / "rbh.db", files)
    odd = os.fsencode(str(tmp_path / "mnt")) + b"/caf\xe9"
    with open(odd, "wb") as f:
        f.write(os.urandom(2 * MIB))
    os.setxattr(odd, LOV_XATTR, lov_user_md_v1([SLOW], MIB))
    os.utime(odd, (time.time() - 7200,) * 2)
    _robinhood_file(db, "0x300", "0x1", b"caf\xe9", os.fsdecode(odd))
    link = str(tmp_path / "mnt" / "link-to-f0")
    os.link(paths[0], link)
    _robinhood_file(db, "0x64", "0x1", b"link-to-f0", paths[0])             # f0's second name
    db.execute("INSERT INTO NAMES VALUES ('0x5', '0x77', x'6d6e74')")       # parent 0x77 lost
    db.execute("INSERT INTO ENTRIES VALUES ('0x400', 1048576, 'file', 0)")  # on the slow OST,
    db.execute("INSERT INTO NAMES VALUES ('0x400', '0x5', x'6634')")        # "0x77/mnt/f4"
    db.execute("INSERT INTO STRIPE_ITEMS VALUES ('0x400', 0, ?, x'')", (SLOW,))
    db.commit()
    db.close()
    os.setxattr(paths[1], LOV_XATTR, lov_user_md_v1([3], MIB))             # moved since
    rbh = _robinhood(tmp_path)
    listed = {p if p != link else paths[0] for p, _ in rbh.files_on_ost(SLOW)}
    assert listed == {*paths[:4], os.fsdecode(odd)} and rbh.partial_paths == 1
    view = View()
    view.steered[SLOW] = time.time() - 7200
    svc = MigrationService(_cfg(tmp_path), view, registry=CollectorRegistry(), files=rbh)
    _until_idle(svc)
    assert svc.skipped["moved since listed"] == 1
    assert SLOW not in layout_of(os.fsdecode(odd))[0] and _on(paths[1]) == [3]
    done = [r["file"] for r in _journal(tmp_path) if r["event"] == "done"]
    assert done.count(paths[0]) + done.count(link) == 1
    assert _on(paths[4]) == [2]                        # the partial path's file: untouched
