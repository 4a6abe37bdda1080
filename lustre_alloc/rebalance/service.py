"""The migration service: evacuate steered OSTs (and, if asked, balance fill) with
``lfs migrate``, within a budget, every move journaled.

One loop every ``interval_s``:

1. ask the mapper for its view (``migration_view``: OSTs, fill, steering, speed, jobs'
   load), handing it this service's status for ``lustre-alloc-ctl status``;
2. collect the moves that ended: exit 0 is ``done``; EBUSY/EAGAIN (a writer, a change
   during the copy) is ``failed`` and retried after ``retry_s``; another error counts
   toward ``max_attempts``, then ``given_up``;
3. settle moves the journal says were in flight when a previous run stopped: wait for a
   process still running (:meth:`MoveRunner.adopt`), else read the file's layout: on the
   new OSTs it is ``settled`` (moved), on the old ones it is retried (``lfs migrate`` swaps
   layouts atomically at its end, so nothing is half-moved). Nothing new starts until each
   is watched or settled, and a watched file counts as in flight, so no file is ever in two
   migrations;
4. re-plan when due (``replan_s``) or when the set of evacuated OSTs changed
   (:mod:`lustre_alloc.rebalance.selection`);
5. start queued moves in plan order while the budget allows
   (:class:`lustre_alloc.rebalance.budget.MigrationBudget`), the admin has not paused the service
   and the time is inside its windows (``windows``); in ``dry_run`` start nothing.

An admin's orders (drain an OST, pause, resume: :mod:`lustre_alloc.rebalance.admin`) are read from
the state directory at every loop; the status (per evacuated OST: bytes and files left,
rate, ETA, drained) is written there after every loop and the plan after every planning.

A missing or failing ``lfs`` (or Robinhood database) or an unreachable mapper is one logged line (``last_error``) and
the loop goes on; nothing already journaled changes. Metrics (``lustre_alloc_migrate_*``):
moves by result, bytes moved, moves running and queued, paused; per evacuated OST
(``ost`` label) bytes and files left, the move rate, the ETA and whether it is drained.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter as Tally
from pathlib import Path
from typing import Any, Callable, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from lustre_alloc.rebalance import admin
from lustre_alloc.rebalance import keep as keeper
from lustre_alloc.rebalance.budget import MigrationBudget, Move, OstLoad, loads_from_view
from lustre_alloc.rebalance.config import MigrateConfig
from lustre_alloc.rebalance.journal import MoveJournal
from lustre_alloc.rebalance.lfs import FileListError, Lfs
from lustre_alloc.rebalance.runner import RETRY_NOW, Ended, MoveRunner
from lustre_alloc.rebalance.selection import (MIB, EvacuationSet, FileSource, LfsFiles, PlannedMove,
                                      SelectRules, Selection, select)
from lustre_alloc.rebalance.windows import open_now

log = logging.getLogger("lustre_alloc.rebalance.service")
PREFIX = "lustre_alloc_migrate_"


class ViewError(RuntimeError):
    """The mapper's view could not be had (one line)."""


class ViewSource(Protocol):
    def view(self, report: dict[str, Any]) -> dict[str, Any]:
        """The mapper's ``migration_view`` reply; raises :class:`ViewError`."""


def _file_source(cfg: MigrateConfig, lfs: Lfs, workdir: Path,
                 clock: Callable[[], float]) -> FileSource:
    """``[migrate.robinhood]`` when configured, else ``lfs find`` under the mount."""
    if cfg.robinhood:
        from lustre_alloc.rebalance.robinhood import RobinhoodFiles, pymysql_connect
        return RobinhoodFiles(pymysql_connect(cfg.robinhood), cfg.mount, clock, lfs=lfs,
                              fsname=cfg.fsname, workdir=workdir)
    return LfsFiles(lfs, cfg.mount, workdir, clock, cfg.fsname)


class MigrateMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.moves = Counter(f"{PREFIX}moves", "moves ended, by result", ["result"],
                             registry=registry)
        self.bytes = Counter(f"{PREFIX}moved_bytes", "bytes of files moved", registry=registry)
        self.running = Gauge(f"{PREFIX}running", "moves running", registry=registry)
        self.queued = Gauge(f"{PREFIX}queued", "moves planned, not started", registry=registry)
        self.paused = Gauge(f"{PREFIX}paused", "1 while paused", registry=registry)
        self.evacuating = Gauge(f"{PREFIX}evacuating_osts", "OSTs being evacuated",
                                registry=registry)
        self.ost_left_bytes = Gauge(f"{PREFIX}ost_left_bytes",
                                    "bytes left to move off an evacuated OST", ["ost"],
                                    registry=registry)
        self.ost_left_files = Gauge(f"{PREFIX}ost_left_files",
                                    "files left on an evacuated OST", ["ost"], registry=registry)
        self.ost_rate = Gauge(f"{PREFIX}ost_rate_bytes_per_second",
                              "bytes/s moved off an evacuated OST (last 10 minutes)", ["ost"],
                              registry=registry)
        self.ost_eta = Gauge(f"{PREFIX}ost_eta_seconds",
                             "seconds until an evacuated OST is drained at the current rate "
                             "(-1: unknown)", ["ost"], registry=registry)
        self.ost_drained = Gauge(f"{PREFIX}ost_drained",
                                 "1 once a pass finds nothing movable left on the OST",
                                 ["ost"], registry=registry)


class MigrationService:
    """The loop of the module doc. ``clock``: wall seconds (the journal's and mtime's)."""

    def __init__(self, cfg: MigrateConfig, source: ViewSource, *, lfs: Lfs | None = None,
                 registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time, files: FileSource | None = None):
        self.cfg, self.source, self.clock = cfg, source, clock
        self.lfs = lfs or Lfs(cfg.lfs, cfg.lfs_bandwidth_option, layout_xattr=cfg.layout_xattr)
        self.workdir = Path(cfg.state_dir) / "lists"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.files: FileSource = files or _file_source(cfg, self.lfs, self.workdir, clock)
        self.journal = MoveJournal(Path(cfg.state_dir) / "journal.jsonl")
        self.budget = MigrationBudget(cfg.budget, rate_capped=cfg.lfs_bandwidth_option)
        self.runner = MoveRunner()
        self.metrics = MigrateMetrics(registry or CollectorRegistry())
        self.queue: list[PlannedMove] = []
        self.evacuating: list[int] = []
        self.evac_set = EvacuationSet(cfg.evacuate_after_s)
        self.skipped: Tally = Tally()
        self.paused: str | None = None
        self.last_error = ""
        self.bytes_moved = 0.0
        self.planned_at = float("-inf")
        self.loads: dict[int, OstLoad] = {}
        self.used_bytes = 0.0
        self.orders = admin.AdminOrders()
        self.windows = cfg.parsed_windows()
        self.selection = Selection()
        self.done_log: list[tuple[float, tuple[int, ...], float]] = []   # (t, from, bytes)
        self.receives: dict[int, bool] = {}
        self.list_backoff_s = 0.0
        self._stop = threading.Event()

    # -- the loop ------------------------------------------------------------------
    def run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.cfg.interval_s)
        for ended in self.runner.poll():     # what ended meanwhile is journaled as it ended
            self._ended(ended, self.clock())
        for file in self.runner.stop():
            self.journal.record("failed", file, t=self.clock(), error="service stopped",
                                retry_at=self.clock())

    def stop(self) -> None:
        self._stop.set()

    def step(self) -> None:
        """One loop (module doc)."""
        now = self.clock()
        self._read_orders()
        try:
            view = self.source.view(self.status())
        except ViewError as exc:
            self._error(f"mapper: {exc}")
            view = None
        for ended in self.runner.poll():
            self._ended(ended, now)
        if view is not None:
            self._take_view(view)
            try:
                unsettled = self._settle(now)
                evac = sorted(set(self.evac_set.update(view["osts"], float(view["time_s"])))
                              | set(self.orders.drains))
                if evac != self.evacuating or now - self.planned_at >= self.cfg.replan_s:
                    self._plan(view, now, evac)
                self.paused = self._pause_reason(now)
                if self.cfg.mode == "on" and not unsettled and self.paused is None:
                    self._start_moves(now)
            except FileListError as exc:
                self._error(str(exc))
        self._gauges()
        self._write_status(now)

    def _read_orders(self) -> None:
        try:
            orders = admin.read_orders(self.cfg.state_dir)
        except admin.AdminError as exc:       # keep the last good orders
            self._error(str(exc))
            return
        if orders.drains.keys() != self.orders.drains.keys():
            log.info("admin drains: %s", sorted(orders.drains), extra={
                "event": "migrate_admin_drains", "osts": sorted(orders.drains)})
            self.planned_at = float("-inf")
        self.orders = orders

    def _pause_reason(self, now: float) -> str | None:
        """Why nothing starts now (the admin, a faulty OST, outside the windows), or None."""
        if self.orders.paused is not None:
            return f"by the admin: {self.orders.paused.get('reason') or 'no reason given'}"
        fault = self.budget.paused(self.loads)
        if fault is not None:
            return fault
        if not open_now(self.windows, now):
            return "outside its time windows"
        return None

    def _take_view(self, view: dict[str, Any]) -> None:
        self.loads = loads_from_view(view["osts"], self.cfg.ost_rate_mib_s * MIB)
        self.receives = {int(o["ost"]): bool(o.get("receives")) for o in view["osts"]}
        self.used_bytes = sum(float(o["kbytes_used"]) * 1024 for o in view["osts"])
        self.budget.refill(self.clock(), self.loads)

    def _plan(self, view: dict[str, Any], now: float, evac: list[int]) -> None:
        try:
            sel = select(SelectRules.of(self.cfg), view, evac, self.files, self.journal.moves)
        except FileListError:
            # a failed pass is tried again after a backoff (60 s, doubling up to replan_s),
            # not at every loop: a full lfs find walk every interval_s would load the MDS
            self.list_backoff_s = min(self.cfg.replan_s, max(60.0, 2 * self.list_backoff_s))
            self.planned_at = now - self.cfg.replan_s + self.list_backoff_s
            self.evacuating = evac
            raise
        self.list_backoff_s = 0.0
        self.selection = sel
        self.planned_at = now
        if sel.evacuating != self.evacuating:
            log.info("evacuating OSTs %s", sel.evacuating, extra={
                "event": "migrate_evacuating", "osts": sel.evacuating,
                "before": self.evacuating})
        self.evacuating, self.skipped = sel.evacuating, sel.skipped
        self.queue = [m for m in sel.moves if m.file not in self.runner
                      and self._ready(m.file, now)]
        log.info("planned %d moves (%.1f GiB)", len(self.queue),
                 sum(m.size for m in self.queue) / (1 << 30),
                 extra={"event": "migrate_plan", "moves": len(self.queue),
                        "skipped": dict(sel.skipped), "dry_run": self.cfg.mode == "dry_run",
                        "first": [(m.file, m.from_osts, m.to_osts) for m in self.queue[:10]]})
        admin.write_atomically(Path(self.cfg.state_dir) / admin.PLAN_FILE, {
            "planned_s": now, "mode": self.cfg.mode, "evacuating": self.evacuating,
            "skipped": dict(sel.skipped),
            "moves": [{"file": m.file, "bytes": int(m.size), "from": m.from_osts,
                       "to": m.to_osts, "why": m.why} for m in self.queue]})

    def _ready(self, file: str, now: float) -> bool:
        m = self.journal.moves.get(file)
        return m is None or m.event in ("done", "settled") or (
            m.event == "failed" and m.retry_at <= now)

    def _start_moves(self, now: float) -> None:
        left: list[PlannedMove] = []
        for i, move in enumerate(self.queue):
            why = self.budget.refusal(move, self.loads, self.used_bytes) \
                if self._ready(move.file, now) else "waiting to retry"
            if why is not None:
                left.append(move)
                continue
            if not self._still_as_planned(move):
                continue
            limit = self.budget.bandwidth_limit(move, self.loads)
            try:
                argv = self.lfs.migrate_argv(move.file, move.options(), limit)
            except ValueError as exc:         # a plan that cannot keep the layout: not run
                self.skipped[f"not kept: {exc}"] += 1
                continue
            self.journal.record("started", move.file, t=now, **{"from": move.from_osts},
                                to=move.to_osts, bytes=int(move.size), why=move.why)
            try:
                pid = self.runner.start(move.file, argv)
            except OSError as exc:
                self.journal.record("failed", move.file, t=now, retry_at=now + self.cfg.retry_s,
                                    error=f"{argv[0]}: {exc.strerror or exc}")
                self._error(f"{argv[0]}: cannot run ({exc.strerror or exc}); moves wait")
                left.extend(self.queue[i:])
                break
            self.journal.record("running", move.file, t=now, pid=pid)
            self.budget.start(move, self.loads)
            log.info("move %s: OSTs %s -> %s (%s)", move.file, move.from_osts, move.to_osts,
                     move.why, extra={"event": "migrate_start", "file": move.file,
                                      "from": move.from_osts, "to": move.to_osts,
                                      "bytes": int(move.size), "why": move.why})
        self.queue = left

    def _still_as_planned(self, move: PlannedMove) -> bool:
        """The file's layout now is the one planned (read again just before its move: the
        queue may be old); else it is dropped, counted, and planned again at the next pass."""
        now = self.files.layouts([move.file]).get(move.file)
        if now is not None and move.layout is not None and \
                keeper.objects(now) == move.from_osts and \
                keeper.shape(now) == keeper.shape(move.layout):
            return True
        self.skipped["changed since planned" if now is not None else "gone or no layout"] += 1
        return False

    # -- ends ----------------------------------------------------------------------
    def _ended(self, e: Ended, now: float) -> None:
        move = self.budget.running.get(e.file)
        self.budget.end(e.file)
        if e.returncode is None:             # adopted: settled from the layout next
            return
        if e.returncode == 0:
            self.journal.record("done", e.file, t=now)
            if move is not None:
                self.done_log.append((now, tuple(move.from_osts), move.size))
            self.bytes_moved += move.size if move else 0.0
            self.metrics.bytes.inc(move.size if move else 0.0)
            self._count("done", e.file, "")
            return
        hard = e.returncode not in RETRY_NOW
        state = self.journal.record("failed", e.file, t=now, error=e.message, hard=hard,
                                    retry_at=now + self.cfg.retry_s)
        if state.failures >= self.cfg.max_attempts:
            self.journal.record("given_up", e.file, t=now, error=e.message)
            self._count("given_up", e.file, e.message)
            return
        self._count("failed" if hard else "busy", e.file, e.message)
        if isinstance(move, PlannedMove):      # tried again once retry_s has passed
            self.queue.append(move)

    def _settle(self, now: float) -> int:
        """Settle the journal's in-flight moves no process of ours runs; how many remain."""
        orphans = [m for m in self.journal.in_flight() if m.file not in self.runner
                   and m.file not in self.budget.running]
        if not orphans:
            return 0
        waiting = [m for m in orphans if self.runner.adopt(m.file, m.pid)]
        for m in waiting:                    # its bandwidth and OSS slots count meanwhile
            self.budget.start(Move(m.file, float(m.bytes), m.from_osts, m.to_osts), self.loads)
        rest = [m for m in orphans if m not in waiting]
        for m in rest:
            got = self.lfs.layout(m.file)
            if got is None:
                self.journal.record("settled", m.file, t=now, result="gone")
            elif keeper.objects(got) == m.to_osts:
                self.journal.record("settled", m.file, t=now, result="moved")
                self._count("done", m.file, "settled after a restart")
            else:
                self.journal.record("failed", m.file, t=now, retry_at=now,
                                    error="interrupted: the file kept its old layout")
                self.planned_at = float("-inf")     # planned again, from today's evidence
        return len(waiting)

    # -- reporting -----------------------------------------------------------------
    def _count(self, result: str, file: str, message: str) -> None:
        self.metrics.moves.labels(result).inc()
        level = logging.INFO if result == "done" else logging.WARNING
        log.log(level, "move %s: %s %s", file, result, message,
                extra={"event": "migrate_end", "file": file, "result": result,
                       "error": message})

    def _error(self, message: str) -> None:
        if message != self.last_error:
            log.error("%s", message, extra={"event": "migrate_error", "error": message})
        self.last_error = message

    def _gauges(self) -> None:
        self.metrics.running.set(len(self.runner))
        self.metrics.queued.set(len(self.queue))
        self.metrics.paused.set(1 if self.paused else 0)
        self.metrics.evacuating.set(len(self.evacuating))
        for o in self.ost_progress(self.clock()):
            label = f"OST{o['ost']:04x}"
            self.metrics.ost_left_bytes.labels(label).set(o["left_bytes"])
            self.metrics.ost_left_files.labels(label).set(o["left_files"])
            self.metrics.ost_rate.labels(label).set(o["rate_bytes_s"])
            self.metrics.ost_eta.labels(label).set(-1 if o["eta_s"] is None else o["eta_s"])
            self.metrics.ost_drained.labels(label).set(1 if o["drained"] else 0)

    def ost_progress(self, now: float) -> list[dict[str, Any]]:
        """Per evacuated OST: why (steered, drained by the admin), files and bytes left to
        move off it (planned moves queued or running), unmovable files left there, the rate
        over the last :data:`lustre_alloc.rebalance.admin.RATE_WINDOW_S`, the ETA (None: no rate
        yet) and ``drained``: the last pass left nothing movable on it."""
        cutoff = now - admin.RATE_WINDOW_S
        self.done_log = [d for d in self.done_log if d[0] >= cutoff]
        pending = list(self.queue) + [m for m in self.budget.running.values()]
        out = []
        for ost in self.evacuating:
            mine = [m for m in pending if ost in m.from_osts]
            left_bytes = sum(m.size / len(m.from_osts) for m in mine)
            moved = sum(b / len(f) for t, f, b in self.done_log if ost in f)
            span = min(admin.RATE_WINDOW_S, max(1.0, now - min(
                (t for t, f, _ in self.done_log if ost in f), default=now)))
            rate = moved / span if moved else 0.0
            left = self.selection.left.get(ost, {})
            unmovable = sum(v for k, v in left.items() if k != "recently modified"
                            and k != "not planned")
            drained = not mine and ost in self.selection.listed and \
                sum(left.values()) == unmovable
            why = (["drained by the admin"] if ost in self.orders.drains else []) + \
                (["steered slow"] if ost in self.evac_set.members else [])
            out.append({"ost": ost, "why": why or ["evacuating"], "left_files": len(mine),
                        "left_bytes": int(left_bytes), "unmovable_files": unmovable,
                        "rate_bytes_s": rate,
                        "eta_s": left_bytes / rate if rate > 0 and left_bytes else
                        (0.0 if drained else None),
                        "drained": drained, "still_receives": self.receives.get(ost, False)})
        return out

    def _write_status(self, now: float) -> None:
        try:
            admin.write_atomically(Path(self.cfg.state_dir) / admin.STATUS_FILE,
                                   {**self.status(), "written_s": now,
                                    "windows": list(self.cfg.windows),
                                    "outside_windows": not open_now(self.windows, now)})
        except OSError as exc:
            self._error(f"{self.cfg.state_dir}: status: {exc.strerror or exc}")

    def status(self) -> dict[str, Any]:
        """What ``lustre-alloc-ctl status`` and ``lustre-alloc-rebalance status`` show."""
        counts = self.journal.counts()
        return {"mode": self.cfg.mode, "fsname": self.cfg.fsname, "paused": self.paused,
                "evacuating": self.evacuating, "queued": len(self.queue),
                "queued_bytes": int(sum(m.size for m in self.queue)),
                "running": len(self.runner), "in_flight_bytes": int(self.budget.in_flight_bytes()),
                "done": counts["done"] + counts["settled"], "failed": counts["failed"],
                "given_up": counts["given_up"], "bytes_moved": int(self.bytes_moved),
                "skipped": dict(self.skipped), "last_error": self.last_error,
                "drains": sorted(self.orders.drains),
                "admin_paused": self.orders.paused is not None,
                "osts": self.ost_progress(self.clock())}
