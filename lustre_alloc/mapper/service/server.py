"""The global mapper's request loop (Paul et al. 2017, Section III, Fig. 4: the request
handler G on the MDS).

One thread owns every socket and the cluster state, so a round never sees a half-applied
sample and no lock is taken on the hot path:

0. before the ROUTER socket is bound, build what a first decision needs (policies'
   tables, round-robin arrays, prices), so the first create is not a slow one;
1. wait on the ROUTER socket (``docs/protocol.md``, allocation protocol v1);
2. drain everything already queued (up to ``max_batch``; optionally wait
   ``batch_window_s`` for more); :mod:`lustre_alloc.mapper.service.intake` decodes and validates each
   request, names its client, routes it to its file system (:mod:`lustre_alloc.mapper.service.fs_context`)
   and applies the client bounds; bad ones are answered at once with an error, pings with
   a pong;
3. solve the valid ones together in one round through :class:`~lustre_alloc.mapper.policies.gate.GatedPolicy`
   (the primary's ``allocate_batch`` when MDS CPU, staleness and the round budget allow,
   else the fallback's);
4. check every answer (duplicate, unknown, unusable or out-of-pool OSTs; the rules of
   :func:`lustre_alloc.mapper.state.ost_health.check_placement`); an answer that fails is replaced by the
   fallback's (reason ``check``) and counted; then reply;
5. between rounds: apply the collectors' samples, refresh the per-file-system gauges, save
   the primaries' learned state every ``save_interval_s`` (:mod:`lustre_alloc.mapper.service.persist`).

A SIGTERM (``stop()``) ends the loop after the current round; the learned state is saved
on the way out.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any

import msgpack
import zmq

from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.config import PEER_BURST_S, MapperConfig
from lustre_alloc.mapper.service.migration_view import MigrationReports
from lustre_alloc.mapper.service.fs_context import (FsContext, FsContextError, PlacementGuard, gated_policy,
                                       state_file_for, state_store)
from lustre_alloc.mapper.service.intake import Intake
from lustre_alloc.mapper.service.decision_path import DecisionPath
from lustre_alloc.mapper.service.decision_record import DecisionDesk
from lustre_alloc.mapper.service.leases import LeaseDesk
from lustre_alloc.mapper.service.allocs import Rounds
from lustre_alloc.mapper.service.limits import PeerLimits
from lustre_alloc.mapper.service.metrics import MapperMetrics, ServiceGauges, predicted_load
from lustre_alloc.mapper.service.persist import LearnedStates
from lustre_alloc.mapper.service.sizes import SizeDesk
from lustre_alloc.mapper.service.sockets import ServiceSockets, SocketError
from lustre_alloc.mapper.service.background_planner import BackgroundPlanner
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.mapper.policies.gate import GatedPolicy

log = logging.getLogger("lustre_alloc.mapper.service.server")

POLL_MS = 50
"""Longest idle wait, ms: how soon a stop request or a sample is noticed."""
SAMPLE_DRAIN_S = 0.02
"""Samples are applied at most this often while requests keep the loop busy, s."""
GAUGE_REFRESH_S = 1.0
MAX_SAMPLES_PER_DRAIN = 2000
PLANNER_START_WAIT_S = 30.0
"""Longest wait for a planner's process before the request socket opens, s (its start
imports numpy and OR-Tools: about 1 s on this project's 2-core test host)."""
_NOBLOCK = int(zmq.NOBLOCK)
_NOBLOCK_SNDMORE = int(zmq.NOBLOCK | zmq.SNDMORE)
"""pyzmq flags as plain ints: the enum arithmetic costs more than the call on the hot path."""


class ServiceError(Exception):
    """The service cannot start (bad policy, endpoint in use, broker unreachable...)."""


class MapperService:
    """The mapper: request socket, one :class:`~lustre_alloc.mapper.service.fs_context.FsContext` per
    file system served, metrics, persistence.

    Args:
        config: validated configuration.
        store: cluster state of a mapper serving one file system (default: from
            ``config``, one per ``fsnames`` entry; tests pass their own).
        policy: the gated policy for ``store`` (default: from ``config``).
        context: ZeroMQ context (a new one by default).

    Use :meth:`run` in the main thread (the CLI), or :meth:`start` / :meth:`stop` to run
    it in a background thread (tests, benchmarks). :attr:`endpoint` is the bound address.

    Raises:
        ServiceError: a policy cannot be built from ``config``.
    """

    def __init__(self, config: MapperConfig, *, store: StateStore | None = None,
                 policy: GatedPolicy | None = None, context: zmq.Context | None = None):
        self.config = config
        stores = ({store.fsname: store} if store is not None
                  else {fs: state_store(config, fs) for fs in (config.fsnames or [""])})
        several = len(stores) > 1
        try:
            self.contexts: dict[str, FsContext] = {
                fs: FsContext(fs, st, policy if policy is not None else gated_policy(config, st),
                              state_file_for(config.state_file, fs, several))
                for fs, st in stores.items()}
        except FsContextError as exc:
            raise ServiceError(str(exc)) from exc
        self._own_context = context is None
        self.context = context or zmq.Context()
        self.metrics = MapperMetrics(predicted=lambda: predicted_load(self.contexts))
        self.limits = PeerLimits(config.peer_requests_per_s,
                                 int(config.peer_requests_per_s * PEER_BURST_S),
                                 config.peer_new_apps_per_min, config.peer_max_apps)
        self.intake = Intake(config, self.limits, self.contexts)
        self.learned = LearnedStates(self.contexts, self.metrics)
        self.gauges = ServiceGauges(self.contexts, self.metrics, self.limits,
                                    lambda: self.learned.saver.skipped)
        self.sockets = ServiceSockets(config, self.context)
        self._state_loaded = False
        self.metrics_port = 0
        self.endpoint = ""
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.lock = threading.Lock()
        """Held by the loop while it applies samples or runs a round, and by the planner
        threads while they read the state or queue lists (never during a flow solve)."""
        self.desk = DecisionDesk(config.decision_log_per_s, self.contexts)
        """The decision log (its rate is reloadable), the explain index, the shadow ledger."""
        self.path = DecisionPath(self.intake.bounded, self.lock, self.metrics, self.desk)
        """The one decision path of every create (per create and leased)."""
        self.rounds = Rounds(self.path, self.intake.mode, self.metrics)
        self.leases = LeaseDesk(config, self.path, self.intake.mode, self.contexts,
                                self.lock, self.metrics)
        """Layout leases (protocol v2)."""
        self.sizes = SizeDesk(self.limits, self.lock, self.metrics)
        """File sizes at close (protocol v2)."""
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._router: zmq.Socket | None = None
        self._subscriber: Any = None
        self._rejected_counted = 0
        self.steering: Any = None
        self.migration_reports = MigrationReports()
        """The migration service's last status (``migration_view`` requests)."""
        """The steering loop (:class:`lustre_alloc.mapper.steer.service.SteerLoop`) when ``[steer]`` is on."""
        self._steer_metrics: Any = None
        self.control: Any = None
        """The admin socket (:class:`lustre_alloc.mapper.service.admin_socket.ControlServer`) when on."""
        self.reloader: Any = None
        """The SIGHUP reload (:class:`lustre_alloc.mapper.service.reload.Reloader`), set by the command."""

    # ------------------------------------------------------------------ one file system
    def only(self) -> FsContext:
        """The context of a mapper serving one file system.

        Raises:
            ServiceError: the mapper serves several (name one: :attr:`contexts`).
        """
        if len(self.contexts) != 1:
            raise ServiceError(f"this mapper serves {len(self.contexts)} file systems: "
                               f"use contexts[{', '.join(map(repr, self.contexts))}]")
        return next(iter(self.contexts.values()))

    @property
    def store(self) -> StateStore:
        """The state store of a mapper serving one file system (:meth:`only`)."""
        return self.only().store

    @property
    def policy(self) -> GatedPolicy:
        """The gated policy of a mapper serving one file system (:meth:`only`)."""
        return self.only().gate

    @property
    def background_planner(self) -> BackgroundPlanner | None:
        """The background planner of a mapper serving one file system (:meth:`only`)."""
        return self.only().background_planner

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 10.0) -> "MapperService":
        """Run :meth:`run` in a daemon thread; return once serving.

        Raises:
            ServiceError: the service could not start (the cause is chained).
        """
        self._thread = threading.Thread(target=self._run_captured, name="lustre-alloc-mapper",
                                        daemon=True)
        self._thread.start()
        if not self.ready.wait(timeout_s):
            raise ServiceError("mapper thread did not start in time")
        if self._error is not None:
            raise ServiceError(str(self._error)) from self._error
        return self

    def _run_captured(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self.ready.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the loop to end (state is saved) and wait for the thread, if any."""
        self.stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def __enter__(self) -> "MapperService":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def run(self) -> None:
        """Open everything, serve until :attr:`stop_event` is set, then save and close."""
        try:
            self._open()
            self.ready.set()
            self._loop()
        finally:
            self._close()

    # ------------------------------------------------------------------ setup
    def _open(self) -> None:
        cfg = self.config
        for keys in (cfg.curve(), cfg.serve_curve()):   # fail before opening anything
            if keys is not None:
                keys.check()        # ConfigError: a configuration error (exit 2), not a crash
        if cfg.serve_curve() is None:
            log.warning("serving without CURVE: any host that reaches the request socket can "
                        "steer allocations", extra={"event": "insecure", "bind": cfg.bind})
        self.learned.load()
        self._state_loaded = True   # from here on, saving on the way out keeps what was learned
        if any(not ctx.store.static for ctx in self.contexts.values()):
            self._subscriber = self.sockets.open_feed()
            self._drain_samples()
        if cfg.metrics_port:
            try:
                self.metrics_port = self.metrics.serve(cfg.metrics_port, cfg.metrics_addr)
            except OSError as exc:
                raise ServiceError(f"cannot serve /metrics on {cfg.metrics_addr}:"
                                   f"{cfg.metrics_port}: {exc}") from exc
        registry = self.metrics.registry
        for ctx in self.contexts.values():
            # one planner per file system; the plan metrics are the first one's
            ctx.start_planner(cfg, self.lock, registry)
            if ctx.background_planner is not None:
                registry = None
        self._start_steering()
        self._start_control()
        # the request socket last: a create that arrives at once finds everything built
        self._prepare()
        try:
            self._router = self.sockets.bind()
        except SocketError as exc:
            raise ServiceError(str(exc)) from exc
        self.endpoint = self._router.getsockopt(zmq.LAST_ENDPOINT).decode()
        log.info("mapper started", extra={
            "event": "mapper_start", "endpoint": self.endpoint, "control": self.config.control_address(), "pid": os.getpid(),
            "filesystems": {ctx.fsname or key: {
                "policy": ctx.gate.primary.name, "fallback": ctx.gate.fallback.name,
                "static": ctx.store.static, "osts": ctx.store.ost_count}
                for key, ctx in self.contexts.items()},
            "broker": self.sockets.broker_endpoints, "config": dataclasses.asdict(cfg)})

    def _prepare(self) -> None:
        """Build, before the request socket opens, what each file system's first decision
        needs (the policies' tables and arrays, the decision log's prices): a create that
        arrives at once answers as fast as a later one, and the round budget's first
        measurement is a real round's. The planners' processes are waited for too (at
        most ``PLANNER_START_WAIT_S``): their start would otherwise compete with the first
        requests for the CPU."""
        for ctx in self.contexts.values():
            if ctx.background_planner is not None and not ctx.background_planner.wait_started(PLANNER_START_WAIT_S):
                log.warning("the planner's process is not ready; serving anyway (planning in "
                            "the mapper's process until it is)",
                            extra={"event": "plan_worker_slow", "fsname": ctx.fsname,
                                   "waited_s": PLANNER_START_WAIT_S})
        with self.lock:
            for ctx in self.contexts.values():
                self.desk.prepare(ctx, ctx.prepare())

    def _start_steering(self) -> None:
        """The ``[steer]`` loop, unless its mode is ``off``."""
        steer = self.config.steer_config()
        if steer.params.mode != "off":
            from lustre_alloc.mapper.steer.service import SteerLoop
            from lustre_alloc.mapper.steer.service import SteerMetrics
            if self._steer_metrics is None:     # once: a restarted loop counts on in them
                self._steer_metrics = SteerMetrics(self.metrics.registry)
            self.steering = SteerLoop(steer, list(self.contexts.values()), self.lock,
                                      self.config.curve_secret_key, context=self.context,
                                      metrics=self._steer_metrics).start()

    def _start_control(self) -> None:
        """The admin socket (:mod:`lustre_alloc.mapper.service.admin_socket`), when ``control_endpoint`` is on.

        Raises:
            ServiceError: its endpoint cannot be bound.
        """
        address = self.config.control_address()
        if not address:
            return
        from lustre_alloc.mapper.service.admin_socket import ControlServer
        if address.startswith("ipc://"):
            path = address[len("ipc://"):]
            # a hand-started mapper's directory may not exist yet: the user's own, 0700
            try:
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            except OSError as exc:
                raise ServiceError(f"cannot make the control socket's directory for "
                                   f"{address}: {exc.strerror}") from exc
            if os.path.exists(path) and self._control_answers(address):
                # binding an ipc path takes it over: never from a mapper that is running
                if self.config.control_endpoint != "auto":
                    raise ServiceError(f"another mapper answers on the control socket "
                                       f"{address}")
                log.warning("another mapper answers on the default control socket; this one "
                            "serves none (set control_endpoint to reach it)",
                            extra={"event": "control_socket_taken", "control": address})
                return
        try:
            self.control = ControlServer(self, address, self.context).start()
        except zmq.ZMQError as exc:
            raise ServiceError(f"cannot bind the control socket {address}: {exc}") from exc

    def _control_answers(self, address: str) -> bool:
        """True when something answers a status request on ``address`` within 0.5 s."""
        sock = self.context.socket(zmq.REQ)
        sock.linger = 0
        try:
            sock.connect(address)
            sock.send(msgpack.packb({"op": "status"}, use_bin_type=True))
            return bool(sock.poll(500))
        finally:
            sock.close(0)

    def restart_steering(self) -> None:
        """Stop the steering loop (releasing its actions) and start it from the current
        ``[steer]`` settings (a reload changed them)."""
        if self.steering is not None:
            self.steering.stop()
            self.steering = None
        self._start_steering()

    def _close(self) -> None:
        if self.control is not None:
            self.control.stop()
            self.control = None
        if self.steering is not None:
            self.steering.stop()      # releases every action: nothing stays steered
            self.steering = None
        for ctx in self.contexts.values():
            ctx.stop_planner()        # what the planner had not learned yet is saved too
        try:
            if self._state_loaded:        # a failed start must not overwrite the saved state
                self.learned.save_now()
            else:
                self.learned.saver.finish_now()
        finally:
            self.sockets.close()
            self._router = self._subscriber = None
            if self._own_context:
                self.context.term()
            log.info("mapper stopped", extra={"event": "mapper_stop", "rounds": self.rounds.count,
                                              "check_violations": self.path.check_violations})

    # ------------------------------------------------------------------ persistence
    @property
    def saves(self) -> int:
        """Learned-state saves that succeeded."""
        return self.learned.saves

    @property
    def broker_endpoints(self) -> tuple[str, str, str] | None:
        """(frontend, backend, snapshot) of the broker the samples come through."""
        return self.sockets.broker_endpoints

    def save_state(self) -> bool:
        """Save each file system's learned state now; True when all were saved."""
        return self.learned.save_now()

    # ------------------------------------------------------------------ loop
    def _loop(self) -> None:
        router = self._router
        if router is None:
            raise ServiceError("the mapper is not started: no request socket")
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        now = time.monotonic()
        next_drain, next_gauges = now, now
        next_save = now + self.config.save_interval_s
        while not self.stop_event.is_set():
            if poller.poll(POLL_MS):
                self._serve_queued(router)
            now = time.monotonic()
            if self._subscriber is not None and now >= next_drain:
                self._drain_samples()
                next_drain = now + SAMPLE_DRAIN_S
            if now >= next_gauges:
                self.gauges.refresh()
                next_gauges = now + GAUGE_REFRESH_S
            if self.learned.saver.copying:
                with self.lock:     # the planner thread teaches the chains under it
                    self.learned.saver.step()
            if now >= next_save:
                self.learned.save_background()
                next_save = now + self.config.save_interval_s
            self.leases.expire()      # a crashed client's leases end in one lifetime
            if self.reloader is not None and self.reloader.pending:
                self.reloader.apply_if_requested()

    def _answer_reports(self, reports: list[tuple[bytes, Any]]) -> list[tuple[bytes, bytes]]:
        """Answer the shims' shadow reports (Lustre's layouts), pricing both choices."""
        out = []
        counted = self.metrics.shadow_reports
        for identity, req in reports:
            rep = req.report
            if rep is None:
                continue
            with self.lock:
                result = self.desk.report(rep.token, rep.osts, rep.stripe_size)
            counted.labels(result).inc()
            out.append((identity, wire.encode_reported(req.id, result)))
        if out:
            self.metrics.result("report", len(out))
        return out

    def _drain_samples(self) -> int:
        sub = self._subscriber
        n = 0
        stores = [ctx.store for ctx in self.contexts.values()]
        with self.lock:
            while n < MAX_SAMPLES_PER_DRAIN:
                sample = sub.recv(0)
                if sample is None:
                    break
                for store in stores:
                    store.apply_sample(sample)
                n += 1
        if n:
            self.metrics.samples.inc(n)
            for ctx in self.contexts.values():
                ctx.gate.max_sample_age_s = ctx.store.max_age_s()
        rejected = sub.undecodable - self._rejected_counted
        if rejected > 0:
            self.metrics.samples_rejected.inc(rejected)
            self._rejected_counted = sub.undecodable
        return n

    # ------------------------------------------------------------------ requests
    def _serve_queued(self, router: zmq.Socket) -> None:
        # Hot path (one call per batch). pyzmq's sugar costs more than the work here: flags
        # are plain ints (no enum arithmetic), frames are read one by one (no getsockopt
        # RCVMORE, which builds a SocketOption enum per call), the routing id as bytes and
        # the rest as Frames (they carry ``more`` and, for a routing id not seen yet, the
        # User-Id/Peer-Address properties), replies are sent part by part.
        cfg = self.config
        received = time.perf_counter()
        recv = router.recv
        max_batch = cfg.max_batch
        messages: list[tuple[bytes, list[bytes], str]] = []
        deadline = received + cfg.batch_window_s
        peers = self.intake
        while len(messages) < max_batch:
            try:
                identity = recv(_NOBLOCK)
            except zmq.Again:
                wait = deadline - time.perf_counter()
                if wait <= 0 or not router.poll(max(1, int(wait * 1000))):
                    break
                continue
            # a ROUTER always delivers the routing id with more parts behind it, and a
            # multipart message is delivered whole: the rest never blocks
            last = recv(_NOBLOCK, False)
            parts = [last.bytes]
            while last.more:
                last = recv(_NOBLOCK, False)
                parts.append(last.bytes)
            messages.append((identity, parts, peers.peer(identity, last)))
        batch = self.intake.sort(messages)
        replies = batch.replies
        for key, group in batch.allocs.items():
            replies.extend(self.rounds.run(self.contexts[key], group))
        for key, group in batch.leases.items():
            replies.extend(self.leases.grant(self.contexts[key], group))
        if batch.releases:
            replies.extend(self.leases.release(batch.releases))
        for key, group in batch.sizes.items():
            replies.extend(self.sizes.learn(self.contexts[key], group))
        if batch.reports:
            replies.extend(self._answer_reports(batch.reports))
        m = self.metrics                 # counted before replying: a client that saw its
        if batch.bad:                    # reply sees it in the metrics too
            m.result("bad_request", batch.bad)
        if batch.pings:
            m.result("ping", batch.pings)
        if batch.out_of_scope:
            m.result("out_of_scope", batch.out_of_scope)
        if batch.leases:
            m.result("lease", sum(map(len, batch.leases.values())))
        if batch.releases:
            m.result("release", len(batch.releases))
        if batch.sizes:
            m.result("sizes", sum(map(len, batch.sizes.values())))
        # every reply of the batch waited the same time: one weighted observation
        m.request_seconds.observe_n(time.perf_counter() - received, len(replies))
        send = router.send
        for identity, body in replies:
            try:
                send(identity, _NOBLOCK_SNDMORE)
                send(b"", _NOBLOCK_SNDMORE)
                send(body, _NOBLOCK)
            except zmq.ZMQError:
                pass  # peer gone or its queue full: it times out and uses Lustre's allocator

__all__ = ["MapperService", "PlacementGuard", "ServiceError"]
