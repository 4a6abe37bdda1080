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
ended either way; :mod:`lustre_alloc.rebalance.service` settles it from the file's layout before
anything else starts (``lfs migrate`` swaps the layout atomically at its end, so the file
has either its old or its new OSTs: ``lustre/utils/lfs.c`` ``lfs_migrate()``,
``llapi_fswap_layouts()``). A torn last line (a crash while writing it) is counted and cut
off before anything is appended, so the next record starts on a line of its own; any other
malformed line is an error naming the journal and the line. A new journal's directory entry
is fsync-ed with it.

The journal stays bounded: once it holds more than :data:`COMPACT_MIN_LINES` lines and four
per file it knows, it is rewritten (a new file, fsync-ed, renamed over the old one, the
directory fsync-ed) as one ``state`` line per file still of interest (in flight, failed,
given up) and one ``totals`` line counting the files that ended done or settled::

    {"t": ..., "event": "state", "file": "/lustre/b", "last": "failed", "from": [3],
     "to": [7], "bytes": 1, "pid": null, "attempts": 2, "failures": 1, "retry_at": ...,
     "error": "...", "why": "..."}
    {"t": ..., "event": "totals", "file": "", "done": 1200, "settled": 3}

A crash during the rewrite leaves either the old journal or the new one.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENTS = ("started", "running", "done", "failed", "given_up", "settled")
RECORDS = EVENTS + ("state", "totals")
COMPACT_MIN_LINES = 10_000
"""A journal is compacted only past this many lines (and four per file it knows)."""
ENDED = ("done", "settled")


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

    def __init__(self, path: str | os.PathLike[str],
                 compact_min_lines: int = COMPACT_MIN_LINES):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.compact_min_lines = compact_min_lines
        self.torn_lines = 0
        self.ended_before: dict[str, int] = {e: 0 for e in ENDED}
        """Files that ended done/settled and were compacted away."""
        self.lines = 0
        created = not self.path.exists()
        self.moves: dict[str, MoveState] = self._replay()
        self._fh = open(self.path, "a", encoding="utf-8")
        if created:
            os.fsync(self._fh.fileno())
            _fsync_dir(self.path.parent)

    def close(self) -> None:
        self._fh.close()

    def _replay(self) -> dict[str, MoveState]:
        moves: dict[str, MoveState] = {}
        if not self.path.exists():
            return moves
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        complete = len(raw) - len(lines[-1])        # bytes up to the last newline
        lines.pop()                                 # b"" or a tail without its newline
        tail_torn = complete < len(raw)
        for n, line in enumerate(lines, start=1):
            try:
                rec = json.loads(line.decode("utf-8", errors="replace"))
                if not isinstance(rec, dict) or rec.get("event") not in RECORDS \
                        or not isinstance(rec.get("file"), str):
                    raise ValueError("not a journal record")
            except ValueError as exc:
                if n == len(lines) and not tail_torn:   # the last line, torn inside
                    self.torn_lines += 1
                    complete -= len(line) + 1
                    break
                raise JournalError(f"{self.path}:{n}: {exc}") from None
            self.lines += 1
            self._fold(moves, rec)
        if tail_torn:
            self.torn_lines += 1
        if complete < len(raw):                     # cut it off before appending
            with open(self.path, "r+b") as f:
                f.truncate(complete)
                f.flush()
                os.fsync(f.fileno())
        return moves

    def _fold(self, moves: dict[str, MoveState], rec: dict[str, Any]) -> None:
        path, event = rec["file"], rec["event"]
        if event == "totals":
            for e in ENDED:
                self.ended_before[e] = int(rec.get(e, 0))
            return
        if event == "state":
            moves[path] = MoveState(
                file=path, event=str(rec["last"]), from_osts=[int(i) for i in rec["from"]],
                to_osts=[int(i) for i in rec["to"]], bytes=int(rec["bytes"]),
                pid=rec.get("pid"), attempts=int(rec["attempts"]),
                failures=int(rec["failures"]), retry_at=float(rec["retry_at"]),
                error=str(rec["error"]), why=str(rec["why"]))
            return
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
        """Append one event for ``file`` (flushed and fsync-ed) and fold it in; compact the
        journal when it has grown past its bound (module doc)."""
        if event not in EVENTS:
            raise ValueError(f"unknown journal event {event!r}")
        rec = {"t": fields.pop("t"), "event": event, "file": file, **fields}
        self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.lines += 1
        self._fold(self.moves, rec)
        state = self.moves[file]
        if self.lines > max(self.compact_min_lines, 4 * len(self.moves)):
            self.compact(rec["t"])
        return state

    def compact(self, t: float) -> None:
        """Rewrite the journal as its states (module doc)."""
        ended = dict(self.ended_before)
        keep: dict[str, MoveState] = {}
        for path, m in self.moves.items():
            if m.event in ENDED:
                ended[m.event] += 1
            else:
                keep[path] = m
        tmp = self.path.with_name(self.path.name + ".compact")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"t": t, "event": "totals", "file": "", **ended},
                               separators=(",", ":")) + "\n")
            for m in keep.values():
                f.write(json.dumps(
                    {"t": t, "event": "state", "file": m.file, "last": m.event,
                     "from": m.from_osts, "to": m.to_osts, "bytes": m.bytes, "pid": m.pid,
                     "attempts": m.attempts, "failures": m.failures, "retry_at": m.retry_at,
                     "error": m.error, "why": m.why}, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self._fh.close()
        self._fh = open(self.path, "a", encoding="utf-8")
        self.moves, self.ended_before, self.lines = keep, ended, len(keep) + 1

    def in_flight(self) -> list[MoveState]:
        """Moves whose last event is ``started``."""
        return [m for m in self.moves.values() if m.event == "started"]

    def counts(self) -> dict[str, int]:
        """Files per last event (those compacted away included)."""
        out = {e: 0 for e in EVENTS}
        for m in self.moves.values():
            out[m.event] += 1
        for e in ENDED:
            out[e] += self.ended_before[e]
        return out


def _fsync_dir(path: Path) -> None:
    """Make a directory entry (a created or renamed file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
