"""Running Lustre's ``lfs`` for the migration service: file lists, layouts, migrations.

The commands, as ``lfs`` takes them (``lustre/utils/lfs.c``, 2.15.4; ``--bandwidth``
2.16.0):

* file list of one OST: ``lfs find <mount> --ost <index> --type f -printf '%s %p\\n'``
  (read by :func:`mapper.rebalance.inputs.read_find_printf`);
* layouts: ``lfs getstripe <file>...`` (:func:`mapper.rebalance.inputs.read_getstripe`);
* a move: ``lfs migrate --non-block -c <K> [-S <stripe size>] -o <i,j,..> [-W <MiB/s>]
  <file>``: ``-W`` (``--bandwidth``, 2.16.0; ``--bandwidth-limit`` in 2.17) reads a bare
  number in MiB/s (``lfs.c`` v2_16_0 ``lfs_setstripe_internal()``: ``llapi_parse_size()``
  with ``bandwidth_unit = ONE_MB``; checked on 2.17.0: ``-W 10`` moved 20 MiB in 2.37 s); ``--non-block`` so a file open for writing is refused (EBUSY) instead of
  blocking its writers behind a group lock, and retried later; the swap is atomic and a
  failed migration leaves the file as it was (``lfs_migrate()``).

A missing or failing ``lfs`` raises :class:`LfsError` with one line naming the command.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mapper.rebalance.inputs import read_find_printf, read_getstripe
from mapper.rebalance.planner import PlanInputError

GETSTRIPE_BATCH = 256
"""Files per ``lfs getstripe`` call (keeps each command line short)."""


MIB = 1 << 20


def bandwidth_mib_s(bytes_s: float) -> int:
    """``lfs migrate -W``'s value for a cap of ``bytes_s``: whole MiB/s, rounded down so the
    cap holds, and at least 1 (lfs has no smaller unit; 0 would mean no cap)."""
    return max(1, int(bytes_s // MIB))


class FileListError(RuntimeError):
    """A file list or layout could not be had (one line): ``lfs``, or a Robinhood database."""


class LfsError(FileListError):
    """``lfs`` missing, failing or printing what cannot be read (one line)."""


@dataclass(frozen=True)
class Lfs:
    """How to run ``lfs``.

    Attributes:
        command: the ``lfs`` command, split like a shell would (``"lfs"``, or a wrapper).
        bandwidth_option: pass ``--bandwidth`` to ``lfs migrate`` (Lustre 2.16+ only).
        timeout_s: the longest a find or getstripe may run, s.
    """
    command: str = "lfs"
    bandwidth_option: bool = False
    timeout_s: float = 3600.0

    def argv(self, *args: str) -> list[str]:
        return [*shlex.split(self.command), *args]

    def _run(self, args: list[str], out_path: Path) -> None:
        argv = self.argv(*args)
        try:
            with open(out_path, "w", encoding="utf-8") as out:
                done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True,
                                      timeout=self.timeout_s, check=False)
        except FileNotFoundError:
            raise LfsError(f"{argv[0]}: not found (the [migrate] lfs command)") from None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LfsError(f"{' '.join(argv[:3])}: {exc}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise LfsError(f"{' '.join(argv[:3])} failed ({done.returncode}): {last}")

    def files_on_ost(self, mount: str, ost: int, workdir: Path) -> list[tuple[str, int]]:
        """``(path, size bytes)`` of every regular file with an object on ``ost``."""
        out = workdir / f"find-OST{ost:04x}.txt"
        self._run(["find", mount, "--ost", str(ost), "--type", "f",
                   "-printf", "%s %p\\n"], out)
        if out.stat().st_size == 0:
            return []
        try:
            paths, sizes = read_find_printf(out)
        except PlanInputError as exc:
            raise LfsError(f"lfs find: {exc}") from None
        return [(p, int(s)) for p, s in zip(paths, sizes)]

    def layouts(self, paths: list[str], workdir: Path) -> dict[str, tuple[list[int], int]]:
        """``{path: (OST indices, stripe size)}``; a file gone since is left out."""
        got: dict[str, tuple[list[int], int]] = {}
        for i in range(0, len(paths), GETSTRIPE_BATCH):
            batch = [p for p in paths[i:i + GETSTRIPE_BATCH] if os.path.lexists(p)]
            if not batch:
                continue
            fd, name = tempfile.mkstemp(prefix="getstripe-", suffix=".txt", dir=workdir)
            os.close(fd)
            try:
                self._run(["getstripe", *batch], Path(name))
                got.update(read_getstripe(name))
            except PlanInputError as exc:
                raise LfsError(f"lfs getstripe: {exc}") from None
            finally:
                os.unlink(name)
        return got

    def migrate_argv(self, path: str, osts: list[int], stripe_size: int,
                     bandwidth_bytes_s: float) -> list[str]:
        """The ``lfs migrate`` command of one move."""
        args = ["migrate", "--non-block", "-c", str(len(osts))]
        if stripe_size > 0:
            args += ["-S", str(int(stripe_size))]
        args += ["-o", ",".join(str(int(o)) for o in osts)]
        if self.bandwidth_option and bandwidth_bytes_s > 0:
            args += ["-W", str(bandwidth_mib_s(bandwidth_bytes_s))]
        return self.argv(*args, path)
