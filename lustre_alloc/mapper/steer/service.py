"""The mapper's steering loop: a thread that evaluates the steering controller on each file
system's snapshot and sends its actions to the agents.

Every ``interval_s`` it takes, under the service's lock, the state store's current snapshot
(what the collectors published, nothing else) and runs
:meth:`lustre_alloc.mapper.steer.controller.SteerController.evaluate`; outside the lock it sends each
``apply``/``renew`` as a ``steer`` request with the lease and each ``undo`` as a ``release``.
``mode = "dry_run"`` logs the same decisions and sends nothing.

Every action is logged (``event=steer_action``: what, on which OST, why, the evidence, until
when) and counted: ``lustre_alloc_mapper_steer_actions_total{fsname,kind,action}``
(``apply``, ``renew``, ``undo``; dry runs included, ``mode`` label), the gauge
``lustre_alloc_mapper_steered_osts{fsname,kind}`` and
``lustre_alloc_mapper_steer_agent_errors_total{fsname}``. An agent that fails (down, a broken
``lctl``, a refusal) is logged and counted; the controller keeps its decision and the next
renewal retries, and nothing else changes. At stop every action is released.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Protocol

import zmq
from prometheus_client import Counter, Gauge

from lustre_alloc.common.fsname import target_name
from lustre_alloc.mapper.steer.agents import AgentDirectory, AgentError, SteerConfig
from lustre_alloc.mapper.steer.controller import SteerAction, SteerController, SteerDecision

log = logging.getLogger("lustre_alloc.mapper.steer.service")

PREFIX = "lustre_alloc_mapper_"


class SteerMetrics:
    """The steering series on the service's registry."""

    def __init__(self, registry: Any):
        self.actions = Counter(f"{PREFIX}steer_actions", "steering actions decided",
                               ["fsname", "kind", "action", "mode"], registry=registry)
        self.steered = Gauge(f"{PREFIX}steered_osts", "OSTs steered now",
                             ["fsname", "kind"], registry=registry)
        self.errors = Counter(f"{PREFIX}steer_agent_errors", "agent requests that failed",
                              ["fsname"], registry=registry)
        self.evaluations = Counter(f"{PREFIX}steer_evaluations", "steering evaluations run "
                                   "(one per interval_s while the mode is not off)",
                                   ["fsname"], registry=registry)


class SteeredFs(Protocol):
    """One served file system, as the loop needs it (:class:`lustre_alloc.mapper.service.fs_context.FsContext`)."""
    key: str

    @property
    def fsname(self) -> str: ...

    @property
    def store(self) -> Any: ...


class SteerLoop:
    """Steer every served file system.

    Args:
        config: the ``[steer]`` settings (mode ``dry_run`` or ``on``).
        filesystems: the served file systems (their store's ``current()`` is read under
            ``lock``; the fsname as the samples give it names the targets).
        lock: the service's lock around its state.
        secret_key: the mapper's CURVE secret key file (for agents over CURVE).
        registry: Prometheus registry for :class:`SteerMetrics` (None: unregistered).
        metrics: series to count in instead (a loop restarted by a reload keeps the
            service's series).
        context: ZeroMQ context.
        clock: wall-clock seconds (the collectors' sample times are on it).
    """

    def __init__(self, config: SteerConfig, filesystems: list[SteeredFs],
                 lock: threading.Lock, secret_key: str = "", registry: Any = None,
                 context: zmq.Context | None = None, clock: Callable[[], float] = time.time,
                 metrics: SteerMetrics | None = None):
        self.config = config
        self.dry_run = config.params.mode == "dry_run"
        self.filesystems = filesystems
        self.lock = lock
        self.clock = clock
        self.controllers = {f.key: SteerController(config.params) for f in filesystems}
        self.agents = None if self.dry_run else AgentDirectory(
            config, secret_key, context or zmq.Context.instance())
        self.metrics = metrics if metrics is not None else SteerMetrics(registry)
        self._oss_of: dict[tuple[str, int], str] = {}
        self._fsname: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steer", daemon=True)

    def start(self) -> "SteerLoop":
        self._thread.start()
        log.info("steering started", extra={"event": "steer_start",
                                            "mode": self.config.params.mode,
                                            "action": self.config.params.action})
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop, and release every action in force."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        for fs, ctl in self.controllers.items():
            self._send(fs, SteerDecision(undo=ctl.release_all("mapper stopping")))
        if self.agents is not None:
            self.agents.close()

    def _run(self) -> None:
        while not self._stop.wait(self.config.interval_s):
            self.evaluate_once()

    def evaluate_once(self) -> None:
        """One evaluation of every file system (the thread's turn; tests call it)."""
        for f in self.filesystems:
            with self.lock:
                snap = f.store.current()
                decision = self.controllers[f.key].evaluate(snap, self.clock())
                for o in snap.osts:
                    self._oss_of[(f.key, o.index)] = o.oss
                self._fsname[f.key] = f.fsname
            self._send(f.key, decision)

    def _send(self, fs: str, decision: SteerDecision) -> None:
        mode = self.config.params.mode
        name = self._fsname.get(fs) or fs
        for verb, acts in (("apply", decision.apply), ("renew", decision.renew),
                           ("undo", decision.undo)):
            for act in acts:
                self.metrics.actions.labels(name, act.kind, verb, mode).inc()
                self._log(name, verb, act)
                if not self.dry_run:
                    self._request(fs, verb, act)
        ctl = self.controllers[fs]
        self.metrics.steered.labels(name, ctl.params.action).set(len(ctl.active))
        self.metrics.evaluations.labels(name).inc()

    def _request(self, fs: str, verb: str, act: SteerAction) -> None:
        name = self._fsname.get(fs) or fs
        ost = target_name(name, act.ost)
        request = ({"op": "release", "ost": ost, "kind": act.kind} if verb == "undo" else
                   {"op": "steer", "ost": ost, "kind": act.kind, "reason": act.reason,
                    "lease_s": self.config.params.action_lease_s})
        try:
            agents = self.agents.for_action(act.kind, self._oss_of.get((fs, act.ost), ""))
        except AgentError as exc:
            self._failed(name, ost, verb, exc)
            return
        # one call each: an MDS that does not answer must not keep the others (DNE: every
        # MDS holds an OSP device of the OST per MDT it serves) from draining it
        for agent in agents:
            try:
                agent.call(request)
            except AgentError as exc:
                self._failed(name, ost, verb, exc)

    def _failed(self, fsname: str, ost: str, verb: str, exc: AgentError) -> None:
        self.metrics.errors.labels(fsname).inc()
        log.error("steering request failed: %s", exc, extra={
            "event": "steer_agent_error", "fsname": fsname, "ost": ost, "action": verb,
            "error": str(exc)})

    def _log(self, fs: str, verb: str, act: SteerAction) -> None:
        log.info("steer %s %s on OST %d: %s", verb, act.kind, act.ost, act.reason, extra={
            "event": "steer_action", "fsname": fs, "action": verb, "dry_run": self.dry_run,
            **act.as_dict()})

    def speed_ratios(self, fsname: str) -> dict[int, float]:
        """The steering tracker's speed estimates over the median for ``fsname``."""
        for fs, ctl in self.controllers.items():
            if (self._fsname.get(fs) or fs) == fsname:
                return ctl.tracker.ratios_to_median()
        return {}

    def status(self) -> dict[str, list[dict[str, Any]]]:
        """fsname -> the actions in force (for a status command)."""
        return {self._fsname.get(fs) or fs: [a.as_dict() for a in ctl.active.values()]
                for fs, ctl in self.controllers.items()}
