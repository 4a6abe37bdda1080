"""Prometheus metrics of the broker and the collector (registries from
:func:`lustre_alloc.common.metrics.service_registry`: also ``process_*`` and ``lustre_alloc_build_info``).

Broker, prefixed ``lustre_alloc_broker_`` (read from :class:`lustre_alloc.collectors.broker.BrokerStats` at
scrape time, so the forwarding loop pays nothing):

=================================  =========  =============================================
``messages_total``                 counter    samples received from publishers
``received_bytes_total``           counter    their bytes
``dropped_messages_total``         counter    refused: bad topic or frames
``snapshot_requests_total``        counter    last-value cache requests served
``subscriptions_total``            counter    subscriptions seen on the backend
``handshake_failures_total``       counter    CURVE handshakes refused (unkeyed/unlisted peers)
``cached_servers``                 gauge      servers in the last-value cache
=================================  =========  =============================================

Collector, prefixed ``lustre_alloc_collector_``:

=================================  =========  =============================================
``samples_total``                  counter    samples taken
``collect_seconds``                histogram  time to read, parse and reduce one sample
``target_available{target,fsname}`` gauge     1 when the target's essential sources were read
``unavailable_sources``            gauge      sources named unavailable in the last sample
``last_sample_timestamp_seconds``  gauge      Unix time of the last sample
=================================  =========  =============================================
"""
from __future__ import annotations

from typing import Any, Iterable

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from lustre_alloc.common.fsname import fsname_of
from lustre_alloc.common.metrics import service_registry

BROKER = "lustre_alloc_broker_"
COLLECTOR = "lustre_alloc_collector_"
_BROKER_COUNTERS = (("messages_in", "messages", "Samples received from publishers"),
                    ("bytes_in", "received_bytes", "Bytes of the samples received"),
                    ("dropped", "dropped_messages", "Messages refused: bad topic or frames"),
                    ("snapshots", "snapshot_requests", "Last-value cache requests served"),
                    ("subscriptions", "subscriptions", "Subscriptions seen on the backend"),
                    ("handshake_failures", "handshake_failures",
                     "CURVE handshakes refused (unkeyed or unlisted peers)"))


class _BrokerStats(Collector):
    def __init__(self, broker: Any):
        self.broker = broker

    def collect(self) -> Iterable:
        stats = self.broker.stats
        for field, name, doc in _BROKER_COUNTERS:
            yield CounterMetricFamily(BROKER + name, doc, value=getattr(stats, field))
        yield GaugeMetricFamily(BROKER + "cached_servers", "Servers in the last-value cache",
                                value=stats.cached)


def broker_registry(broker: Any):
    """The broker's registry, reading ``broker.stats`` at scrape time."""
    registry = service_registry("broker")
    registry.register(_BrokerStats(broker))
    return registry


class CollectorMetrics:
    """The collector's metrics; :meth:`sample` records one collected body."""

    def __init__(self) -> None:
        self.registry = r = service_registry("collector")
        self.samples = Counter(COLLECTOR + "samples", "Samples taken", registry=r)
        self.collect_seconds = Histogram(COLLECTOR + "collect_seconds",
                                         "Read, parse and reduce one sample, seconds",
                                         buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
                                         registry=r)
        self.available = Gauge(COLLECTOR + "target_available",
                               "1 when the target's essential sources were read",
                               ["target", "fsname"], registry=r)
        self.unavailable = Gauge(COLLECTOR + "unavailable_sources",
                                 "Sources named unavailable in the last sample", registry=r)
        self.last = Gauge(COLLECTOR + "last_sample_timestamp_seconds",
                          "Unix time of the last sample", registry=r)
        self.broker_rejections = Counter(COLLECTOR + "broker_rejections",
                                         "Handshakes the broker refused (this collector's "
                                         "CURVE key is not authorised)", registry=r)

    def sample(self, body: dict[str, Any], seconds: float, at: float) -> None:
        self.samples.inc()
        self.collect_seconds.observe(seconds)
        self.last.set(at)
        missing = len(body.get("server", {}).get("unavailable", {}))
        for name, target in body.get("targets", {}).items():
            missing += len(target.get("unavailable", {}))
            fs = target.get("fsname") or fsname_of(name) or ""
            self.available.labels(name, fs).set(1 if target.get("available") else 0)
        self.unavailable.set(missing)
