"""The migration journal: every move the migration service starts and ends, on disk first.

One JSON object per line, appended and ``fsync``-ed before the service acts on it, so a
crash at any point leaves a journal that says what may be in flight::

    {"t": 1764270000.1, "event": "started", "file": "/lustre/a", "from": [3], "to": [7],
     "bytes": 1073741824, "why": "evacuate OST 3"}
    {"t": 1764270000.1, "event": "running", "file": "/lustre/a", "pid": 4242}
    {"t": 1764270030.4, "event": "done", "file": "/lustre/a"}
    {"t": ..., "event": "failed", "file": "/lustre/b", "error": "...", "retry_at": ...,
     "hard": true}
    {"t": ..., "event": "settled", "file": "/lustre/c", "result": "moved"}
    {"t": ..., "event": "given_up", "file": "/lustre/b", "error": "..."}

``started`` is written before the ``lfs migrate`` process exists and ``running`` (its pid)
right after, so no process runs that the journal does not name. Replaying it gives each
file's last state. A file whose last event is ``started`` (or ``running``) was in flight when the service stopped: its ``lfs migrate`` may still run (``pid``), or may have
ended either way; :mod:`mapper.migrate.service` settles it from the file's layout before
anything else starts (``lfs migrate`` swaps the layout atomically at its end, so the file
has either its old or its new OSTs: ``lustre/utils/lfs.c`` ``lfs_migrate()``,
``llapi_fswap_layouts()``). A torn last line (a crash while writing it) is skipped and
counted; any other malformed line is an error naming the journal and the line.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENTS = ("started", "running", "done", "failed", "given_up", "settled")


class JournalError(ValueError):
    """A journal line that cannot be read (not the last): names the file and the line."""


@dataclass
class MoveState:
    """A file's last known state in the journal.

    Attributes:
        file: path as ``lfs migrate`` takes it.
        event: the last event (:data:`EVENTS`).
        from_osts, to_osts: the move's OST indices (stripe order).
        bytes: file size when the move started, bytes.
        pid: the ``lfs migrate`` process of a ``started`` move.
        attempts: ``started`` events so far.
        failures: ``failed`` events marked ``hard`` (the move's own fault, not "not now").
        retry_at: earliest time a ``failed`` move may start again, s (wall clock).
        error: the last failure's message.
        why: the reason given when it started (evacuation, fill balance).
    """
    file: str
    event: str
    from_osts: list[int] = field(default_factory=list)
    to_osts: list[int] = field(default_factory=list)
    bytes: int = 0
    pid: int | None = None
    attempts: int = 0
    failures: int = 0
    retry_at: float = 0.0
    error: str = ""
    why: str = ""


class MoveJournal:
    """Append-only journal at ``path`` (created with its directory if missing).

    Raises:
        JournalError: on open, a malformed line that is not the last.
        OSError: the journal cannot be created or written.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.torn_lines = 0
        self.moves: dict[str, MoveState] = self._replay()
        self._fh = open(self.path, "a", encoding="utf-8")

    def close(self) -> None:
        self._fh.close()

    def _replay(self) -> dict[str, MoveState]:
        moves: dict[str, MoveState] = {}
        if not self.path.exists():
            return moves
        lines = self.path.read_text(encoding="utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for n, line in enumerate(lines, start=1):
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or rec.get("event") not in EVENTS \
                        or not isinstance(rec.get("file"), str):
                    raise ValueError("not a journal record")
            except ValueError as exc:
                if n == len(lines):            # a crash while appending the last line
                    self.torn_lines += 1
                    continue
                raise JournalError(f"{self.path}:{n}: {exc}") from None
            self._fold(moves, rec)
        return moves

    @staticmethod
    def _fold(moves: dict[str, MoveState], rec: dict[str, Any]) -> None:
        path, event = rec["file"], rec["event"]
        m = moves.get(path)
        if m is None:
            m = moves[path] = MoveState(file=path, event=event)
        m.event = event
        if event == "running":
            m.event = "started"         # the process of a started move: still in flight
        if event == "started":
            m.attempts += 1
            m.from_osts = [int(i) for i in rec.get("from", [])]
            m.to_osts = [int(i) for i in rec.get("to", [])]
            m.bytes = int(rec.get("bytes", 0))
            m.pid = rec.get("pid")
            m.why = str(rec.get("why", ""))
        elif event == "running":
            m.pid = rec.get("pid")
        elif event == "failed":
            m.error = str(rec.get("error", ""))
            m.failures += 1 if rec.get("hard") else 0
            m.retry_at = float(rec.get("retry_at", 0.0))
        elif event == "given_up":
            m.error = str(rec.get("error", ""))

    def record(self, event: str, file: str, **fields: Any) -> MoveState:
        """Append one event for ``file`` (flushed and fsync-ed) and fold it in."""
        if event not in EVENTS:
            raise ValueError(f"unknown journal event {event!r}")
        rec = {"t": fields.pop("t"), "event": event, "file": file, **fields}
        self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fold(self.moves, rec)
        return self.moves[file]

    def in_flight(self) -> list[MoveState]:
        """Moves whose last event is ``started``."""
        return [m for m in self.moves.values() if m.event == "started"]

    def counts(self) -> dict[str, int]:
        """Files per last event."""
        out = {e: 0 for e in EVENTS}
        for m in self.moves.values():
            out[m.event] += 1
        return out
