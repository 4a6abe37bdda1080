"""The shim's record file (``LUSTRE_ALLOC_RECORD``; ``docs/client.md``, "Record format"):
one parser for everything that reads it (the live stack's emulated MDS, the tests).

A line is tab-separated ``key=value`` fields, always :data:`RECORD_KEYS` in that order;
the fields of :data:`ENCODED_KEYS` are percent-encoded by the shim (``%``, control
characters and DEL) and decoded here with :func:`urllib.parse.unquote`.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote

RECORD_KEYS = ("v", "ts", "pid", "tid", "op", "backend", "job", "path", "result", "osts",
               "stripe_count", "stripe_size", "pool", "req_count", "req_size", "policy",
               "mapper_fallback", "reason", "mapper_us", "total_us", "lease", "extents",
               "asked")
"""The keys of a version 4 record, in the order the shim writes them (la_record.c);
version 2 added ``lease`` (the lease a layout came from, empty when asked per create),
version 3 ``extents`` (a composite default's component extents, ``start-end`` with
``eof``, ``;`` between components; empty for a plain layout), version 4 ``asked`` (the
mapper's OST list for a plain layout, empty when none was asked; on Lustre ``osts``,
``stripe_count`` and ``stripe_size`` are then what the file was read back to have,
which can differ: ``reason=setstripe_changed``). In a composite record
``osts``, ``stripe_count``, ``stripe_size``, ``pool``, ``req_count`` and ``req_size``
hold one value per component, ``;`` between them, and ``osts`` names a component
without OST objects by its kind (``mdt``, ``ext``, ``keep``)."""
ENCODED_KEYS = ("path", "job", "policy", "mapper_fallback", "reason")
"""Fields the shim percent-encodes."""


class RecordFileError(ValueError):
    """A record line that is not ``key=value`` fields."""


def parse_line(line: str) -> dict[str, str]:
    """One record line as a dict, encoded fields decoded.

    Raises:
        RecordFileError: a field without ``=`` (the message quotes the line's start).
    """
    try:
        rec = dict(kv.split("=", 1) for kv in line.rstrip("\n").split("\t"))
    except ValueError:
        raise RecordFileError(f"record line without key=value fields: {line[:80]!r}") from None
    for key in ENCODED_KEYS:
        if key in rec:
            rec[key] = unquote(rec[key])
    return rec


def read_records(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Every record of the file at ``path`` (none when it does not exist).

    Raises:
        RecordFileError: a malformed line.
    """
    p = Path(path)
    if not p.exists():
        return []
    return [parse_line(line) for line in p.read_text().splitlines() if line]


class RecordTail:
    """Reads a record file as it grows: each :meth:`read` returns the complete lines
    appended since the last one (a partial last line waits); malformed lines are skipped
    and counted in :attr:`skipped`."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.offset = 0
        self.skipped = 0

    def read(self) -> list[dict[str, str]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        out = []
        for raw in data[: end + 1].decode("utf-8", "replace").splitlines():
            try:
                out.append(parse_line(raw))
            except RecordFileError:
                self.skipped += 1
        return out
