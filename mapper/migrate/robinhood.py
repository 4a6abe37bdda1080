"""File lists from a Robinhood v3 database instead of ``lfs find`` (``[migrate.robinhood]``).

Sites that run Robinhood (cea-hpc/robinhood) already keep every file's size, type and
stripes in MySQL/MariaDB, and a query on it costs the MDS nothing, where ``lfs find`` walks
the namespace. The tables and columns read, as Robinhood 3.x creates them
(``src/list_mgr/database.h``, ``listmgr_init.c``):

* ``ENTRIES`` (``id``, ``size``, ``type``): one row per entry; ``type = 'file'``;
* ``NAMES`` (``id``, ``parent_id``, ``name``) and the stored function
  ``this_path(parent_id, name)``, which returns ``<root id>/<path below the root>``;
* ``STRIPE_ITEMS`` (``id``, ``stripe_index``, ``ostidx``): one row per stripe, indexed by
  ``ostidx``;
* ``STRIPE_INFO`` (``id``, ``stripe_size``).

The database may lag the file system (Robinhood follows the changelog): whether a file was
written recently is read from the file itself (``stat`` under the mount), and a file the
database lists that is gone is skipped by ``lfs migrate`` itself (its move fails; retried,
then given up). Errors (a refused connection, a query that fails) raise
:class:`mapper.migrate.lfs.FileListError` with one line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mapper.migrate.lfs import FileListError
from mapper.migrate.selection import written_within

BATCH = 500
"""Ids per layout query."""


class RobinhoodFiles:
    """A :class:`mapper.migrate.selection.FileSource` over a Robinhood database.

    Args:
        connect: returns a DB-API connection (PyMySQL's for a site's database).
        mount: where the file system is mounted here (Robinhood's paths are below its root).
        clock: wall seconds.
        placeholder: the driver's parameter marker (``%s`` for PyMySQL, ``?`` for sqlite3).
    """

    def __init__(self, connect: Callable[[], Any], mount: str, clock: Callable[[], float],
                 placeholder: str = "%s"):
        self.connect, self.mount, self.clock, self.ph = connect, mount, clock, placeholder
        self._ids: dict[str, Any] = {}
        self._conn: Any = None

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

    def _path(self, this_path: Any) -> str:
        text = this_path.decode() if isinstance(this_path, bytes) else str(this_path)
        below = text.split("/", 1)[1] if "/" in text else text
        return str(Path(self.mount) / below)

    def files_on_ost(self, ost: int) -> list[tuple[str, int]]:
        rows = self._query(
            "SELECT E.id, E.size, this_path(N.parent_id, N.name) FROM ENTRIES E "
            "JOIN NAMES N ON N.id = E.id WHERE E.type = 'file' AND E.id IN "
            f"(SELECT id FROM STRIPE_ITEMS WHERE ostidx = {self.ph})", (int(ost),))
        out = []
        for fid, size, path in rows:
            p = self._path(path)
            self._ids[p] = fid
            out.append((p, int(size or 0)))
        return out

    def layouts(self, paths: list[str]) -> dict[str, tuple[list[int], int]]:
        by_id = {self._ids[p]: p for p in paths if p in self._ids}
        ids = list(by_id)
        stripes: dict[Any, list[tuple[int, int]]] = {}
        sizes: dict[Any, int] = {}
        for i in range(0, len(ids), BATCH):
            batch = tuple(ids[i:i + BATCH])
            marks = ",".join([self.ph] * len(batch))
            for fid, index, ost in self._query(
                    f"SELECT id, stripe_index, ostidx FROM STRIPE_ITEMS WHERE id IN ({marks})",
                    batch):
                stripes.setdefault(fid, []).append((int(index), int(ost)))
            for fid, size in self._query(
                    f"SELECT id, stripe_size FROM STRIPE_INFO WHERE id IN ({marks})", batch):
                sizes[fid] = int(size or 0)
        return {by_id[fid]: ([o for _, o in sorted(s)], sizes.get(fid, 0))
                for fid, s in stripes.items()}

    def recently_modified(self, path: str, quiet_s: float) -> bool:
        return written_within(path, self.clock(), quiet_s)


def pymysql_connect(table: dict[str, Any]) -> Callable[[], Any]:
    """A connection factory from ``[migrate.robinhood]`` (``host``, ``port``, ``database``,
    ``user``, ``password_file``) with PyMySQL (``pip install PyMySQL``)."""
    def connect() -> Any:
        try:
            import pymysql
        except ImportError:
            raise FileListError("robinhood: PyMySQL is not installed "
                                "(pip install PyMySQL)") from None
        password = ""
        if table.get("password_file"):
            password = Path(table["password_file"]).read_text().strip()
        return pymysql.connect(host=table.get("host", "localhost"),
                               port=int(table.get("port", 3306)),
                               user=table.get("user", "robinhood"), password=password,
                               database=table.get("database", "robinhood_lustre"))
    return connect
