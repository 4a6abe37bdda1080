"""The migration service killed at every step of a move, then restarted: nothing moved twice,
nothing lost, the service up. A move journals ``started``, starts ``lfs migrate``, journals
``running`` (its pid) and, when it ends, ``done``; the service dies before, after or in the
middle of (a torn line) each of those writes, its ``lfs migrate`` left running as a
``kill -9`` leaves it (each runs in a session of its own). The stand-in lfs is wrapped to
count the migrations that completed per file."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.livestack.emulator import LOV_XATTR
from lustre_alloc.livestack.lfs import layout_of
from lustre_alloc.rebalance.journal import MoveJournal
from lustre_alloc.rebalance.service import MigrationService
from tests.rebalance.test_migrate_service import SLOW, View, _cfg, _until_idle

MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[2]
COUNTING_LFS = f"""import json, sys
sys.path.insert(0, {str(ROOT)!r})
from lustre_alloc.livestack.lfs import main
rc = main(sys.argv[1:])
if sys.argv[1] == "migrate":
    with open(sys.argv[0] + ".log", "a") as f:
        f.write(json.dumps([sys.argv[-1], rc]) + "\\n")
sys.exit(rc)
"""


class Killed(BaseException):
    """The service's death at a chosen instant (BaseException: nothing catches it)."""


def _kill_at(journal: MoveJournal, nth: int, when: str) -> None:
    """Make ``journal``'s ``nth`` record kill the service ``before`` its write, ``after``
    it, or ``torn``: half its line written."""
    real = journal.record
    calls = {"n": 0}

    def record(event, file, **fields):
        calls["n"] += 1
        if calls["n"] != nth:
            return real(event, file, **fields)
        if when == "before":
            raise Killed
        if when == "torn":
            line = json.dumps({"t": fields.get("t"), "event": event, "file": file})
            journal._fh.write(line[:len(line) // 2])
            journal._fh.flush()
            raise Killed
        real(event, file, **fields)
        raise Killed
    journal.record = record


@pytest.mark.parametrize("when", ["before", "after", "torn"])
@pytest.mark.parametrize("nth,event", [(1, "started"), (2, "running"), (3, "done")])
def test_killed_at_every_step_the_restarted_service_settles(tmp_path, nth, event, when):
    root = tmp_path / "mnt"
    root.mkdir()
    f = root / "f"
    data = os.urandom(4 * MIB)
    f.write_bytes(data)
    os.setxattr(f, LOV_XATTR, ll.stored([SLOW], MIB))
    os.utime(f, (time.time() - 7200,) * 2)
    wrapper = tmp_path / "lfs.py"
    wrapper.write_text(COUNTING_LFS)
    cfg = _cfg(tmp_path, lfs=f"{sys.executable} {wrapper}", layout_xattr=LOV_XATTR)
    view = View()
    view.steered[SLOW] = time.time() - 7200

    first = MigrationService(cfg, view, registry=CollectorRegistry())
    _kill_at(first.journal, nth, when)
    with pytest.raises(Killed):
        _until_idle(first)
    first.journal.close()                  # what the kernel does for a dead process

    again = MigrationService(cfg, view, registry=CollectorRegistry())
    _until_idle(again)
    log = Path(str(wrapper) + ".log")
    completed = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    assert [c for c in completed if c[1] == 0] == [[str(f), 0]]          # moved once
    assert hashlib.sha256(f.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert SLOW not in layout_of(str(f))[0]
    assert again.journal.moves[str(f)].event in ("done", "settled"), \
        (tmp_path / "state" / "journal.jsonl").read_text()
    assert again.last_error == ""
    again.step()                                                          # still serving
    lines = (tmp_path / "state" / "journal.jsonl").read_text().splitlines()
    assert all(json.loads(x) for x in lines)                              # every line whole


def test_the_journal_stays_bounded_and_keeps_what_matters(tmp_path):
    """Past its bound the journal is rewritten as one state per file still of interest and
    the totals of those that ended; replaying it gives the same states and counts."""
    path = tmp_path / "journal.jsonl"
    j = MoveJournal(path, compact_min_lines=50)
    for i in range(200):
        f = f"/lustre/f{i}"
        j.record("started", f, t=float(i), **{"from": [SLOW]}, to=[2], bytes=i, why="evacuate")
        j.record("running", f, t=float(i), pid=1000 + i)
        if i % 10 == 0:
            j.record("failed", f, t=float(i), error="EIO", hard=True, retry_at=float(i + 60))
        elif i % 10 != 1:
            j.record("done", f, t=float(i))
    assert len(path.read_text().splitlines()) <= 4 * 200
    counts, states = j.counts(), {k: vars(v) for k, v in j.moves.items()}
    j.close()
    again = MoveJournal(path, compact_min_lines=50)
    assert again.counts() == counts == {**counts, "done": 160, "failed": 20, "started": 20}
    assert {k: vars(v) for k, v in again.moves.items()} == states
    assert again.moves["/lustre/f1"].pid == 1001 and [m.file for m in again.in_flight()][:1] \
        == ["/lustre/f1"]
    assert again.moves["/lustre/f10"].retry_at == 70.0


def test_a_torn_tail_is_cut_off_before_the_next_append(tmp_path):
    path = tmp_path / "journal.jsonl"
    j = MoveJournal(path)
    j.record("done", "/a", t=1.0)
    j.close()
    with open(path, "a") as f:
        f.write('{"t": 2.0, "event": "sta')
    j = MoveJournal(path)
    assert j.torn_lines == 1
    j.record("done", "/b", t=3.0)
    j.close()
    assert [json.loads(x)["file"] for x in path.read_text().splitlines()] == ["/a", "/b"]
