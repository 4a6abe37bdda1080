"""The ``lfs migrate`` processes of the running moves.

Each runs in a session of its own, so a migration service killed with -9 does not take its
moves down with it: the next start finds the process by the pid in the journal
(:meth:`MoveRunner.adopt`) and waits for it rather than start the same file twice.
"""
from __future__ import annotations

import errno
import subprocess
import tempfile
from dataclasses import dataclass

import psutil

RETRY_NOW = (errno.EBUSY, errno.EAGAIN, errno.ESTALE)
"""``lfs migrate`` exit statuses that mean "not now" (a writer holds the file, or it changed
during the copy: ``lfs.c`` ``lfs_migrate()``; a lease broken just before the layout swap:
ESTALE, ``mdt_open.c`` ``mdt_close_handle_layouts()``): retried after ``retry_s`` without
counting toward ``max_attempts``."""


@dataclass
class Ended:
    """A process that ended: its exit status (None: not ours, status unknown) and the last
    line it wrote on stderr."""
    file: str
    returncode: int | None
    message: str


def _migrating(file: str, pid: int) -> psutil.Process | None:
    """Process ``pid`` if it is an ``lfs migrate`` of ``file``."""
    try:
        proc = psutil.Process(int(pid))
        if file not in proc.cmdline() or "migrate" not in proc.cmdline() \
                or proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except (psutil.Error, ValueError):
        return None
    return proc


class MoveRunner:
    """Start, poll and adopt ``lfs migrate`` processes, one per file."""

    def __init__(self) -> None:
        self._procs: dict[str, tuple[subprocess.Popen, object]] = {}
        self._adopted: dict[str, psutil.Process] = {}

    def __contains__(self, file: str) -> bool:
        return file in self._procs or file in self._adopted

    def __len__(self) -> int:
        return len(self._procs) + len(self._adopted)

    def start(self, file: str, argv: list[str]) -> int:
        """Start ``argv`` for ``file``; its pid. Raises OSError (``lfs`` missing...)."""
        err = tempfile.TemporaryFile(mode="w+")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err, start_new_session=True)
        except OSError:
            err.close()
            raise
        self._procs[file] = (proc, err)
        return proc.pid

    def adopt(self, file: str, pid: int | None) -> bool:
        """Watch a migration a previous run started, if it still runs: ``pid`` alive and an
        ``lfs migrate`` command naming ``file``, or, when the journal has no pid (the run
        stopped between starting the process and journaling its pid), any such process.
        False: nothing to wait for."""
        proc = _migrating(file, pid) if pid is not None else next(
            (p for p in psutil.process_iter() if _migrating(file, p.pid)), None)
        if proc is None:
            return False
        self._adopted[file] = proc
        return True

    def poll(self) -> list[Ended]:
        """The processes that ended since the last poll."""
        out = []
        for file, (proc, err) in list(self._procs.items()):
            rc = proc.poll()
            if rc is None:
                continue
            err.seek(0)
            lines = err.read().strip().splitlines()
            err.close()
            del self._procs[file]
            out.append(Ended(file, rc, lines[-1] if lines else ""))
        for file, proc in list(self._adopted.items()):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                continue
            del self._adopted[file]
            out.append(Ended(file, None, "adopted process ended"))
        return out

    def stop(self) -> list[str]:
        """Terminate our processes (a migration stopped midway leaves its file as it was);
        the files they were moving."""
        files = []
        for file, (proc, err) in list(self._procs.items()):
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            err.close()
            files.append(file)
        self._procs.clear()
        self._adopted.clear()
        return files
