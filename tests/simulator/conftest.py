"""Helpers for simulator tests: small scenarios written to tmp_path."""
from __future__ import annotations

from pathlib import Path

import pytest

from traces.format import TraceRecord, write_trace


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
