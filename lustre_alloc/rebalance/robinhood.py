"""File lists from a Robinhood v3 database instead of ``lfs find`` (``[migrate.robinhood]``).

Sites that run Robinhood (cea-hpc/robinhood) already keep every file's size, type and
stripes in MySQL/MariaDB, and a query on it costs the MDS nothing, where ``lfs find`` walks
the namespace. The tables and columns read, as Robinhood 3.x creates them
(``src/list_mgr/database.h``, ``listmgr_init.c``):

* ``ENTRIES`` (``id``, ``size``, ``type``): one row per entry; ``type = 'file'``;
* ``NAMES`` (``id``, ``parent_id``, ``name``) and the stored function
  ``this_path(parent_id, name)``, which returns ``<root id>/<path below the root>``, and
  ``<id>/<partial path>`` when the ancestor ``<id>`` is missing from ``NAMES``
  (``listmgr_init.c``: ``EXIT HANDLER FOR NOT FOUND RETURN CONCAT(pid,'/',p)``): a path is
  used only when it starts with the root's id (``lfs path2fid <mount>``), else skipped,
  since a partial path could name another file;
* ``STRIPE_ITEMS`` (``id``, ``ostidx``): which files have an object on an OST.

Names are bytes (``VARBINARY``): any bytes but ``/`` and NUL, decoded with
:func:`os.fsdecode`. The database may lag the file system (Robinhood follows the
changelog): whether a file was written recently, and its layout, are read from the file
itself under the mount (:class:`lustre_alloc.rebalance.lfs.Lfs`), so a file moved since the
database last saw it is not moved again and a file gone drops out. A file with several
names (hard links) is listed once. Errors (a refused connection, a query that fails) raise
:class:`lustre_alloc.rebalance.lfs.FileListError` with one line.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

from lustre_alloc.rebalance.lfs import FileListError, Lfs
from lustre_alloc.rebalance.selection import LfsFiles

FID = re.compile(r"\[?(0x[0-9a-fA-F]+:0x[0-9a-fA-F]+:0x[0-9a-fA-F]+)\]?")


class RobinhoodFiles(LfsFiles):
    """A :class:`lustre_alloc.rebalance.selection.FileSource` over a Robinhood database:
    the file lists from its tables, the rest (layouts, pools, mtimes: read from the files
    under the mount) as :class:`lustre_alloc.rebalance.selection.LfsFiles` does.

    Args:
        connect: returns a DB-API connection (PyMySQL's for a site's database).
        mount: where the file system is mounted here (Robinhood's paths are below its root).
        clock: wall seconds.
        placeholder: the driver's parameter marker (``%s`` for PyMySQL, ``?`` for sqlite3).
        lfs: reads layouts and pools, and the root's FID (default: ``lfs``).
        fsname: for pool names.
        workdir: scratch files of ``lfs`` (default: a new temporary folder).
        root_id: the root's id as Robinhood writes it (default: ``lfs path2fid <mount>``).
    """

    def __init__(self, connect: Callable[[], Any], mount: str, clock: Callable[[], float],
                 placeholder: str = "%s", *, lfs: Lfs | None = None, fsname: str = "",
                 workdir: Path | None = None, root_id: str | None = None):
        super().__init__(lfs or Lfs(), mount, workdir or Path(tempfile.mkdtemp(prefix="rbh-")),
                         clock, fsname)
        self.connect, self.ph = connect, placeholder
        self._root_id = root_id
        self._conn: Any = None
        self.partial_paths = 0
        """Rows skipped because their path was partial (an ancestor missing), all passes."""

    def _query(self, sql: str, args: tuple) -> list[tuple]:
        try:
            if self._conn is None:
                self._conn = self.connect()
            cur = self._conn.cursor()
            cur.execute(sql, args)
            return list(cur.fetchall())
        except Exception as exc:  # noqa: BLE001 - any driver's error is one line here
            self._conn = None
            raise FileListError(f"robinhood: {type(exc).__name__}: "
                                f"{' '.join(str(exc).split())}") from None

    def root_id(self) -> str:
        """The root's id (``lfs path2fid <mount>`` once). Raises FileListError."""
        if self._root_id is None:
            out = self.workdir / "path2fid.txt"
            self.lfs._run(["path2fid", self.mount], out)
            m = FID.search(out.read_text(errors="replace"))
            if not m:
                raise FileListError(f"lfs path2fid {self.mount}: no FID in its output")
            self._root_id = m.group(1)
        return self._root_id

    def _path(self, this_path: Any) -> str | None:
        """The path under the mount, or None for a partial one (module doc)."""
        raw = this_path if isinstance(this_path, bytes) else os.fsencode(str(this_path))
        head, sep, below = raw.partition(b"/")
        if not sep or os.fsdecode(head) != self.root_id():
            return None
        return str(Path(self.mount) / os.fsdecode(below))

    def files_on_ost(self, ost: int) -> list[tuple[str, int]]:
        rows = self._query(
            "SELECT E.id, E.size, this_path(N.parent_id, N.name) FROM ENTRIES E "
            "JOIN NAMES N ON N.id = E.id WHERE E.type = 'file' AND E.id IN "
            f"(SELECT id FROM STRIPE_ITEMS WHERE ostidx = {self.ph})", (int(ost),))
        out, seen = [], set()
        for fid, size, path in rows:
            if fid in seen:                   # another name of a file listed (a hard link)
                continue
            p = self._path(path) if path is not None else None
            if p is None:
                self.partial_paths += 1
                continue
            seen.add(fid)
            out.append((p, int(size or 0)))
        return out


def pymysql_connect(table: dict[str, Any]) -> Callable[[], Any]:
    """A connection factory from ``[migrate.robinhood]`` (``host``, ``port``, ``database``,
    ``user``, ``password_file``) with PyMySQL (``pip install 'lustre-alloc[robinhood]'``)."""
    def connect() -> Any:
        try:
            import pymysql
        except ImportError:
            raise FileListError("robinhood: PyMySQL is not installed "
                                "(pip install 'lustre-alloc[robinhood]')") from None
        password = ""
        if table.get("password_file"):
            password = Path(table["password_file"]).read_text().strip()
        return pymysql.connect(host=table.get("host", "localhost"),
                               port=int(table.get("port", 3306)),
                               user=table.get("user", "robinhood"), password=password,
                               database=table.get("database", "robinhood_lustre"))
    return connect
