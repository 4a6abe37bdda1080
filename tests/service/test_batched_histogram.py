"""``request_seconds`` is a BatchedHistogram (one weighted observation per batch): its
exposition must be prometheus_client's Histogram's for the same observations."""
from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from lustre_alloc.mapper.service.metrics import LATENCY_BUCKETS_S, BatchedHistogram, MapperMetrics

NAME = "lustre_alloc_mapper_request_seconds"
HELP = "Request receive to reply, seconds"
OBSERVED = [(0.0, 1), (30e-6, 3), (50e-6, 2), (51e-6, 1), (0.0005, 7), (0.003, 1), (0.9, 2),
            (1.0, 1), (4.0, 5), (2e-3, 0)]


def _exposition(fill) -> tuple[str, str]:
    """(exposition without the _created line, that line's name and labels)."""
    reg = CollectorRegistry()
    fill(reg)
    text = generate_latest(reg).decode()
    created = re.findall(r"^(\S+_created)\S* \S+$", text, re.M)
    return re.sub(r"^\S+_created\S* \S+\n", "", text, flags=re.M), "".join(created)


def _reference(reg) -> None:
    h = Histogram(NAME, HELP, buckets=LATENCY_BUCKETS_S, registry=reg)
    for value, n in OBSERVED:
        for _ in range(n):
            h.observe(value)


def test_exposition_equals_prometheus_histogram_for_the_same_observations():
    def batched(reg):
        h = BatchedHistogram(NAME, HELP, LATENCY_BUCKETS_S, registry=reg)
        for value, n in OBSERVED:
            for _ in range(n):
                h.observe(value)
    assert _exposition(batched) == _exposition(_reference)


def test_weighted_observations_count_like_repeated_ones():
    def batched(reg):
        h = BatchedHistogram(NAME, HELP, LATENCY_BUCKETS_S, registry=reg)
        for value, n in OBSERVED:
            h.observe_n(value, n)
    got, got_created = _exposition(batched)
    want, want_created = _exposition(_reference)
    assert got_created == want_created == NAME + "_created"
    sums = [re.findall(r"^" + NAME + r"_sum (\S+)$", t, re.M) for t in (got, want)]
    assert float(sums[0][0]) == pytest.approx(float(sums[1][0]), rel=1e-12)
    strip = re.compile(r"^" + NAME + r"_sum \S+\n", re.M)
    assert strip.sub("", got) == strip.sub("", want)


def test_service_metrics_expose_request_seconds_as_a_histogram():
    m = MapperMetrics()
    m.request_seconds.observe_n(120e-6, 4)
    text = generate_latest(m.registry).decode()
    assert f"# TYPE {NAME} histogram" in text
    assert f'{NAME}_bucket{{le="0.0002"}} 4.0' in text
    assert f'{NAME}_bucket{{le="+Inf"}} 4.0' in text
    assert f"{NAME}_count 4.0" in text


def test_stripes_are_tallied_per_file_system_and_exposed_per_ost():
    m = MapperMetrics()
    m.count_stripes("fsb", [(3, 1)])
    m.count_stripes("fsa", [(1,), (1, 2)])
    m.count_stripes("fsb", [])
    text = generate_latest(m.registry).decode()
    lines = [ln for ln in text.splitlines() if ln.startswith("lustre_alloc_mapper_ost_stripes_total")]
    assert lines == [
        'lustre_alloc_mapper_ost_stripes_total{fsname="fsa",target="fsa-OST0001"} 2.0',
        'lustre_alloc_mapper_ost_stripes_total{fsname="fsa",target="fsa-OST0002"} 1.0',
        'lustre_alloc_mapper_ost_stripes_total{fsname="fsb",target="fsb-OST0001"} 1.0',
        'lustre_alloc_mapper_ost_stripes_total{fsname="fsb",target="fsb-OST0003"} 1.0']
