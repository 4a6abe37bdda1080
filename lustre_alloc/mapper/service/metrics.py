"""Prometheus metrics of the mapper service, in a registry of its own
(:func:`lustre_alloc.common.metrics.service_registry`: also ``process_*`` and
``lustre_alloc_build_info{service="mapper"}``).

Names (all prefixed ``lustre_alloc_mapper_``; base units; per-OST series carry
lustre_exporter's labels ``target="<fsname>-OST<hex>"`` and ``fsname``):

==================================  =========  ==========================================
``requests_total{result}``          counter    replies by result: ``ok``, ``fallback``,
                                               ``error``, ``bad_request``, ``ping``,
                                               ``out_of_scope`` (``[scope]``: EPERM),
                                               ``shadow`` (decided in shadow mode),
                                               ``report`` (shadow reports answered)
``request_seconds``                 histogram  receive -> reply sent, per request
``rounds_total``                    counter    allocation rounds (one batch each)
``reloads_total{result}``           counter    SIGHUP reloads: ``applied``, ``rejected``
``round_seconds``                   histogram  duration of a round (policy + checks)
``round_requests``                  histogram  requests solved per round
``layouts_total{result}``           counter    layouts that left the mapper, per create or
                                               leased: ``ok`` (the primary decided),
                                               ``fallback``
``fallbacks_total{reason}``         counter    layouts the fallback decided, by reason
``check_violations_total``          counter    replies the last-line check rejected
``stale_servers``                   gauge      OSSes whose samples are too old
``mds_cpu_ratio``                   gauge      MDS CPU the gate sees, 0..1
``osts{state}``                     gauge      OSTs known (``{state="usable"}`` / ``"all"``)
``samples_total``                   counter    collector samples applied
``samples_rejected_total``          counter    samples refused: undecodable or not schema 1
                                               (``Subscriber.undecodable``)
``state_saves_total{result}``       counter    learned-state saves, ``ok`` / ``error``
``state_saves_skipped_total``       counter    periodic saves skipped (previous one writing)
``state_records_skipped_total``     counter    malformed learned-state records skipped at load
``peer_limited_total{limit}``       counter    requests bounded per client: ``rate`` (EBUSY),
                                               ``new_apps`` (learned under an overflow id)
``expected_bytes_clipped_total``    counter    expected_bytes above the pool's free space
``ost_predicted_load_bytes``        gauge      the primary's predicted load per OST
  ``{target, fsname}``                         (``predicted_load()`` if the policy has it,
                                               else MCMF's pending bytes: placed, not yet
                                               visible in the OST's space)
``ost_stripes_total{target,fsname}`` counter   stripes of files created per OST: per
                                               create at the answer, leased when the client
                                               releases the lease naming the layouts it used
                                               (an expired lease's layouts are not counted)
``scope_changes_total``             counter    reloads that changed the ``[scope]`` in force
``shadow_reports_total{result}``    counter    shim reports of Lustre's layout in shadow
                                               mode: ``ok``, ``unknown``, ``duplicate``
==================================  =========  ==========================================

Per-request counters are kept as plain integers by the service and turned into samples
at scrape time (custom collectors), so the hot path costs no lock per OST or per reply:
``ost_stripes_total`` is tallied once per round (:meth:`MapperMetrics.count_stripes`), and
``request_seconds`` is a :class:`BatchedHistogram` fed once per batch with the batch's
reply count (every reply of a batch waited the same time), exposed exactly as
prometheus_client's ``Histogram`` would expose the same observations (the per-round
histograms are BatchedHistograms too: no lock per observation).

:class:`ServiceGauges` refreshes the per-file-system gauges (label ``fsname``) about once a
second from the loop, and registers the scrape-time views of the client bounds.

:class:`ServiceGauges` refreshes the per-file-system gauges (label ``fsname``) about once a
second from the loop, and registers the scrape-time views of the client bounds.
"""
from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter as Tally
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

import prometheus_client.metrics
from prometheus_client import Counter, Gauge
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import INF, floatToGoString

from lustre_alloc.common.metrics import MAPPER_PREFIX
from lustre_alloc.mapper.state.ost_health import is_usable

if TYPE_CHECKING:       # the gauges read these; importing them here would be a cycle
    from lustre_alloc.mapper.service.fs_context import FsContext
    from lustre_alloc.mapper.service.limits import PeerLimits

from lustre_alloc.common.fsname import target_name
from lustre_alloc.common.metrics import serve as serve_metrics, service_registry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX = MAPPER_PREFIX
LATENCY_BUCKETS_S = (50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3, 0.25, 1.0)
ROUND_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
RESULTS = ("ok", "fallback", "error", "bad_request", "ping", "out_of_scope", "shadow", "report",
           "lease", "release", "sizes")


class BatchedHistogram(Collector):
    """A histogram without labels that takes an observation with a count
    (:meth:`observe_n`: ``n`` observations of the same value at the cost of one), for a
    value shared by a whole batch. Its exposition (``_bucket``, ``_count``, ``_sum``,
    ``_created``) is prometheus_client's ``Histogram``'s for the same observations.

    Counts are plain integers updated by one thread (the request loop); a scrape reads a
    copy, so it may see a batch's counts a moment before its sum, as it may with
    prometheus_client's per-value locks.
    """

    def __init__(self, name: str, documentation: str, buckets: Sequence[float],
                 registry=None):
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if not bounds or bounds[-1] != INF:
            bounds.append(INF)
        if len(bounds) < 2:
            raise ValueError("Must have at least two buckets")
        self.name = name
        self.documentation = documentation
        self._bounds = bounds
        self._le = [floatToGoString(b) for b in bounds]
        self._counts = [0] * len(bounds)
        self._sum = 0.0
        self._created = time.time()
        if registry is not None:
            registry.register(self)

    def observe(self, amount: float) -> None:
        """One observation (as ``Histogram.observe``)."""
        self.observe_n(amount, 1)

    def observe_n(self, amount: float, n: int) -> None:
        """``n`` observations of ``amount`` (nothing when ``n`` is 0)."""
        if n:
            self._counts[bisect_left(self._bounds, amount)] += n   # first bound >= amount
            self._sum += amount * n

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.name, self.documentation, "histogram")]

    def collect(self) -> Iterable[Metric]:
        counts, total = list(self._counts), self._sum
        metric = Metric(self.name, self.documentation, "histogram")
        acc = 0.0
        for le, c in zip(self._le, counts):
            acc += c
            metric.add_sample(self.name + "_bucket", {"le": le}, acc)
        metric.add_sample(self.name + "_count", {}, acc)
        if self._bounds[0] >= 0:
            metric.add_sample(self.name + "_sum", {}, total)
        if getattr(prometheus_client.metrics, "_use_created", True):
            metric.add_sample(self.name + "_created", {}, self._created)
        return [metric]


class _PerOst(Collector):
    """Scrape-time view of per-OST tallies and the policy's predicted load."""

    def __init__(self, stripes: dict[str, Tally],
                 predicted: Callable[[], Mapping[tuple[str, int], float] | None]):
        self.stripes = stripes
        self.predicted = predicted

    def collect(self) -> Iterable:
        c = CounterMetricFamily(PREFIX + "ost_stripes", "Stripes handed out per OST",
                                labels=["target", "fsname"])
        tallies = sorted((fs, dict(t)) for fs, t in list(self.stripes.items()))
        for fs, tally in tallies:
            for ost, n in sorted(tally.items()):
                c.add_metric([target_name(fs, ost), fs], n)
        yield c
        g = GaugeMetricFamily(PREFIX + "ost_predicted_load_bytes",
                              "Predicted load per OST from the primary policy, bytes "
                              "(MCMF: pending bytes)", labels=["target", "fsname"])
        loads = self.predicted() or {}
        for (fs, ost), v in sorted(loads.items()):
            g.add_metric([target_name(fs, ost), fs], float(v))
        yield g


class _Limits(Collector):
    """Scrape-time counters of the client bounds (lustre_alloc.mapper.service.limits)."""

    def __init__(self, counts: Callable[[], Mapping[str, float]]):
        self.counts = counts

    def collect(self) -> Iterable:
        c = self.counts()
        limited = CounterMetricFamily(PREFIX + "peer_limited",
                                      "Requests bounded per client: rate (EBUSY) or new_apps "
                                      "(learned under the client's overflow id)", labels=["limit"])
        for name in ("rate", "new_apps"):
            limited.add_metric([name], c.get(name, 0))
        yield limited
        yield CounterMetricFamily(PREFIX + "expected_bytes_clipped",
                                  "Requests whose expected_bytes exceeded the pool's free space",
                                  value=c.get("expected_bytes_clipped", 0))
        yield CounterMetricFamily(PREFIX + "state_saves_skipped",
                                  "Periodic saves skipped while the previous one was writing",
                                  value=c.get("saves_skipped", 0))


class MapperMetrics:
    """All the service's metrics. ``predicted`` returns the policies' load per
    (fsname, OST index), bytes, or None. :attr:`stripes` tallies OST indices per fsname
    (:meth:`count_stripes`)."""

    def __init__(self, predicted: Callable[[], Mapping[tuple[str, int], float] | None]
                 = lambda: None):
        self.registry = service_registry("mapper")
        r = self.registry
        self.requests = Counter(PREFIX + "requests", "Replies by result", ["result"], registry=r)
        self._by_result = {k: self.requests.labels(k) for k in RESULTS}
        self.request_seconds = BatchedHistogram(PREFIX + "request_seconds",
                                                "Request receive to reply, seconds",
                                                buckets=LATENCY_BUCKETS_S, registry=r)
        self.rounds = Counter(PREFIX + "rounds", "Allocation rounds", registry=r)
        self.reloads = Counter(PREFIX + "reloads", "SIGHUP configuration reloads", ["result"],
                               registry=r)
        self.round_seconds = BatchedHistogram(PREFIX + "round_seconds",
                                              "Round duration, seconds",
                                              buckets=LATENCY_BUCKETS_S, registry=r)
        self.round_requests = BatchedHistogram(PREFIX + "round_requests", "Requests per round",
                                               buckets=ROUND_SIZE_BUCKETS, registry=r)
        self.fallbacks = Counter(PREFIX + "fallbacks", "Layouts decided by the fallback, per "
                                 "create or leased, by reason", ["reason"], registry=r)
        self.layouts = Counter(PREFIX + "layouts", "Layouts that left the mapper, per create "
                               "or leased: ok (the primary decided) or fallback", ["result"],
                               registry=r)
        for result in ("ok", "fallback"):
            self.layouts.labels(result)
        self.check_violations = Counter(PREFIX + "check_violations",
                                        "Replies rejected by the last-line placement check",
                                        registry=r)
        self.stale_servers = Gauge(PREFIX + "stale_servers", "OSSes with too old samples, per "
                                   "file system", ["fsname"], registry=r)
        self.mds_cpu = Gauge(PREFIX + "mds_cpu_ratio", "MDS CPU seen by the gate, 0..1, per "
                             "file system", ["fsname"], registry=r)
        self.osts = Gauge(PREFIX + "osts", "OSTs known (all) and usable, per file system",
                          ["fsname", "state"], registry=r)
        self.samples = Counter(PREFIX + "samples", "Collector samples applied", registry=r)
        self.samples_rejected = Counter(PREFIX + "samples_rejected",
                                        "Samples refused (undecodable, not schema 1)", registry=r)
        self.saves = Counter(PREFIX + "state_saves", "Learned-state saves", ["result"],
                             registry=r)
        self.shadow_reports = Counter(PREFIX + "shadow_reports", "Shadow reports of "
                                      "Lustre's layout, by result", ["result"], registry=r)
        for result in ("ok", "unknown", "duplicate"):
            self.shadow_reports.labels(result)
        self.scope_changes = Counter(PREFIX + "scope_changes", "Reloads that changed the "
                                     "[scope] in force", registry=r)
        self.leases = Counter(PREFIX + "leases", "Layout leases (protocol v2) by event: "
                              "granted, refused, quota, per_create, lustre (left to Lustre's "
                              "allocator), released, expired, revoked",
                              ["result"], registry=r)
        self.leased_layouts = Counter(PREFIX + "leased_layouts", "Leased layouts by fate: "
                                      "granted, used, released (returned unused), expired",
                                      ["result"], registry=r)
        for result in ("granted", "refused", "quota", "per_create", "lustre", "released",
                       "expired", "revoked"):
            self.leases.labels(result)
        for result in ("granted", "used", "released", "expired"):
            self.leased_layouts.labels(result)
        self.file_sizes = Counter(PREFIX + "file_sizes", "File sizes at close the clients "
                                  "reported (protocol v2 sizes), by result: learned, or "
                                  "ignored (the policy learns none)", ["result"], registry=r)
        for result in ("learned", "ignored"):
            self.file_sizes.labels(result)
        self.records_skipped = Counter(PREFIX + "state_records_skipped",
                                       "Malformed learned-state records skipped at load",
                                       registry=r)
        # every label value known in advance is exported at 0 from the start, so rate() and
        # alerts work before the first event
        from lustre_alloc.mapper.policies.gate import FALLBACK_REASONS
        for reason in FALLBACK_REASONS:
            self.fallbacks.labels(reason)
        for result in ("ok", "error"):
            self.saves.labels(result)
        self.stripes: dict[str, Tally] = {}
        r.register(_PerOst(self.stripes, predicted))

    def register_limits(self, counts: Callable[[], Mapping[str, float]]) -> None:
        """Export the client bounds' counters (called once by the service)."""
        self.registry.register(_Limits(counts))

    def count_stripes(self, fsname: str, layouts: Iterable[Sequence[int]]) -> None:
        """Count the stripes of ``layouts`` (each a list of ``fsname``'s OST indices) that
        files were created with: one per OST of each layout."""
        tally = self.stripes.get(fsname)
        if tally is None:
            tally = self.stripes[fsname] = Tally()
        for osts in layouts:
            tally.update(osts)

    def result(self, name: str, n: int = 1) -> None:
        """Count ``n`` replies with result ``name`` (one of :data:`RESULTS`)."""
        self._by_result[name].inc(n)

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        """Expose ``/metrics`` over HTTP in a daemon thread; returns the bound port."""
        return serve_metrics(self.registry, port, addr)


class ServiceGauges:
    """Reads the contexts into the metrics.

    Args:
        contexts: file system key -> context.
        metrics: the service's metrics.
        limits: the per-client bounds.
        saves_skipped: how many periodic saves were skipped so far (the background
            saver's count).
    """

    def __init__(self, contexts: dict[str, FsContext], metrics: MapperMetrics,
                 limits: PeerLimits, saves_skipped: Callable[[], int]):
        self.contexts = contexts
        self.metrics = metrics
        self.limits = limits
        self.saves_skipped = saves_skipped
        metrics.register_limits(self.limit_counts)

    def refresh(self) -> None:
        """Per file system: MDS CPU, OSTs known and usable, stale OSSes."""
        m = self.metrics
        for ctx in self.contexts.values():
            store = ctx.store
            snap = store.current()
            fsname = store.fsname
            m.mds_cpu.labels(fsname).set(snap.mds_cpu_percent / 100.0)
            m.osts.labels(fsname, "all").set(len(snap.osts))
            m.osts.labels(fsname, "usable").set(sum(1 for o in snap.osts if is_usable(o)))
            stale = [] if store.static else store.stale_servers(snap, store.max_age_s())
            m.stale_servers.labels(fsname).set(len(stale))

    def limit_counts(self) -> dict[str, float]:
        """Scrape time: the client bounds' counters (lustre_alloc.mapper.service.limits)."""
        return {"rate": self.limits.rate_limited, "new_apps": self.limits.overflowed,
                "expected_bytes_clipped": sum(c.clip.clipped for c in self.contexts.values()),
                "saves_skipped": self.saves_skipped()}


def predicted_load(contexts: dict[str, FsContext]) -> dict[tuple[str, int], float] | None:
    """The primaries' per-OST load estimate for the metrics, keyed (fsname, index)."""
    out: dict[tuple[str, int], float] = {}
    for ctx in contexts.values():
        try:
            loads = ctx.predicted_load()
        except Exception:  # noqa: BLE001 - metrics must not break on a policy bug
            continue
        out.update(((ctx.fsname, i), float(v)) for i, v in loads.items())
    return out or None
