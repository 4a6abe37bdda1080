"""Write totals (lustre_alloc/mapper/state/write_totals.py): a round that looks at the state every few
minutes still counts what every 5 s sample since its last look measured."""
from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.speed.rates import OstRateTracker, totals_rate_bytes_s
from lustre_alloc.mapper.policies.mcmf import McmfPolicy
from lustre_alloc.mapper.policies.mcmf.params import McmfParams
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.mapper.state.write_totals import WriteTotals

MIB = 1 << 20

samples = st.lists(st.tuples(
    st.floats(0.5, 60.0),                                   # span, s
    st.one_of(st.none(), st.integers(0, 10_000)),           # write_ios
    st.one_of(st.none(), st.floats(1e-4, 2.0)),             # mean I/O time, s
    st.one_of(st.none(), st.floats(1.0, 31.0)),             # mean I/Os in flight
    st.one_of(st.none(), st.floats(0.0, 2e9))), min_size=1, max_size=12)  # write bytes/s


def _fold(rows, start: float = 0.0) -> WriteTotals:
    tot, t = WriteTotals(), start
    for span, ios, lat, flight, rate in rows:
        t += span
        tot.add(t, span, ios, lat, flight, rate)
    return tot


@settings(max_examples=200, deadline=None)
@given(samples, samples)
def test_the_totals_since_a_look_are_the_samples_after_it(before, after):
    whole = WriteTotals()
    t = 0.0
    for span, ios, lat, flight, rate in before + after:
        t += span
        whole.add(t, span, ios, lat, flight, rate)
    prefix = _fold(before)
    got = whole.since(prefix)
    want = _fold(after, start=prefix.time_s)
    assert got.samples == want.samples == len(after)
    assert (got.ios, got.flight_ios) == (want.ios, want.flight_ios)
    for name in ("io_time_s", "in_flight", "bytes", "bytes_span_s"):
        # a difference of sums: exact up to the rounding of the larger sum
        assert math.isclose(getattr(got, name), getattr(want, name), rel_tol=1e-9,
                            abs_tol=1e-12 * abs(getattr(whole, name)) + 1e-12), name


def test_one_sample_over_a_span_and_its_parts_give_one_estimate():
    """The simulator's lazy sample over 15 s and three live 5 s samples of the same RPCs:
    the same count-weighted RPC time, in-flight mean and write rate, so the same rate."""
    parts = WriteTotals()
    parts.add(5.0, 5.0, 100, 0.040, 4.0, 40e6)
    parts.add(10.0, 5.0, 0, None, None, 0.0)
    parts.add(15.0, 5.0, 300, 0.020, 2.0, 60e6)
    one = WriteTotals()
    one.add(15.0, 15.0, 400, (100 * 0.040 + 300 * 0.020) / 400, (100 * 4 + 300 * 2) / 400,
            (40e6 * 5 + 60e6 * 5) / 15)
    assert math.isclose(totals_rate_bytes_s(parts), totals_rate_bytes_s(one), rel_tol=1e-12)
    assert math.isclose(parts.latency_s, 0.025) and math.isclose(parts.mean_in_flight, 2.5)


def _sample(store: StateStore, t: float, slow: tuple[int, ...], busy: bool) -> None:
    """A live OSS sample of 8 OSTs on 2 OSSes (the collectors' field names): busy, every
    OST writes 100 RPCs with 4 in flight, the ``slow`` ones at 8x the others' I/O time."""
    for oss in range(2):
        targets = {}
        for i in range(oss * 4, oss * 4 + 4):
            values = {"kbytes_total": 1 << 32, "kbytes_free": 1 << 31, "kbytes_avail": 1 << 31,
                      "write_ios": 0, "write_bytes_per_s": 0.0}
            if busy:
                values.update(write_ios=100, write_ios_in_flight_mean=4.0,
                              write_io_time_ms_mean=80.0 if i in slow else 10.0,
                              write_bytes_per_s=(12.5 if i in slow else 100) * MIB)
            targets[f"OST{i:04x}"] = {"kind": "ost", "index": i, "available": True,
                                      "values": values}
        store.apply("oss", f"oss{oss}", t, 5.0, {"values": {"cpu_percent": 5.0}}, targets)


@pytest.mark.parametrize("regime_params, rr_rounds_expected", [
    (None, [1, 1, 1, 1]),                           # the slow look: 8x > 3x, at once
    ({"look_factor": None}, [1 + 8, 1 + 16, 1 + 16, 1 + 16]),   # the spread alone
])
def test_rounds_after_idle_samples_still_learn_the_ost_that_was_slow(regime_params,
                                                                   rr_rounds_expected):
    """Each minute OSTs 6 and 7 write at an eighth of the others' rate, then idle for two
    samples before the next round. A round that saw only the latest sample found no
    evidence, ever, and kept Lustre's RR over all eight OSTs. The default policy learns it
    at the first round: its look reads them 8x slower than the median, past the regime's
    slow-look factor 3. Without that test the smoothed estimates (0.3 per look) spread
    1.36x, 1.80x, 2.35x, and the flow decides from the third round, past the rate test's
    2x. Either way each slow OST gets at most half a fast one's stripes."""
    store = StateStore()
    _sample(store, 0.0, (), busy=True)
    policy = McmfPolicy(regime_params=regime_params)
    policy.allocate_batch(store.current(0.0), [CreateRequest("warm", 1)])   # first look
    rr_rounds = []
    for minute in (1, 2, 3, 4):
        t = 60.0 * minute
        _sample(store, t - 10, (6, 7), busy=True)
        _sample(store, t - 5, (), busy=False)
        _sample(store, t, (), busy=False)
        snap = store.current(t)
        assert snap.osts[7].write_latency_s is None        # the latest sample: idle
        out = policy.allocate_batch(snap, [CreateRequest(f"j{k}", 4) for k in range(8)])
        rr_rounds.append(policy.stats["regime_rr_requests"])
    assert rr_rounds == rr_rounds_expected
    stripes = Counter(o for p in out for o in p.osts)
    fast_mean = sum(stripes[i] for i in range(6)) / 6
    assert max(stripes[6], stripes[7]) <= fast_mean / 2
    tracker = OstRateTracker(smoothing=1.0)
    tracker.update(snap.osts)                               # everything since the store began
    rates = tracker.rates(list(range(8)))
    assert max(rates[6:]) < rates[:6].min() / 2


def test_evidence_weighting_counts_busy_seconds_however_the_samples_were_grouped():
    """``rate_busy_s``: with the same slow estimate in every sample, a look after each of
    three busy samples and one look after all three end at the same rate (each busy
    interval weighs one sample), and the single look falls further than the default's one
    ``smoothing`` step per look."""
    def stores():
        store = StateStore()
        _sample(store, 0.0, (), busy=True)
        return store

    each, once, default = stores(), stores(), stores()
    trackers = [OstRateTracker(0.3, busy_s=1.0), OstRateTracker(0.3, busy_s=1.0),
                OstRateTracker(0.3)]
    for store, tracker in zip((each, once, default), trackers):
        tracker.update(store.current(0.0).osts)                 # all at the fast rate
    for t in (5.0, 10.0, 15.0):
        for store in (each, once, default):
            _sample(store, t, (6, 7), busy=True)
        trackers[0].update(each.current(t).osts)
    trackers[1].update(once.current(15.0).osts)
    trackers[2].update(default.current(15.0).osts)
    r_each, r_once, r_default = (tr.rates([7])[0] for tr in trackers)
    assert math.isclose(r_each, r_once, rel_tol=1e-9)
    fast = trackers[2].rates([0])[0]
    assert r_once < r_default < fast
    with pytest.raises(ValueError):
        McmfParams(rate_busy_s=0.0)
