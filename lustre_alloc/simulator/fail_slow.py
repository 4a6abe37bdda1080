"""Fail-slow drives at a measured incidence: the ``fail_slow`` event.

A fail-slow drive keeps working, slower (Gunawi et al., "Fail-Slow at Scale", FAST 2018);
under RAID its OST runs at the pace of that drive, and nothing in Lustre flags it (no
``DEGRADED``). The event does not name OSTs: each run draws them from its seed, so the
seeds of a sweep sample the days of a file system of that size.

Keys (all required except ``at_s``, which must be 0):

``drives_per_ost``
    drives under one OST (an integer >= 1).
``rate_per_drive_day``
    fail-slow onsets per drive per day (Perseus, ACM TOS 2023: 304 fail-slow drives among
    248K monitored over 10 months).
``persistence_days``
    mean days a fail-slow drive stays in service before it is found and replaced; with the
    rate it gives how many are present on a given day.
``fraction``
    bandwidth of an OST with a fail-slow drive, as a fraction of its own (0 < f <= 1).

The draw (:func:`draw`), independently per OST: present at t=0 with probability
``1 - exp(-drives_per_ost * rate_per_drive_day * persistence_days)`` (a Poisson count of
slow drives present, one or more slowing the OST once); otherwise an onset during the run
at an exponential time of rate ``drives_per_ost * rate_per_drive_day`` per day, if it falls
before the end. A drive found within the run stays slow to its end (the replacement is
not modelled: its chance within one day is small against the persistence). Each slow OST
becomes an unflagged ``degrade`` event of ``fraction``.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

KIND = "fail_slow"
KEYS = {"drives_per_ost", "rate_per_drive_day", "persistence_days", "fraction"}
DAY_S = 86400.0


def parse(where: str, t: dict[str, Any], num, EventError: type[ValueError]) -> dict[str, Any]:
    """The event's fields from its table (``num``: the events module's number check;
    ``EventError``: its error, passed in so that this module does not import it back).

    Raises:
        EventError (from ``num`` or here): a missing key, a value out of range, ``at_s``
            other than 0.
    """
    for k in sorted(KEYS):
        if k not in t:
            raise EventError(f"{where}{k}: missing")
    d = t["drives_per_ost"]
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise EventError(f"{where}drives_per_ost: expected an integer >= 1, got {d!r}")
    if t.get("at_s") != 0:
        raise EventError(f"{where}at_s: a fail_slow draw covers the whole run; at_s must be 0")
    if "duration_s" in t:
        raise EventError(f"{where}duration_s: a fail-slow drive stays slow to the end of the run")
    return {"fraction": num(where, "fraction", t["fraction"], 0.0, lo_open=True, hi=1.0),
            "flagged": False,
            "extra": {"drives_per_ost": d,
                      "rate_per_drive_day": num(where, "rate_per_drive_day",
                                                t["rate_per_drive_day"], 0.0),
                      "persistence_days": num(where, "persistence_days",
                                              t["persistence_days"], 0.0)}}


def draw(event, ost_count: int, duration_s: float, seed: int) -> list:
    """The unflagged ``degrade`` events of one run: one per OST drawn slow (see the
    module doc), ``at_s`` 0 for those present at the start, the onset time for the others.
    Deterministic in ``seed`` and the event's index."""
    x = event.extra
    per_day = x["drives_per_ost"] * x["rate_per_drive_day"]
    rng = np.random.default_rng([seed, 0xFA11, event.index])
    present = rng.random(ost_count) < 1.0 - math.exp(-per_day * x["persistence_days"])
    onset_s = (rng.exponential(DAY_S / per_day, ost_count) if per_day > 0
               else np.full(ost_count, math.inf))
    out = []
    for o in range(ost_count):
        at = 0.0 if present[o] else float(onset_s[o])
        if at < duration_s:
            out.append(replace(event, kind="degrade", at_s=at, osts=(o,), flagged=False,
                               extra={"fail_slow": True}))
    return out


def realise(events: tuple, ost_count: int, duration_s: float, seed: int) -> tuple:
    """``events`` with every ``fail_slow`` event replaced by its :func:`draw` over the
    ``ost_count`` OSTs present at t=0."""
    out = []
    for e in events:
        out.extend(draw(e, ost_count, duration_s, seed) if e.kind == KIND else [e])
    return tuple(out)
