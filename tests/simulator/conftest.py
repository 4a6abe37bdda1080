"""Helpers for simulator tests: small scenarios written to tmp_path."""
from __future__ import annotations

from pathlib import Path

import pytest

from lustre_alloc.traces.format import TraceRecord, write_trace


def rec(ts, op, job, fid="", nbytes=0, sc=1, ss=1 << 20, ost=None, ops=1):
    return TraceRecord(float(ts), op, job, fid, nbytes, sc if op == "write" else 0,
                       ss if op == "write" else 0, ost, ops)


@pytest.fixture
def make_scenario(tmp_path: Path):
    """Write a scenario (and an optional trace) and return its path."""
    def _make(body: str, records: list[TraceRecord] | None = None, name: str = "t") -> Path:
        if records is not None:
            write_trace(tmp_path / f"{name}.csv", records)
        p = tmp_path / f"{name}.toml"
        p.write_text(body)
        return p
    return _make


SMALL = """
name = "small"
duration_s = {duration}
seed = 7
policies = {policies}

[cluster]
oss_count = 2
osts_per_oss = 2
ost_size_gib = 100
ost_bandwidth_mib_s = {bw}

[cluster.initial_fill]
mode = "explicit"
used_fraction = {fill}

[[workload]]
trace = "t.csv"
"""


def small(duration=3600, policies='["round_robin"]', bw=100, fill="[0.0, 0.0, 0.0, 0.0]"):
    return SMALL.format(duration=duration, policies=policies, bw=bw, fill=fill)


EIGHT_OSTS = """
name = "{name}"
duration_s = 3600
seed = 7
policies = {policies}

[cluster]
oss_count = 4
osts_per_oss = 2
ost_size_gib = 1000
ost_bandwidth_mib_s = 100
stats_interval_s = 5
statfs_interval_s = 5

[cluster.initial_fill]
mode = "explicit"
used_fraction = [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
{events}
[[workload]]
trace = "t.csv"
"""


def eight_ost_world(name: str, policies: str, *events: str) -> str:
    """A one-hour world of 8 alike OSTs on 4 OSSes sampled every 5 s, its trace ``t.csv``,
    with the given ``[[event]]`` tables (:func:`unflagged_degrade`)."""
    return EIGHT_OSTS.format(name=name, policies=policies, events="".join(events))


def unflagged_degrade(ost: int, at_s: float, duration_s: float | None = None,
                      fraction: float = 0.2) -> str:
    """An ``[[event]]`` slowing ``ost`` to ``fraction`` with nothing in Lustre flagging it."""
    lasts = f"duration_s = {duration_s:g}\n" if duration_s is not None else ""
    return (f"\n[[event]]\nkind = \"degrade\"\nat_s = {at_s:g}\nost = {ost}\n"
            f"fraction = {fraction:g}\n{lasts}flagged = false\n")
