"""The global mapper's request loop (Paul et al. 2017, Section III, Fig. 4: the request
handler G on the MDS).

One thread owns every socket and the cluster state, so a round never sees a half-applied
sample and no lock is taken on the hot path:

1. wait on the ROUTER socket (``docs/protocol.md``, allocation protocol v1);
2. drain everything already queued (up to ``max_batch``; optionally wait
   ``batch_window_s`` for more), decode and validate each request; bad ones are answered
   at once with an error, pings with a pong;
3. solve the valid ones together in one round through :class:`~mapper.policies.gate.GatedPolicy`
   (the primary's ``allocate_batch`` when MDS CPU, staleness and the round budget allow,
   else the fallback's);
4. check every answer (duplicate, unknown, unusable or out-of-pool OSTs; the rules of
   :func:`mapper.state.ost_health.check_placement`); an answer that fails is replaced by the
   fallback's (reason ``check``) and counted; then reply;
5. between rounds: apply the collectors' samples, refresh gauges, save the primary's
   learned state every ``save_interval_s``.

A SIGTERM (``stop()``) ends the loop after the current round; the learned state is saved
on the way out.
"""
from __future__ import annotations

import dataclasses
import errno
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import zmq

from mapper.service import wire
from mapper.state.cluster_state import ClusterSnapshot
from mapper.policies.gate import GatedPolicy
from mapper.service.metrics import MapperMetrics
from mapper.state.ost_health import check_placement, is_usable, pool_members
from mapper.policies.placement import (AllocationError, CreateRequest, InvalidRequestError, Placement,
                                       PlacementCheckError)
from mapper.policies import registry
from mapper.policies.registry import PolicyParamError, UnknownPolicyError
from mapper.service.config import MapperConfig
from common.curve import expand
from common.errors import ConfigError
from mapper.service.limits import ExpectedBytesClip, PeerLimits, peer_of
from mapper.service.persist import BackgroundSaver, has_predictor
from mapper.service.planner import BackgroundPlanner
from mapper.predictor.markov_store import remove_stale_temporaries
from mapper.state.state_store import StateStore

log = logging.getLogger("mapper.service.server")

POLL_MS = 50
"""Longest idle wait, ms: how soon a stop request or a sample is noticed."""
SAMPLE_DRAIN_S = 0.02
"""Samples are applied at most this often while requests keep the loop busy, s."""
GAUGE_REFRESH_S = 1.0
MAX_SOCKET_MSG = 1 << 20
"""ZMQ_MAXMSGSIZE: a peer sending more than this is disconnected (frames between
64 KiB and this get an EMSGSIZE reply)."""
MAX_SAMPLES_PER_DRAIN = 2000
_NOBLOCK = int(zmq.NOBLOCK)
_NOBLOCK_SNDMORE = int(zmq.NOBLOCK | zmq.SNDMORE)
"""pyzmq flags as plain ints: the enum arithmetic costs more than the call on the hot path."""


def _always(job: str) -> bool:
    return True


class ServiceError(Exception):
    """The service cannot start (bad policy, endpoint in use, broker unreachable...)."""


class PlacementGuard:
    """The last line of defence: :func:`~mapper.state.ost_health.check_placement`'s rules with
    the allowed set (usable OSTs of the pool) cached per state version and pool, so a
    check costs O(stripes) instead of O(OSTs). On failure the full ``check_placement``
    runs to name the violation."""

    def __init__(self) -> None:
        self._version = -1
        self._allowed: dict[str | None, frozenset[int]] = {}

    def violation(self, snapshot: ClusterSnapshot, version: int, osts: Sequence[int],
                  pool: str | None) -> str | None:
        """None when ``osts`` is a valid answer, else why not."""
        if version != self._version:
            self._allowed.clear()
            self._version = version
        allowed = self._allowed.get(pool)
        if allowed is None:
            try:
                members = pool_members(snapshot, pool)
            except InvalidRequestError as exc:
                return exc.reason
            allowed = self._allowed[pool] = frozenset(o.index for o in members if is_usable(o))
        if osts and len(set(osts)) == len(osts) and allowed.issuperset(osts):
            return None
        if not osts:
            return "empty OST list"
        try:
            check_placement(snapshot, osts, pool)
        except PlacementCheckError as exc:
            return exc.reason
        return "placement check disagrees with the cached usable set"  # not reached


def build_policy(config: MapperConfig, store: StateStore) -> GatedPolicy:
    """The gated primary/fallback pair of ``config``, built by the one policy factory
    (:func:`mapper.policies.registry.build_policy`) with ``config.policy_params``.

    Raises:
        ServiceError: an unknown policy name or a bad policy parameter.
    """
    try:
        policy = registry.build_policy(
            config.policy, config.policy_params, seed=config.seed, gate=True,
            fallback=config.fallback, mds_cpu_limit_percent=config.mds_cpu_limit_percent,
            max_sample_age_s=None if store.static else store.max_age_s(),
            round_budget_s=config.round_budget_s or None, stale_source=store.stale_servers)
    except (UnknownPolicyError, PolicyParamError) as exc:
        raise ServiceError(str(exc)) from exc
    return cast(GatedPolicy, policy)    # gate=True always wraps


def build_store(config: MapperConfig, fsname: str = "") -> StateStore:
    """A static emulated cluster (``static_cluster``) or an empty store fed by samples, for
    the file system ``fsname`` (``""``: adopt the first sample's)."""
    if config.static_cluster:
        osses, per = config.static_shape()
        return StateStore.static_cluster(osses, per, config.static_kbytes_total, config.pools,
                                         fsname=fsname or "static")
    return StateStore(config.pools, lnet_capacity_bytes_per_s=config.lnet_capacity_bytes_per_s,
                      stale_after_s=config.stale_after_s, fsname=fsname)


def state_file_for(path: str, fsname: str, several: bool) -> str:
    """The learned-state file of one file system: ``path`` itself when the mapper serves one,
    else ``<stem>.<fsname><suffix>`` beside it."""
    if not path or not several:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}.{fsname}{p.suffix}"))


def _connectable(endpoint: str) -> str:
    return endpoint.replace("://0.0.0.0:", "://127.0.0.1:").replace("://*:", "://127.0.0.1:")


class MapperService:
    """The mapper: request socket, cluster state, gated policy, metrics, persistence.

    Args:
        config: validated configuration.
        store: cluster state (default: from ``config``; tests pass their own).
        policy: the gated policy (default: from ``config``).
        context: ZeroMQ context (a new one by default).

    Use :meth:`run` in the main thread (the CLI), or :meth:`start` / :meth:`stop` to run
    it in a background thread (tests, benchmarks). :attr:`endpoint` is the bound address.
    """

    def __init__(self, config: MapperConfig, *, store: StateStore | None = None,
                 policy: GatedPolicy | None = None, context: zmq.Context | None = None):
        self.config = config
        # One state and one gated policy (with its learned state) per file system: state is
        # keyed by (fsname, OST index), and a job's pattern on one file system says nothing
        # about the OSTs of another.
        if store is not None:
            self.stores = {store.fsname: store}
        else:
            self.stores = {fs: build_store(config, fs) for fs in (config.fsnames or [""])}
        self.policies = {fs: (policy if policy is not None and i == 0 else
                              build_policy(config, st))
                         for i, (fs, st) in enumerate(self.stores.items())}
        self.store = next(iter(self.stores.values()))
        self.policy = next(iter(self.policies.values()))
        self.guards = {fs: PlacementGuard() for fs in self.stores}
        self._own_context = context is None
        self.context = context or zmq.Context()
        self.metrics = MapperMetrics(predicted=self._predicted_load)
        self.guard = next(iter(self.guards.values()))
        self.limits = PeerLimits(config.peer_requests_per_s, config.peer_request_burst,
                                 config.peer_new_apps_per_min, config.peer_max_apps)
        self.clips = {fs: ExpectedBytesClip() for fs in self.stores}
        self._peers: dict[bytes, str] = {}
        self.saver = BackgroundSaver(self._saved)
        self._state_loaded = False
        self.metrics_port = 0
        self.metrics.register_limits(self._limit_counts)
        self.endpoint = ""
        self.broker_endpoints: tuple[str, str, str] | None = None
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.lock = threading.Lock()
        """Held by the loop while it applies samples or runs a round, and by the planner
        thread while it reads the state or queues lists (never during a flow solve)."""
        self.planners: dict[str, BackgroundPlanner] = {}
        self.planner: BackgroundPlanner | None = None
        """The first file system's planner (None without plan ahead)."""
        self.rounds = 0
        self.check_violations = 0
        self.saves = 0
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._router: zmq.Socket | None = None
        self._subscriber: Any = None
        self._broker: Any = None
        self._auth: Any = None
        self._rejected_counted = 0

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
                try:
                    keys.check()
                except ConfigError as exc:
                    raise ServiceError(str(exc)) from exc
        self.load_state()
        self._state_loaded = True   # from here on, saving on the way out keeps what was learned
        if not self.store.static:
            self._open_state_feed()
        router = self.context.socket(zmq.ROUTER)
        router.linger = 0
        router.setsockopt(zmq.MAXMSGSIZE, MAX_SOCKET_MSG)
        router.rcvhwm = router.sndhwm = 10_000
        serve_curve = cfg.serve_curve()
        if serve_curve is not None:
            from zmq.auth.thread import ThreadAuthenticator
            serve_curve.check()
            self._auth = ThreadAuthenticator(self.context, log=logging.getLogger("mapper.auth"))
            self._auth.start()
            self._auth.configure_curve(domain="*", location=expand(serve_curve.authorized_keys_dir))
            serve_curve.apply(router)
        try:
            router.bind(cfg.bind)
        except zmq.ZMQError as exc:
            router.close(0)
            raise ServiceError(f"cannot bind {cfg.bind}: {exc}") from exc
        self._router = router
        self.endpoint = router.getsockopt(zmq.LAST_ENDPOINT).decode()
        if cfg.metrics_port:
            try:
                self.metrics_port = self.metrics.serve(cfg.metrics_port, cfg.metrics_addr)
            except OSError as exc:
                raise ServiceError(f"cannot serve /metrics on {cfg.metrics_addr}:"
                                   f"{cfg.metrics_port}: {exc}") from exc
        for fs, gate in self.policies.items():
            if cfg.plan_ahead and BackgroundPlanner.supported(gate):
                # one planner per file system; the plan metrics are the first one's
                self.planners[fs] = BackgroundPlanner(
                    gate, self.stores[fs], self.lock, process=cfg.plan_process,
                    registry=None if self.planners else self.metrics.registry).start()
            elif not cfg.plan_ahead and getattr(gate.primary, "plans", None) is not None:
                gate.primary.plans = None     # every request solved in a round
        self.planner = next(iter(self.planners.values()), None)
        gate = self.policy
        log.info("mapper started", extra={
            "event": "mapper_start", "endpoint": self.endpoint, "pid": os.getpid(),
            "policy": gate.primary.name, "fallback": gate.fallback.name,
            "static": self.store.static, "osts": self.store.ost_count,
            "broker": self.broker_endpoints, "config": dataclasses.asdict(cfg)})

    def _open_state_feed(self) -> None:
        from collectors.broker import Broker
        from collectors.subscriber import Subscriber
        cfg = self.config
        backend, snapshot = cfg.broker_backend, cfg.broker_snapshot
        if cfg.embed_broker:
            from common.config import BrokerConfig
            self._broker = Broker(cfg.broker_frontend, cfg.broker_backend_bind,
                                  cfg.broker_snapshot_bind,
                                  curve=BrokerConfig(curve_secret_key=cfg.serve_curve_secret_key,
                                                     curve_authorized_keys=cfg.serve_curve_authorized_keys
                                                     ).curve()).start()
            ends = self._broker.endpoints
            backend, snapshot = _connectable(ends.backend), _connectable(ends.snapshot)
            self.broker_endpoints = (ends.frontend, ends.backend, ends.snapshot)
        else:
            self.broker_endpoints = ("", backend, snapshot)
        self._subscriber = Subscriber(backend, snapshot, curve=cfg.curve(), context=self.context,
                                      snapshot_timeout_s=2.0).start()
        self._drain_samples()

    def _close(self) -> None:
        for planner in self.planners.values():
            planner.stop()
        self.planners.clear()
        self.planner = None
        for gate in self.policies.values():
            learn = getattr(gate.primary, "learn", None)
            if learn is not None:
                learn()         # what the planner had not learned yet is saved too
        try:
            self.saver.finish_now()
            if self._state_loaded:        # a failed start must not overwrite the saved state
                self.save_state()
        finally:
            if self._router is not None:
                self._router.close(0)
                self._router = None
            if self._subscriber is not None:
                self._subscriber.close()
                self._subscriber = None
            if self._broker is not None:
                self._broker.stop()
                self._broker = None
            if self._auth is not None:
                self._auth.stop()
                self._auth = None
            if self._own_context:
                self.context.term()
            log.info("mapper stopped", extra={"event": "mapper_stop", "rounds": self.rounds,
                                              "check_violations": self.check_violations})

    # ------------------------------------------------------------------ persistence
    def _state_files(self) -> list[tuple[str, GatedPolicy]]:
        several = len(self.policies) > 1
        return [(state_file_for(self.config.state_file, fs, several), pol)
                for fs, pol in self.policies.items()]

    def load_state(self) -> bool:
        """Remove temporaries a crashed save left, then restore each file system's learned
        state (see :func:`state_file_for`); True when at least one was restored."""
        for path, _ in self._state_files():
            if path:
                remove_stale_temporaries(path)
        return any([self._load_one(path, pol) for path, pol in self._state_files()])

    def save_state_background(self) -> bool:
        """Snapshot every file system's learned state now and write it in the writer thread
        (:mod:`mapper.service.persist`); policies without a predictor are saved here. False
        when the previous background save is still running (skipped)."""
        jobs = []
        for path, pol in self._state_files():
            if not path:
                continue
            if has_predictor(pol.primary):
                jobs.append((path, pol.primary))
            else:
                self._save_one(path, pol)
        return self.saver.begin(jobs) if jobs else True

    def _saved(self, path: str, ok: bool, error: str, seconds: float) -> None:
        """Writer thread: count and log one finished save."""
        if ok:
            self.saves += 1
            self.metrics.saves.labels("ok").inc()
            log.info("learned state saved", extra={"event": "state_saved", "path": path,
                                                   "seconds": round(seconds, 4)})
        else:
            self.metrics.saves.labels("error").inc()
            log.error("saving learned state failed", extra={"event": "state_save_failed",
                                                           "path": path, "error": error})

    def save_state(self) -> bool:
        """Save each file system's learned state; True when all were saved."""
        return all([self._save_one(path, pol) for path, pol in self._state_files()])

    def _load_one(self, path: str, policy: GatedPolicy) -> bool:
        """Restore the primary's learned state from ``path`` if both exist.

        An unreadable file is renamed ``<file>.bad`` and the primary starts fresh.
        """
        loader = getattr(policy.primary, "load_state", None)
        if not path or loader is None or not os.path.exists(path):
            return False
        try:
            loader(path)
        except Exception as exc:  # noqa: BLE001 - a bad file must not stop the mapper
            bad = path + ".bad"
            os.replace(path, bad)
            log.warning("learned state unreadable; starting fresh", extra={
                "event": "state_load_failed", "path": path, "moved_to": bad, "error": str(exc)})
            return False
        predictor = getattr(policy.primary, "predictor", None)
        skipped = getattr(getattr(predictor, "stats", None), "skipped_on_load", 0)
        if skipped:
            self.metrics.records_skipped.inc(skipped)
        log.info("learned state restored", extra={"event": "state_loaded", "path": path,
                                                  "records_skipped": skipped})
        return True

    def _save_one(self, path: str, policy: GatedPolicy) -> bool:
        """Write the primary's learned state to ``path`` atomically (a temporary
        file in the same directory, fsync, rename). False when there is nothing to save."""
        saver = getattr(policy.primary, "save_state", None)
        if not path or saver is None:
            return False
        target = Path(path)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            saver(str(tmp))
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, target)
            dir_fd = os.open(target.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                os.fsync(dir_fd)         # the rename itself must survive a crash
            finally:
                os.close(dir_fd)
        except Exception as exc:  # noqa: BLE001 - keep serving; the old file is intact
            tmp.unlink(missing_ok=True)
            self.metrics.saves.labels("error").inc()
            log.error("saving learned state failed", extra={"event": "state_save_failed",
                                                           "path": path, "error": str(exc)})
            return False
        self.saves += 1
        self.metrics.saves.labels("ok").inc()
        log.info("learned state saved", extra={"event": "state_saved", "path": path})
        return True

    # ------------------------------------------------------------------ loop
    def _started_router(self) -> zmq.Socket:
        """The request socket.

        Raises:
            ServiceError: the service has not been started (or has stopped).
        """
        if self._router is None:
            raise ServiceError("the mapper is not started: no request socket")
        return self._router

    def _loop(self) -> None:
        router = self._started_router()
        poller = zmq.Poller()
        poller.register(router, zmq.POLLIN)
        now = time.monotonic()
        next_drain, next_gauges = now, now
        next_save = now + self.config.save_interval_s
        while not self.stop_event.is_set():
            if poller.poll(POLL_MS):
                self._serve_queued()
            now = time.monotonic()
            if self._subscriber is not None and now >= next_drain:
                self._drain_samples()
                next_drain = now + SAMPLE_DRAIN_S
            if now >= next_gauges:
                self._refresh_gauges()
                next_gauges = now + GAUGE_REFRESH_S
            if self.saver.copying:
                with self.lock:     # the planner thread teaches the chains under it
                    self.saver.step()
            if now >= next_save:
                self.save_state_background()
                next_save = now + self.config.save_interval_s

    def _drain_samples(self) -> int:
        sub = self._subscriber
        n = 0
        with self.lock:
            while n < MAX_SAMPLES_PER_DRAIN:
                sample = sub.recv(0)
                if sample is None:
                    break
                for store in self.stores.values():
                    store.apply_sample(sample)
                n += 1
        if n:
            self.metrics.samples.inc(n)
            for fs, store in self.stores.items():
                self.policies[fs].max_sample_age_s = store.max_age_s()
        rejected = sub.undecodable - self._rejected_counted
        if rejected > 0:
            self.metrics.samples_rejected.inc(rejected)
            self._rejected_counted = sub.undecodable
        return n

    def _refresh_gauges(self) -> None:
        m = self.metrics
        total = usable = 0
        stale: set[str] = set()
        for store in self.stores.values():
            snap = store.current()
            m.mds_cpu.set(snap.mds_cpu_percent / 100.0)
            total += len(snap.osts)
            usable += sum(1 for o in snap.osts if is_usable(o))
            if not store.static:
                stale.update(store.stale_servers(snap, store.max_age_s()))
        m.osts.labels("all").set(total)
        m.osts.labels("usable").set(usable)
        m.stale_servers.set(len(stale))

    def _limit_counts(self) -> dict[str, float]:
        """Scrape time: the client bounds' counters (mapper.service.limits)."""
        return {"rate": self.limits.rate_limited, "new_apps": self.limits.overflowed,
                "expected_bytes_clipped": sum(c.clipped for c in self.clips.values()),
                "saves_skipped": self.saver.skipped}

    def _predicted_load(self) -> dict[tuple[str, int], float] | None:
        """The primaries' per-OST load estimate for the metrics, keyed (fsname, index):
        ``predicted_load()`` if a primary has one, else its ``pending_bytes`` (MCMF: bytes
        placed but not yet visible in the OSTs' space), else nothing for it."""
        out: dict[tuple[str, int], float] = {}
        for fs, gate in self.policies.items():
            primary, fsname = gate.primary, self.stores[fs].fsname
            try:
                fn = getattr(primary, "predicted_load", None)
                loads = fn() if fn is not None else getattr(primary, "pending_bytes", None)
                if loads:
                    out.update(((fsname, i), float(v)) for i, v in loads.items())
            except Exception:  # noqa: BLE001 - metrics must not break on a policy bug
                continue
        return out or None

    # ------------------------------------------------------------------ requests
    def _serve_queued(self) -> None:
        # Hot path (one call per batch). pyzmq's sugar costs more than the work here: flags
        # are plain ints (no enum arithmetic), frames are read one by one (no getsockopt
        # RCVMORE, which builds a SocketOption enum per call), the routing id as bytes and
        # the rest as Frames (they carry ``more`` and, for a routing id not seen yet, the
        # User-Id/Peer-Address properties), replies are sent part by part.
        router = self._started_router()
        cfg = self.config
        received = time.perf_counter()
        recv = router.recv
        max_batch = cfg.max_batch
        messages: list[tuple[bytes, list[bytes], str]] = []
        deadline = received + cfg.batch_window_s
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
            peer = self._peers.get(identity)
            if peer is None:
                peer = self._peer(identity, last)
            messages.append((identity, parts, peer))
        allocs: dict[str, list[tuple[bytes, wire.Request, str]]] = {}
        replies: list[tuple[bytes, bytes]] = []
        bad = pings = 0
        in_batch: dict[str, int] = {}
        stores = self.stores
        only_fs = next(iter(stores)) if len(stores) == 1 else None
        ost_counts = {fs: st.ost_count for fs, st in stores.items()}   # fixed for the batch
        decode = wire.decode_request
        admit = self.limits.admit
        peer_batch_max = cfg.peer_batch_max
        for identity, parts, peer in messages:
            if len(parts) != 2 or parts[0] != b"":
                replies.append((identity, wire.encode_error(
                    0, errno.EPROTO, f"expected frames [empty delimiter, body], got "
                    f"{len(parts)} frame(s) after the routing id")))
                bad += 1
                continue
            try:
                req = decode(parts[1])
                if only_fs is not None and req.fsname is None:
                    fs = only_fs
                else:
                    fs = self._file_system(req)
                create = req.create
                if create is not None:
                    ost_count = ost_counts[fs]
                    if ost_count and create.stripe_count > ost_count:
                        raise wire.WireError(errno.EINVAL, f"stripe_count {create.stripe_count} "
                                             f"exceeds the {ost_count} OSTs", req.id)
            except wire.WireError as exc:
                replies.append((identity, wire.encode_error(exc.request_id, exc.errno,
                                                            exc.reason)))
                bad += 1
                log.debug("bad request", extra={"event": "bad_request", "errno": exc.errno,
                                                "reason": exc.reason})
                continue
            if not admit(peer):
                replies.append((identity, wire.encode_error(
                    req.id, errno.EBUSY, f"rate limit: over {cfg.peer_requests_per_s:g} "
                    f"requests/s from {peer}; use Lustre's allocator")))
                bad += 1
                continue
            # one client's pipelined burst must not make everyone's round long
            n = in_batch[peer] = in_batch.get(peer, 0) + 1
            if n > peer_batch_max and req.op != "ping":
                self.limits.rate_limited += 1
                replies.append((identity, wire.encode_error(
                    req.id, errno.EBUSY, f"rate limit: over {cfg.peer_batch_max} requests "
                    f"in one round from {peer}; use Lustre's allocator")))
                bad += 1
                continue
            if req.op == "ping":
                replies.append((identity, wire.encode_pong(req.id, self.policy.name)))
                pings += 1
            elif ost_counts[fs] == 0:
                replies.append((identity, wire.encode_error(
                    req.id, errno.EAGAIN, "no cluster state yet (no collector sample)")))
                bad += 1
            else:
                group = allocs.get(fs)
                if group is None:
                    group = allocs[fs] = []
                group.append((identity, req, peer))
        for fs, group in allocs.items():
            replies.extend(self._round(fs, group))
        m = self.metrics                 # counted before replying: a client that saw its
        if bad:                          # reply sees it in the metrics too
            m.result("bad_request", bad)
        if pings:
            m.result("ping", pings)
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

    def _file_system(self, req: wire.Request) -> str:
        """Key of the store serving ``req``.

        Raises:
            wire.WireError: ENODEV for a file system this mapper does not serve; EINVAL when
                it serves several and the request names none.
        """
        if req.fsname is None:
            if len(self.stores) == 1 or req.op == "ping":
                return next(iter(self.stores))
            raise wire.WireError(errno.EINVAL, f"field 'fsname' is required: this mapper serves "
                                 f"{', '.join(self.stores)}", req.id)
        for fs, store in self.stores.items():
            if req.fsname == store.fsname:
                return fs
        served = ", ".join(st.fsname or "(none yet)" for st in self.stores.values())
        raise wire.WireError(errno.ENODEV, f"file system {req.fsname!r} is not served by this "
                             f"mapper (serves: {served})", req.id)

    def _peer(self, identity: bytes, frame: zmq.Frame | None) -> str:
        """The client behind a message (:func:`mapper.service.limits.peer_of`), cached per
        routing id; ``frame`` (a part of the message, received as a Frame) carries the
        ``User-Id``/``Peer-Address`` properties read for a routing id not seen yet."""
        peer = self._peers.get(identity)
        if peer is None:
            props = []
            for name in ("User-Id", "Peer-Address"):
                try:
                    props.append(frame.get(name))   # type: ignore[union-attr]
                except (zmq.ZMQError, AttributeError):
                    props.append(None)
            peer = peer_of(props[0], props[1], identity)
            if len(self._peers) > 100_000:
                self._peers.clear()
            self._peers[identity] = peer
        return peer

    def _bounded(self, fs: str, snap: ClusterSnapshot, version: int, create: CreateRequest,
                 peer: str, tracked: Callable[[str], bool] | None = None) -> CreateRequest:
        """``create`` with its job id and expected bytes bounded (mapper.service.limits);
        ``create`` itself when neither changes. ``tracked``: the primary's predictor's
        membership test (looked up when not given; a round passes it once)."""
        if tracked is None:
            predictor = getattr(self.policies[fs].primary, "predictor", None)
            tracked = _always if predictor is None else predictor.__contains__
        job = self.limits.job_for(peer, create.job_id, tracked)
        expected = self.clips[fs].clip(snap, version, create.pool, create.expected_bytes)
        if job == create.job_id and expected == create.expected_bytes:
            return create
        return dataclasses.replace(create, job_id=job, expected_bytes=expected)

    def _round(self, fs: str, allocs: list[tuple[bytes, wire.Request, str]]
               ) -> list[tuple[bytes, bytes]]:
        store, gate, m = self.stores[fs], self.policies[fs], self.metrics
        guard = self.guards[fs]
        snap = store.current()
        version = store.version
        predictor = getattr(gate.primary, "predictor", None)
        tracked = _always if predictor is None else predictor.__contains__
        bounded = self._bounded
        # one CreateRequest per request: the bounded one goes to the policy, the client's
        # own (its pool, its stripe size) shapes the check and the reply
        creates = [r.create_request() for _, r, _ in allocs]
        requests: list[CreateRequest]
        if tracked is _always:
            # every job is its own (job_for keeps it): only expected_bytes may be clipped
            clip = self.clips[fs].clip
            requests = []
            for create in creates:
                expected = clip(snap, version, create.pool, create.expected_bytes)
                requests.append(create if expected == create.expected_bytes else
                                dataclasses.replace(create, expected_bytes=expected))
        else:
            requests = [bounded(fs, snap, version, create, peer, tracked)
                        for create, (_, _, peer) in zip(creates, allocs)]
        t0 = time.perf_counter()
        planner = self.planners.get(fs)
        misses = planner.plans.stats["misses"] if planner is not None else 0
        try:
            with self.lock:
                results = gate.allocate_batch(snap, requests)
            if planner is not None and planner.plans.stats["misses"] != misses:
                planner.wake.set()          # a class ran dry: refill now
        except Exception:  # noqa: BLE001 - the fallback itself failed: answer errors
            log.exception("round failed", extra={"event": "round_error", "requests": len(allocs)})
            results = [AllocationError("mapper internal error") for _ in requests]
        out: list[tuple[bytes, bytes]] = []
        ok = errors = 0
        fallbacks: dict[str, int] = {}
        stripes: list[int] = []
        version = store.version
        violation = guard.violation
        encode = wire.encode_placement
        for (identity, req, _), create, result in zip(allocs, creates, results):
            if isinstance(result, Placement):
                problem = violation(snap, version, result.osts, create.pool)
                if problem is not None:
                    result = self._after_violation(fs, snap, version, create, result, problem)
            if isinstance(result, Placement):
                osts = result.osts
                out.append((identity, encode(req.id, osts, create.stripe_size, result.policy,
                                             result.fallback)))
                stripes.extend(osts)
                if result.fallback:
                    fallbacks[result.fallback] = fallbacks.get(result.fallback, 0) + 1
                else:
                    ok += 1
            else:
                out.append((identity, wire.encode_error(req.id, result.errno, result.reason)))
                errors += 1
        took = time.perf_counter() - t0
        m.count_stripes(store.fsname, stripes)
        for reason, n in fallbacks.items():
            m.fallbacks.labels(reason).inc(n)
        self.rounds += 1
        m.rounds.inc()
        m.round_seconds.observe(took)
        m.round_requests.observe(len(allocs))
        if ok:
            m.result("ok", ok)
        if fallbacks:
            m.result("fallback", sum(fallbacks.values()))
        if errors:
            m.result("error", errors)
        return out

    def _after_violation(self, fs: str, snap: ClusterSnapshot, version: int, create: CreateRequest,
                         bad: Placement, problem: str) -> Placement | AllocationError:
        self.check_violations += 1
        self.metrics.check_violations.inc()
        log.error("policy returned an invalid layout; the fallback answers", extra={
            "event": "check_violation", "policy": bad.policy, "osts": list(bad.osts),
            "pool": create.pool, "job": create.job_id, "problem": problem})
        fallback = self.policies[fs].fallback
        try:
            placed = fallback.allocate(snap, create)
        except AllocationError as exc:
            return exc
        if self.guards[fs].violation(snap, version, placed.osts, create.pool) is not None:
            return AllocationError("no layout passed the placement check")
        self.policies[fs].fallbacks["check"] += 1
        return Placement(placed.osts, placed.policy, placed.note, fallback="check")


__all__ = ["MapperService", "PlacementGuard", "ServiceError", "build_policy", "build_store"]
