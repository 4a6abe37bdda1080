"""The admin socket's ``migration_view`` op: what the migration service needs from the mapper.

The migration service (:mod:`lustre_alloc.rebalance.service`) asks every loop, and hands over its
own status in the same request (``report``), which ``lustre-alloc-ctl status`` then shows
beside the mapper's (``migration``, with its age). Request::

    {"op": "migration_view", "fsname": "scratch", "report": {...}}

Reply (``ok: true``), one file system::

    {"fsname": "scratch", "time_s": <mapper clock>,
     "osts": [{"ost": 3, "oss": "oss1", "kbytes_total": .., "kbytes_used": ..,
               "available": true, "degraded": false, "receives": true,
               "speed_ratio": 0.21, "jobs_bytes_s": 1.2e8,
               "steered": {"kind": "degraded", "since_s": .., "slow_since_s": ..,
                           "reason": ".."} | null}, ...]}

``speed_ratio``: the placement's speed estimate over the median, else the steering's
(1.0 when neither has one); ``receives``: the mapper's own usability rule (:func:`lustre_alloc.mapper.state.ost_health.unusable_reason`)
and no steering; ``jobs_bytes_s``: the OST's write bytes/s in its last sample (obdfilter
``stats``, the only job-load field the store keeps).
"""
from __future__ import annotations

import time
from typing import Any, Mapping

from lustre_alloc.mapper.policies.placement import LearnsOstSpeeds
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstFlag
from lustre_alloc.mapper.state.ost_health import unusable_reason


class MigrationReports:
    """The migration service's last report, kept for ``status``."""

    def __init__(self) -> None:
        self.report: dict[str, Any] | None = None
        self.time_s = 0.0

    def keep(self, report: Any) -> None:
        if isinstance(report, dict):
            self.report, self.time_s = report, time.time()

    def status(self) -> dict[str, Any] | None:
        if self.report is None:
            return None
        return {**self.report, "age_s": round(time.time() - self.time_s, 1)}


def migration_view(svc: Any, req: dict[str, Any]) -> dict[str, Any]:
    """Answer ``migration_view`` (call under the service lock).

    Raises:
        ValueError: ``fsname`` names no served file system, or several are served and it
            is missing (the admin socket answers one line and serves on).
    """
    fsname = req.get("fsname")
    contexts = list(svc.contexts.values())
    if fsname is not None:
        contexts = [c for c in contexts if c.fsname == fsname]
    if len(contexts) != 1:
        raise ValueError(f"fsname: {fsname!r} is not one served file system "
                         f"(served: {', '.join(sorted(c.fsname or '?' for c in svc.contexts.values()))})")
    ctx = contexts[0]
    svc.migration_reports.keep(req.get("report"))
    snap = ctx.store.current()
    primary = ctx.gate.primary
    ratios = primary.ost_speed_ratios() if isinstance(primary, LearnsOstSpeeds) else {}
    if not ratios and svc.steering is not None:        # Lustre's allocator under steering
        ratios = svc.steering.speed_ratios(ctx.fsname)
    steering = svc.steering.status() if svc.steering is not None else {}
    steered = {a["ost"]: a for a in steering.get(ctx.fsname, steering.get(ctx.key, []))}
    return {"fsname": ctx.fsname, "time_s": snap.time_s,
            "osts": ost_entries(snap, ratios, steered)}


def ost_entries(snap: ClusterSnapshot, speed_ratios: Mapping[int, float],
                steered: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The reply's ``osts`` (module doc) from a snapshot, the placement's speed ratios and
    the steering actions in force by OST (:meth:`lustre_alloc.mapper.steer.controller.SteerAction.as_dict`);
    the simulator builds its migration view with it too."""
    osts = []
    for o in snap.osts:
        s = steered.get(o.index)
        osts.append({
            "ost": o.index, "oss": o.oss, "kbytes_total": o.kbytes_total,
            "kbytes_used": max(0, o.kbytes_total - o.kbytes_free),
            "available": bool(o.active), "degraded": bool(o.flags & OstFlag.DEGRADED),
            "receives": unusable_reason(o) is None and s is None,
            "speed_ratio": float(speed_ratios.get(o.index, 1.0)),
            "jobs_bytes_s": float(o.write_bytes_per_s or 0.0),
            "steered": None if s is None else {k: s.get(k, s["since_s"]) for k in (
                "kind", "since_s", "slow_since_s", "reason")}})
    return osts
