"""Each file's size once its writes are done, from a pass over a run's records: what the
shim reports when the application closes the file (docs/client.md, "File sizes at close"),
and what the ``"final"`` size hint announces at create (a reference: a real create cannot
know it, :class:`lustre_alloc.simulator.create_path.CreatePath`).

A file's size is the sum of its ``write`` records' bytes (a record appends,
docs/simulator.md "Known limits"); background traffic names no file and is not counted.
"""
from __future__ import annotations

from typing import Iterable

from lustre_alloc.traces.format import TraceRecord


def final_sizes(records: Iterable[TraceRecord]) -> dict[str, int]:
    """File id -> bytes its write records add up to (files written at least once)."""
    out: dict[str, int] = {}
    for rec in records:
        if rec.op == "write" and rec.ost is None and rec.file_id:
            out[rec.file_id] = out.get(rec.file_id, 0) + rec.bytes
    return out


__all__ = ["final_sizes"]
