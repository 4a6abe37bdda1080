"""The service's gauges, per file system (label ``fsname``), refreshed by the loop about
once a second, and the scrape-time views of what the policies and the client bounds hold."""
from __future__ import annotations

from mapper.service.fs_context import FsContext
from mapper.service.limits import PeerLimits
from mapper.service.metrics import MapperMetrics
from mapper.service.persist import BackgroundSaver
from mapper.state.ost_health import is_usable


class ServiceGauges:
    """Reads the contexts into the metrics.

    Args:
        contexts: file system key -> context.
        metrics: the service's metrics.
        limits: the per-client bounds.
        saver: the background saver (its skipped saves).
    """

    def __init__(self, contexts: dict[str, FsContext], metrics: MapperMetrics,
                 limits: PeerLimits, saver: BackgroundSaver):
        self.contexts = contexts
        self.metrics = metrics
        self.limits = limits
        self.saver = saver
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
        """Scrape time: the client bounds' counters (mapper.service.limits)."""
        return {"rate": self.limits.rate_limited, "new_apps": self.limits.overflowed,
                "expected_bytes_clipped": sum(c.clip.clipped for c in self.contexts.values()),
                "saves_skipped": self.saver.skipped}


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
