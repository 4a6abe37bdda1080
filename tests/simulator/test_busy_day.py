"""The busy-day world: nersc-lmt-day's real job mix at the LMT peak's
utilisation. Every number in its header is recomputed from the bundled sources, and the
world differs from nersc-lmt-day only in how often its managed jobs run."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from lustre_alloc_data import __file__ as data_init
from lustre_alloc.simulator.scenario import SCENARIO_DIR, load_scenario
from lustre_alloc.simulator.workload import workload_records

SUMMARY = Path(data_init).parent / "nersc-pytokio" / "hacc_io_jobs_summary.csv.gz"
OST_MIB_S, OSTS = 1961, 248          # cscratch1, as in fail-slow-drives


def _offered(sc, workloads) -> float:
    """Bytes read and written by ``workloads`` over the run / (snx11025's bandwidth, 24 OSTs
    at the 700 MiB/s median, x the run's length)."""
    moved = sum(r.bytes for w in workloads for r in workload_records(w, sc.duration_s)
                if r.op in ("read", "write"))
    return moved / (24 * 700 * 2**20 * sc.duration_s)


def _others_utilisation() -> pd.Series:
    """Other jobs' share of cscratch1's bandwidth in each clean HACC job window."""
    d = pd.read_csv(SUMMARY)
    clean = d[d.fs_frac_missing <= 0.01]
    window = clean._datetime_end - clean._datetime_start
    own = clean.darshan_biggest_write_fs_bytes + clean.darshan_biggest_read_fs_bytes
    others = ((clean.fs_tot_bytes_written + clean.fs_tot_bytes_read - own) / window).clip(lower=0)
    return others / (OSTS * OST_MIB_S * 2**20)


def test_the_peak_utilisation_is_the_lmt_records():
    util = _others_utilisation()
    assert len(util) == 127
    assert util.max() == pytest.approx(0.1961, abs=5e-5)
    assert util.median() == pytest.approx(0.0218, abs=5e-5)
    assert util.quantile(0.9) == pytest.approx(0.132, abs=5e-4)
    text = (SCENARIO_DIR / "nersc-busy-day.toml").read_text()
    assert "19.61% at the peak" in text and "2.18% of cscratch1's bandwidth at the median" in text


def test_the_busy_day_offers_the_peak_and_is_otherwise_nersc_lmt_day():
    busy, day = load_scenario("nersc-busy-day"), load_scenario("nersc-lmt-day")
    # the background is the same real LMT pattern: 2.37% of the bandwidth
    background = _offered(day, day.workloads[:1])
    assert background == pytest.approx(0.0237, abs=5e-5)
    managed = _offered(day, day.workloads[1:])
    assert managed == pytest.approx(0.03417, abs=5e-5)
    peak = _others_utilisation().max()
    factor = (peak - background) / managed
    assert factor == pytest.approx(5.045, abs=1e-3)
    # each managed workload repeats 5.045 times as often, HACC's checkpoints included
    for b, d in zip(busy.workloads[1:4], day.workloads[1:4]):
        assert b.repeat_every_s == pytest.approx(d.repeat_every_s / factor, abs=0.05)
    hacc = busy.workloads[4].params["checkpoint_interval_s"]
    assert hacc == pytest.approx(3600 / factor, abs=0.05)
    # the day it offers: the peak, within what whole repeats allow
    assert _offered(busy, busy.workloads) == pytest.approx(peak, rel=0.03)
    # nothing else differs
    same = replace(busy, name=day.name, description=day.description, path=day.path,
                   workloads=day.workloads)
    assert same == day
    for b, d in zip(busy.workloads, day.workloads):
        assert (b.kind, b.source, b.start_s, b.seed, b.managed) == \
            (d.kind, d.source, d.start_s, d.seed, d.managed)
    assert re.search(r"repeats 5\.045 times as often", (SCENARIO_DIR / "nersc-busy-day.toml").read_text())
