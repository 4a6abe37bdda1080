"""What the rate tracker learned about each OST, kept across a mapper restart.

A fail-slow drive stays slow for days to months (Gunawi et al., "Fail-Slow at Scale",
FAST 2018: of the incidents with a known duration, 45% lasted days or longer), and the
tracker keeps a slow OST's estimate while the OST is quiet
(:class:`lustre_alloc.mapper.speed.rates.OstRateTracker`). A restart (an upgrade, the MDS failing over)
that forgot it would send stripes to that OST again until new RPC times showed it slow.
So the estimates are saved with the learned predictor, under the state document's
``ost_rates`` key (:mod:`lustre_alloc.mapper.predictor.markov_store`), and restored at start::

    "ost_rates": {"version": 1,
                  "rate_bytes_s": {"12": 5.1e8, ...},       # smoothed estimate per OST index
                  "rpc_time_s": {"12": 0.0021, ...},        # smoothed brw_stats write RPC time
                  "last_look_bytes_s": {"12": 4.9e8, ...},  # latest RPC-timed look, unsmoothed
                  "oss_limit_bytes_s": {"oss3": 2.2e9, ...}}  # measured LNet link limit

Keys are Lustre OST indices (the ``OSTxxxx`` of a target name, stable across restarts) and
OSS names. Restored values are evidence like any other: the next RPC-timed look raises an
estimate at once or lowers it by smoothing. A file without the key (saved by an older
build) restores nothing; older builds ignore the key.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from lustre_alloc.mapper.speed.rates import OstRateTracker

OST_RATES_KEY = "ost_rates"
"""The state document's key holding :func:`export_rate_memory`'s document."""
RATE_MEMORY_VERSION = 1
"""Version of the layout above; a document of another version is refused."""



class RateMemoryError(ValueError):
    """The ``ost_rates`` document is not an object or is of another version."""


def export_rate_memory(tracker: OstRateTracker) -> dict[str, Any]:
    """A copy of ``tracker``'s per-OST estimates and OSS limits, as plain JSON types.

    Each dict is copied with ``dict()`` first (one C call under the GIL), so a round
    updating the tracker in another thread cannot change it mid-copy.
    """
    doc: dict[str, Any] = {"version": RATE_MEMORY_VERSION}
    for key, table in _ost_tables(tracker).items():
        doc[key] = {str(i): float(v) for i, v in dict(table).items()}
    doc["oss_limit_bytes_s"] = {str(n): float(v) for n, v in dict(tracker.oss_limit).items()}
    return doc


def restore_rate_memory(tracker: OstRateTracker, doc: Any, where: str = OST_RATES_KEY) -> int:
    """Put a saved :func:`export_rate_memory` document into ``tracker``; returns the entries
    skipped as malformed (an index that is not an integer >= 0, a value that is not a
    finite number > 0). ``doc`` None (a file without the key) restores nothing.

    Raises:
        RateMemoryError: ``doc`` is not an object or names another version (``where``
            names the key in the message).
    """
    if doc is None:
        return 0
    if not isinstance(doc, Mapping):
        raise RateMemoryError(f"{where}: not an object")
    if doc.get("version") != RATE_MEMORY_VERSION:
        raise RateMemoryError(f"{where}: version {doc.get('version')!r}, this build reads "
                              f"version {RATE_MEMORY_VERSION}")
    skipped = 0
    for key, table in _ost_tables(tracker).items():
        entries, bad = _entries(doc.get(key), _ost_index)
        table.update(entries)
        skipped += bad
    entries, bad = _entries(doc.get("oss_limit_bytes_s"), _oss_name)
    tracker.oss_limit.update(entries)
    return skipped + bad


def _ost_tables(tracker: OstRateTracker) -> dict[str, dict[int, float]]:
    """The tracker's per-OST tables under their document keys."""
    return {"rate_bytes_s": tracker.rate, "rpc_time_s": tracker.latency,
            "last_look_bytes_s": tracker.last_look}


def _entries(table: Any, key_of) -> tuple[dict, int]:
    """(the valid entries of ``table`` with their keys converted, entries skipped)."""
    if table is None:
        return {}, 0
    if not isinstance(table, Mapping):
        return {}, 1
    out, bad = {}, 0
    for k, v in table.items():
        key = key_of(k)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        if key is None or not ok:
            bad += 1
            continue
        out[key] = float(v)
    return out, bad


def _ost_index(key: Any) -> int | None:
    try:
        index = int(key)
    except (TypeError, ValueError):
        return None
    return index if index >= 0 and str(index) == str(key) else None


def _oss_name(key: Any) -> str | None:
    return key if isinstance(key, str) and key else None
