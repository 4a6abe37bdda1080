"""Prometheus conventions shared by the mapper, the broker and the collector.

Every service exports, in a registry of its own:

* ``process_*`` (CPU seconds, resident memory bytes, open fds, start time) from
  prometheus-client's :class:`ProcessCollector`, and ``python_info``;
* ``lustre_alloc_build_info{service, version, python}`` = 1 (the usual ``*_build_info`` gauge);
* its own metrics, named ``lustre_alloc_<service>_...`` in base units (``_bytes``,
  ``_seconds``, ``_ratio`` for 0..1, ``_total`` for counters) with lustre_exporter's labels:
  ``target="scratch-OST0004"`` (the Lustre target name) and ``fsname="scratch"``.

:func:`serve` exposes ``/metrics`` over HTTP in a daemon thread.
"""
from __future__ import annotations

import platform
from typing import Iterable

from prometheus_client import (CollectorRegistry, Gauge, PlatformCollector, ProcessCollector,
                               start_http_server)

from lustre_alloc.common.version import __version__


MAPPER_PREFIX = "lustre_alloc_mapper_"
"""Prefix of every metric the mapper exports (its service and its planner)."""

def service_registry(service: str) -> CollectorRegistry:
    """A registry with the process, platform and build_info metrics of ``service``."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    info = Gauge("lustre_alloc_build_info", "Build of this lustre-alloc service (always 1)",
                 ["service", "version", "python"], registry=registry)
    info.labels(service, __version__, platform.python_version()).set(1)
    return registry


def serve(registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> int:
    """Expose ``/metrics`` in a daemon thread; returns the bound port (``port`` 0: any free
    one).

    Raises:
        OSError: the address is in use.
    """
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server.server_port


def names(text: str) -> Iterable[str]:
    """Metric family names in an exposition text (tests, docs checks)."""
    from prometheus_client.parser import text_string_to_metric_families
    return [f.name for f in text_string_to_metric_families(text)]
