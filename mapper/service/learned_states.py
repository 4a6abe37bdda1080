"""Every file system's learned state over the service's life: restored at start, saved in
the background every ``save_interval_s`` (snapshot in slices in the loop thread, written by
a writer thread: :mod:`mapper.service.persist`), saved at stop."""
from __future__ import annotations

import logging

from mapper.policies.placement import PersistsExtras, PersistsState
from mapper.service.fs_context import FsContext
from mapper.service.metrics import MapperMetrics
from mapper.service.persist import BackgroundSaver

log = logging.getLogger("mapper.service.learned_states")


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
            ok, skipped = ctx.load_state()
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
                extras = (ctx.primary.learned_extras()
                          if isinstance(ctx.primary, PersistsExtras) else {})
                jobs.append((ctx.state_path, predictor, extras))
            else:
                self._count(ctx.save_state())
        return self.saver.begin(jobs) if jobs else True

    def save_now(self) -> bool:
        """Finish a background save in progress, then save each file system's learned state
        now; True when all were saved."""
        self.saver.finish_now()
        results = [ctx.save_state() for ctx in self.contexts.values()]
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
