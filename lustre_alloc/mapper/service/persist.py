"""The service's learned state: every file system's restored at start, saved in the
background every ``save_interval_s`` and at stop (:class:`LearnedStates`), and how a save
avoids stalling the request loop.

A save has two halves:

1. **Snapshot, in the loop thread, in slices.** The small extras (the OST rate memory)
   are copied at once when the save begins. The job ids are listed at once (the LRU
   order); their records are copied :data:`SLICE_APPS` at a time between request batches
   (:meth:`MarkovPredictor.export_apps` with ``job_ids``), so no batch waits more than one
   slice. ``bench/mapper_save_stall.py`` (4,096 applications, shared machine, load 6): the
   synchronous save held the loop 295 ms, the largest slice 7.8 ms (38x shorter; the shim's
   timeout is 50 ms). Each record is consistent; an
   application evicted before its slice is left out, one added after the listing waits for
   the next save.
2. **Write, in one writer thread**: JSON encoding in chunks (``json.dump`` to the file, so the
   GIL is shared with the loop), fsync, rename, fsync of the directory
   (:func:`lustre_alloc.mapper.predictor.markov_store.write_document`). No request waits on the disk.

A save asked for while the previous one is still in progress is skipped (counted): the next
period takes a fresher snapshot. Policies whose learned state is not a predictor
(:meth:`~lustre_alloc.mapper.policies.placement.PersistsState.learned_predictor` None) are saved
synchronously (:func:`save_learned_state`).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from lustre_alloc.mapper.policies.placement import PersistsState
from lustre_alloc.mapper.predictor.markov_store import (FORMAT, VERSION, remove_stale_temporaries, with_extras,
                                          write_document)
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.metrics import MapperMetrics

log = logging.getLogger("lustre_alloc.mapper.service.persist")

SLICE_APPS = 256
"""Applications copied per loop iteration while a snapshot is being taken."""


class SlicedSnapshot:
    """The state document of one predictor, copied a slice at a time."""

    def __init__(self, predictor: Any, path: str, extras: dict[str, Any] | None = None):
        self.predictor = predictor
        self.path = path
        self.extras = extras or {}
        self.jobids = predictor.jobids()
        self.apps: list[dict[str, Any]] = []
        self.pos = 0
        self.config = predictor.config.as_dict()

    def step(self, n: int = SLICE_APPS) -> bool:
        """Copy the next ``n`` records; True when all are copied."""
        part = self.jobids[self.pos:self.pos + n]
        self.pos += len(part)
        self.apps.extend(self.predictor.export_apps(part))
        return self.pos >= len(self.jobids)

    def document(self) -> dict[str, Any]:
        return with_extras({"format": FORMAT, "version": VERSION, "config": self.config,
                            "apps": self.apps}, self.extras)


def load_learned_state(path: str, primary: PersistsState) -> tuple[bool, int]:
    """Restore ``primary``'s learned state from ``path`` if it exists; (restored, records
    skipped as malformed). Stale temporaries of a crashed save are removed first. An
    unreadable file is renamed ``<file>.bad`` (logged) and the primary starts fresh: a bad
    file never stops the mapper."""
    remove_stale_temporaries(path)
    if not os.path.exists(path):
        return False, 0
    try:
        skipped = primary.load_state(path)
    except Exception as exc:  # noqa: BLE001 - a bad file must not stop the mapper
        bad = path + ".bad"
        os.replace(path, bad)
        log.warning("learned state unreadable; starting fresh", extra={
            "event": "state_load_failed", "path": path, "moved_to": bad, "error": str(exc)})
        return False, 0
    log.info("learned state restored", extra={"event": "state_loaded", "path": path,
                                              "records_skipped": skipped})
    return True, skipped


def save_learned_state(path: str, primary: PersistsState) -> bool:
    """Write ``primary``'s learned state to ``path`` now (atomically and durably: the
    policy's ``save_state`` writes through
    :func:`lustre_alloc.mapper.predictor.markov_store.write_document`); False when it failed (logged;
    the old file is intact)."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        primary.save_state(path)
    except Exception as exc:  # noqa: BLE001 - keep serving; the old file is intact
        log.error("saving learned state failed", extra={"event": "state_save_failed",
                                                       "path": path, "error": str(exc)})
        return False
    log.info("learned state saved", extra={"event": "state_saved", "path": path})
    return True


class BackgroundSaver:
    """Sliced snapshots in the loop thread (:meth:`step`), writes in a writer thread.

    Args:
        on_done: called in the writer thread with (path, ok, error text, seconds).
    """

    def __init__(self, on_done: Callable[[str, bool, str, float], None]):
        self.on_done = on_done
        self._snapshots: list[SlicedSnapshot] = []
        self._idle = threading.Event()
        self._idle.set()
        self.skipped = 0
        self.written = 0

    @property
    def busy(self) -> bool:
        return bool(self._snapshots) or not self._idle.is_set()

    def begin(self, jobs: list[tuple[str, Any, dict[str, Any]]]) -> bool:
        """Start saving ``jobs`` (path, Markov predictor, extras copied now:
        :meth:`~lustre_alloc.mapper.policies.placement.PersistsState.learned_extras`); False (skipped)
        while busy."""
        if self.busy:
            self.skipped += 1
            return False
        self._snapshots = [SlicedSnapshot(predictor, path, extras)
                           for path, predictor, extras in jobs]
        return True

    @property
    def copying(self) -> bool:
        """True while a snapshot is being copied (:meth:`step` has work)."""
        return bool(self._snapshots)

    def step(self) -> None:
        """Loop thread, between batches: copy one slice; hand the documents to the writer
        thread once complete."""
        if not self._snapshots:
            return
        if not all(s.step() for s in self._snapshots):
            return
        docs = [(s.path, s.document()) for s in self._snapshots]
        self._snapshots = []
        self._idle.clear()
        threading.Thread(target=self._write, args=(docs,), name="lustre-alloc-save",
                         daemon=True).start()

    def finish_now(self) -> None:
        """Complete a snapshot in progress at once (at stop) and wait for the writer."""
        while self._snapshots:
            self.step()
        self.wait(30.0)

    def _write(self, docs: list[tuple[str, dict[str, Any]]]) -> None:
        try:
            for path, doc in docs:
                t0 = time.perf_counter()
                try:
                    write_document(doc, path)
                except Exception as exc:  # noqa: BLE001 - keep serving; the old file is intact
                    self.on_done(path, False, str(exc), time.perf_counter() - t0)
                else:
                    self.written += 1
                    self.on_done(path, True, "", time.perf_counter() - t0)
        finally:
            self._idle.set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the write in flight; True when none is left."""
        return self._idle.wait(timeout_s)


class LearnedStates:
    """The learned state of the service's file systems.

    Args:
        contexts: file system key -> context (each with its state file).
        metrics: the service's metrics (``state_saves_total``, ``state_records_skipped``).
    """

    def __init__(self, contexts: dict[str, FsContext], metrics: MapperMetrics):
        self.contexts = contexts
        self.metrics = metrics
        self.saver = BackgroundSaver(self._saved)
        self.saves = 0
        """Saves that succeeded (background and synchronous)."""

    def load(self) -> bool:
        """Restore each file system's learned state (stale temporaries of a crashed save are
        removed first); True when at least one was restored."""
        restored = False
        for ctx in self.contexts.values():
            ok, skipped = _load(ctx)
            if skipped:
                self.metrics.records_skipped.inc(skipped)
            restored = restored or ok
        return restored

    def save_background(self) -> bool:
        """Snapshot every file system's learned predictor now and write it in the writer
        thread; other learned state is saved here. False when the previous background save
        is still running (skipped)."""
        jobs = []
        for ctx in self.contexts.values():
            if not ctx.state_path or not isinstance(ctx.primary, PersistsState):
                continue
            predictor = ctx.primary.learned_predictor()
            if predictor is not None:
                extras = ctx.primary.learned_extras()
                jobs.append((ctx.state_path, predictor, extras))
            else:
                self._count(_save(ctx))
        return self.saver.begin(jobs) if jobs else True

    def save_now(self) -> bool:
        """Finish a background save in progress, then save each file system's learned state
        now; True when all were saved."""
        self.saver.finish_now()
        results = [_save(ctx) for ctx in self.contexts.values()]
        for ok in results:
            self._count(ok)
        return all(bool(ok) for ok in results)

    def _saved(self, path: str, ok: bool, error: str, seconds: float) -> None:
        """Writer thread: count and log one finished save."""
        if ok:
            log.info("learned state saved", extra={"event": "state_saved", "path": path,
                                                   "seconds": round(seconds, 4)})
        else:
            log.error("saving learned state failed", extra={"event": "state_save_failed",
                                                           "path": path, "error": error})
        self._count(ok)

    def _count(self, ok: bool | None) -> None:
        if ok is None:
            return
        if ok:
            self.saves += 1
        self.metrics.saves.labels("ok" if ok else "error").inc()


def _load(ctx: FsContext) -> tuple[bool, int]:
    """Restore ``ctx``'s primary's learned state from its state file
    (:func:`load_learned_state`); (restored, records skipped)."""
    primary = ctx.gate.primary
    if not ctx.state_path or not isinstance(primary, PersistsState):
        return False, 0
    return load_learned_state(ctx.state_path, primary)


def _save(ctx: FsContext) -> bool | None:
    """Save ``ctx``'s primary's learned state now; None when there is nothing to save."""
    primary = ctx.gate.primary
    if not ctx.state_path or not isinstance(primary, PersistsState):
        return None
    return save_learned_state(ctx.state_path, primary)

