"""The mapper's admin socket: what ``lustre-alloc-ctl`` asks a running mapper.

A ZeroMQ REP socket on ``control_endpoint`` (an ``ipc://`` path in the unit's runtime
directory, mode 0750: the service's user and group, and root, may connect), served by a
thread of its own. One msgpack map per request, one per reply:

=================  ==========================================  =================================
``op``             request keys                                reply (besides ``ok: true``)
=================  ==========================================  =================================
``status``         --                                          ``filesystems``: per file system
                                                               its mode, policies, OSTs usable
                                                               and excluded (and why), degraded,
                                                               stragglers, OSTs believed slow
                                                               (``slow_estimates``), plan queue
                                                               depths,
                                                               sample age, fallbacks, shadow
                                                               agreement (last hour), steering;
                                                               ``requests``: replies by result
``explain``        ``jobid`` or ``path``, ``fsname`` (opt.)    ``decision``: the last decision,
                                                               priced (:mod:`lustre_alloc.mapper.explain`)
``shadow_report``  ``window_s`` (3600), ``fsname`` (opt.)      ``report``
                                                               (:mod:`lustre_alloc.mapper.shadow.report`)
``reload``         --                                          ``result``: ``applied`` (with
                                                               ``changed`` and
                                                               ``needs_restart``: keys a
                                                               restart applies) or
                                                               ``rejected`` with ``error``
``forget_speed``   ``osts`` (OST indices), ``fsname`` (opt.)   ``forgotten``: per file system
                                                               the OSTs whose learned speed was
                                                               dropped (unmeasured until their
                                                               next RPC-timed look)
``migration_view`` ``fsname``, ``report`` (the migration       per OST: fill, usability,
                   service's status)                           steering, speed, jobs' load
                                                               (:mod:`lustre_alloc.mapper.service.migration_view`)
=================  ==========================================  =================================

An error is ``{ok: false, error: "<one line>"}``; the socket serves on. Everything is read
under the service lock, so a status never shows half a round.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable

import msgpack
import zmq

from lustre_alloc.mapper.policies.placement import LearnsOstSpeeds, PlansAhead
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.metrics import RESULTS
from lustre_alloc.mapper.service.migration_view import migration_view
from lustre_alloc.mapper.state.ost_health import unusable_reason
from lustre_alloc.mapper.state.cluster_state import OstFlag

log = logging.getLogger("lustre_alloc.mapper.service.admin_socket")

MAX_REQUEST_BYTES = 65_536
SHADOW_STATUS_WINDOW_S = 3600.0
"""Window of the shadow agreement shown by ``status``, s."""
SLOW_ESTIMATE_RATIO = 0.5
"""``status`` lists an OST as believed slow when its speed estimate is below this fraction
of the median: the default ``slowest_ratio`` 2.0 (docs/history.md, "A slow OST by
estimate and look")."""
RELOAD_WAIT_S = 10.0
"""How long a ``reload`` request waits for the service loop to apply it, s."""


class ControlError(Exception):
    """A control request that cannot be answered (one line)."""


class ControlServer:
    """The admin socket of one service (module docstring).

    Args:
        service: the running :class:`lustre_alloc.mapper.service.server.MapperService`.
        endpoint: where to bind.
        context: the service's ZeroMQ context.
    """

    def __init__(self, service: Any, endpoint: str, context: zmq.Context):
        self.service = service
        self.endpoint = endpoint
        self.context = context
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "status": self.status, "explain": self.explain,
            "shadow_report": self.shadow_report, "reload": self.reload,
            "forget_speed": self.forget_speed, "migration_view": self.migration_view}

    def start(self) -> "ControlServer":
        """Bind and serve in a daemon thread.

        Raises:
            zmq.ZMQError: the endpoint cannot be bound (the service reports it).
        """
        self._thread = threading.Thread(target=self._run, name="lustre-alloc-control",
                                        daemon=True)
        self._thread.start()
        self._ready.wait(10.0)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def _run(self) -> None:
        sock = self.context.socket(zmq.REP)
        sock.linger = 0
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
        try:
            sock.bind(self.endpoint)
        except zmq.ZMQError as exc:
            self._error = exc
            self._ready.set()
            sock.close(0)
            return
        self._ready.set()
        try:
            while not self._stop.is_set():
                if not sock.poll(100):
                    continue
                reply = self.answer(sock.recv())
                sock.send(msgpack.packb(reply, use_bin_type=True))
        finally:
            sock.close(0)

    def answer(self, frame: bytes) -> dict[str, Any]:
        """The reply to one request frame (never raises)."""
        try:
            req = msgpack.unpackb(frame, raw=False)
            if not isinstance(req, dict) or req.get("op") not in self.handlers:
                raise ControlError(f"op must be one of {', '.join(self.handlers)}")
            out = self.handlers[req["op"]](req)
            return {"ok": True, **out}
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}
        except (msgpack.UnpackException, ValueError, TypeError) as exc:
            return {"ok": False, "error": f"request is not a msgpack map: {type(exc).__name__}"}
        except Exception as exc:  # noqa: BLE001 - the admin socket serves on
            log.exception("control request failed", extra={"event": "control_error"})
            return {"ok": False, "error": f"internal error: {exc}"}

    # ------------------------------------------------------------------ ops
    def status(self, req: dict[str, Any]) -> dict[str, Any]:
        svc = self.service
        with svc.lock:
            filesystems = [self._fs_status(ctx) for ctx in svc.contexts.values()]
            steering = svc.steering.status() if svc.steering is not None else None
            book = svc.leases.book
            leases = {"held": len(book), "layouts": book.layouts_held(),
                      "clients": book.clients()}
        m = svc.metrics
        requests = {r: int(m.registry.get_sample_value("lustre_alloc_mapper_requests_total",
                                                       {"result": r}) or 0) for r in RESULTS}
        layouts = {r: int(m.registry.get_sample_value("lustre_alloc_mapper_layouts_total",
                                                      {"result": r}) or 0)
                   for r in ("ok", "fallback")}
        placed = layouts["ok"] + layouts["fallback"]
        return {"filesystems": filesystems, "requests": requests,
                "fallback_share": layouts["fallback"] / placed if placed else None,
                "scope": svc.intake.scope.describe(), "policy": svc.config.policy,
                "steering": steering, "leases": leases, "endpoint": svc.endpoint,
                "migration": svc.migration_reports.status(),
                "pid": os.getpid(),
                "check_violations": svc.path.check_violations,
                "reloads": {"applied": svc.reloader.applied if svc.reloader else 0,
                            "rejected": svc.reloader.rejected if svc.reloader else 0}}

    def _fs_status(self, ctx: FsContext) -> dict[str, Any]:
        svc = self.service
        snap = ctx.store.current()
        excluded, degraded = [], []
        for o in snap.osts:
            why = unusable_reason(o)
            if why is not None:
                excluded.append({"ost": o.index, "reason": why})
            elif o.flags & OstFlag.DEGRADED:
                degraded.append(o.index)
        primary = ctx.gate.primary
        plans = primary.plans if isinstance(primary, PlansAhead) else None
        depths = ({"/".join(map(str, key)): len(q) for key, q in plans.queues.items() if q}
                  if plans is not None else {})
        times = [o.sample_time_s for o in snap.osts if o.sample_time_s is not None]
        age = (time.time() - max(times)) if times else None
        shadow = svc.desk.shadow_report(SHADOW_STATUS_WINDOW_S, ctx.fsname or None)
        return {
            "fsname": ctx.fsname, "mode": svc.intake.scope.mode(ctx.fsname),
            "policy": primary.name, "fallback": ctx.gate.fallback.name,
            "osts": len(snap.osts), "usable": len(snap.osts) - len(excluded),
            "excluded": excluded, "degraded": degraded,
            "stragglers": primary.straggler_osts() if isinstance(primary, LearnsOstSpeeds) else [],
            "slow_estimates": [{"ost": i, "ratio": r} for i, r in primary.ost_speed_ratios().items()
                               if r < SLOW_ESTIMATE_RATIO]
            if isinstance(primary, LearnsOstSpeeds) else [],
            "failed_over": [{"ost": o.index, "oss": o.oss} for o in snap.osts if o.failed_over],
            "stale_servers": ctx.store.stale_servers(snap, ctx.store.max_age_s())
            if not ctx.store.static else [],
            "newest_sample_age_s": age,
            "plan_queue_depths": depths,
            "fallbacks": {k: v for k, v in ctx.gate.fallbacks.items() if v},
            "shadow": {k: shadow[k] for k in ("decisions", "reported", "same_osts",
                                              "shared_stripes", "mapper_expected_sooner",
                                              "expected_same", "mapper_expected_later")},
        }

    def migration_view(self, req: dict[str, Any]) -> dict[str, Any]:
        with self.service.lock:
            try:
                return migration_view(self.service, req)
            except ValueError as exc:
                raise ControlError(str(exc)) from None

    def explain(self, req: dict[str, Any]) -> dict[str, Any]:
        jobid, path, fsname = req.get("jobid"), req.get("path"), req.get("fsname")
        if not jobid and not path:
            raise ControlError("explain needs a jobid or a path")
        with self.service.lock:
            found = self.service.desk.explain(jobid=jobid, path=path, fsname=fsname)
        if found is None:
            what = f"path {path!r}" if path else f"jobid {jobid!r}"
            raise ControlError(f"no decision remembered for {what} (the last "
                               f"{self.service.desk.index.max_records} are kept)")
        return {"decision": found}

    def shadow_report(self, req: dict[str, Any]) -> dict[str, Any]:
        window = req.get("window_s", SHADOW_STATUS_WINDOW_S)
        if not isinstance(window, (int, float)) or isinstance(window, bool) or window <= 0:
            raise ControlError("window_s must be a positive number of seconds")
        with self.service.lock:
            return {"report": self.service.desk.shadow_report(float(window),
                                                                     req.get("fsname"))}

    def forget_speed(self, req: dict[str, Any]) -> dict[str, Any]:
        """Drop the learned speed of ``osts`` in every file system served (or ``fsname``'s):
        after a slow drive was replaced, the OSTs rejoin at once instead of when other
        traffic shows them fast. Logged (``event=ost_speed_forgotten``); the next save
        keeps it."""
        osts, fsname = req.get("osts"), req.get("fsname")
        if (not isinstance(osts, list) or not osts
                or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in osts)):
            raise ControlError("forget_speed needs osts: a list of OST indices (integers >= 0)")
        svc = self.service
        forgotten: dict[str, list[int]] = {}
        with svc.lock:
            for ctx in svc.contexts.values():
                if fsname and ctx.fsname != fsname:
                    continue
                primary = ctx.gate.primary
                if isinstance(primary, LearnsOstSpeeds):
                    forgotten[ctx.fsname] = primary.forget_ost_speeds(osts)
        if fsname and fsname not in forgotten:
            raise ControlError(f"no file system {fsname!r} whose policy learns OST speeds")
        log.info("OST speeds forgotten", extra={"event": "ost_speed_forgotten",
                                                "osts": osts, "forgotten": forgotten})
        return {"forgotten": forgotten}

    def reload(self, req: dict[str, Any]) -> dict[str, Any]:
        reloader = self.service.reloader
        if reloader is None:
            raise ControlError("this mapper was not started by lustre-alloc-mapper: no reload")
        before = (reloader.applied, reloader.rejected)
        reloader.request()
        deadline = time.monotonic() + RELOAD_WAIT_S
        while (reloader.applied, reloader.rejected) == before:
            if time.monotonic() > deadline:
                raise ControlError("the service loop did not apply the reload in time")
            time.sleep(0.02)
        if reloader.rejected != before[1]:
            return {"result": "rejected", "error": reloader.last_error}
        return {"result": "applied", "changed": reloader.last_changed,
                "needs_restart": reloader.last_needs_restart}

