"""The broker between the servers' collectors and the mapper (Section III-A, Fig. 5: "a message
broker that logically sits between the OSSes and MDS, and collects data from the publishers").

Sockets (docs/protocol.md explains the choice and what can be lost):

* ``frontend`` XSUB, bound: collectors' PUB sockets connect to it;
* ``backend`` XPUB, bound: subscribers' SUB sockets connect to it (subscriptions are forwarded to
  the frontend);
* ``snapshot`` ROUTER, bound: a subscriber sends ``SNAPSHOT`` and gets the last message of every
  server (the last-value cache), then ``END``, so a late joiner has the whole cluster at once.

Every ``heartbeat_s`` the broker publishes on ``lustre-alloc.broker`` its ``epoch`` (start time,
ns) and counters; a subscriber that sees a new epoch knows the broker restarted.

Embeddable: :class:`Broker` runs in its own thread with :meth:`Broker.start` / :meth:`Broker.stop`.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import msgpack
import zmq
from zmq.auth.thread import ThreadAuthenticator

from lustre_alloc.common.curve import CurveServer, expand
from lustre_alloc.collectors.schema import HEARTBEAT_TOPIC, TOPIC_PREFIX

log = logging.getLogger("lustre_alloc.collectors.broker")

SNAPSHOT_REQUEST = b"SNAPSHOT"
SNAPSHOT_END = b"END"


@dataclass(slots=True)
class BrokerStats:
    """Counters since start: messages in from publishers, dropped (bad topic or frames), cached
    servers, snapshot requests served, subscriptions seen, and (CURVE on) handshakes refused:
    a peer without CURVE, or with a key not authorised (socket monitor events
    ``HANDSHAKE_FAILED_*``)."""
    messages_in: int = 0
    bytes_in: int = 0
    dropped: int = 0
    snapshots: int = 0
    subscriptions: int = 0
    cached: int = 0
    handshake_failures: int = 0


#: Socket monitor events counted as refused handshakes (libzmq >= 4.3).
HANDSHAKE_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                    | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


@dataclass(slots=True)
class BrokerEndpoints:
    """Where the broker actually listens (``*`` ports resolved)."""
    frontend: str = ""
    backend: str = ""
    snapshot: str = ""


class Broker:
    """XSUB/XPUB forwarder with a last-value cache and heartbeats, in a background thread.

    Args:
        frontend, backend, snapshot: ZeroMQ endpoints to bind (``tcp://*:5555``; ``tcp://
            127.0.0.1:*`` picks a free port, see :attr:`endpoints`).
        curve: CURVE server keys; when set every socket requires authenticated clients.
        heartbeat_s: heartbeat period, seconds.
        backend_hwm: messages queued per slow subscriber before XPUB drops for it.
        context: ZeroMQ context to use (a new one by default; CURVE installs an authenticator
            on it).
    """

    def __init__(self, frontend: str = "tcp://*:5555", backend: str = "tcp://*:5556",
                 snapshot: str = "tcp://*:5557", *, curve: CurveServer | None = None,
                 heartbeat_s: float = 1.0, backend_hwm: int = 100_000,
                 context: zmq.Context | None = None) -> None:
        self.bind = BrokerEndpoints(frontend, backend, snapshot)
        self.endpoints = BrokerEndpoints()
        self.curve = curve
        self.heartbeat_s = heartbeat_s
        self.backend_hwm = backend_hwm
        self._own_context = context is None
        self.context = context or zmq.Context()
        self.stats = BrokerStats()
        self.epoch = time.time_ns()
        self._cache: dict[bytes, bytes] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._auth: ThreadAuthenticator | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = 5.0) -> "Broker":
        """Bind and start forwarding in a daemon thread; returns once listening.

        Raises:
            zmq.ZMQError: an endpoint could not be bound (e.g. address in use).
            TimeoutError: the thread did not come up within ``timeout_s``.
        """
        if self.curve is not None:
            self.curve.check()
            self._auth = ThreadAuthenticator(self.context, log=logging.getLogger("lustre_alloc.collectors.auth"))
            self._auth.start()
            self._auth.configure_curve(domain="*", location=expand(self.curve.authorized_keys_dir))
        self._stop.clear()
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name="lustre-alloc-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError("broker thread did not start")
        if self._error is not None:
            self._stop_auth()
            raise self._error
        log.info("broker started", extra={"event": "broker_start", "frontend": self.endpoints.frontend,
                                           "backend": self.endpoints.backend,
                                           "snapshot": self.endpoints.snapshot,
                                           "curve": self.curve is not None, "epoch": self.epoch})
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread, close the sockets (and the context if the broker made it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self._stop_auth()
        if self._own_context:
            self.context.term()
        log.info("broker stopped", extra={"event": "broker_stop", "messages_in": self.stats.messages_in})

    def _stop_auth(self) -> None:
        if self._auth is not None:
            self._auth.stop()
            self._auth = None

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cached_topics(self) -> list[bytes]:
        """Topics in the last-value cache (one per server heard from)."""
        return sorted(self._cache)

    # ------------------------------------------------------------------ thread
    def _socket(self, kind: int) -> zmq.Socket:
        sock = self.context.socket(kind)
        sock.linger = 0
        if self.curve is not None:
            self.curve.apply(sock)
        return sock

    def _run(self) -> None:
        sockets: list[zmq.Socket] = []
        try:
            frontend = self._socket(zmq.XSUB)
            backend = self._socket(zmq.XPUB)
            snapshot = self._socket(zmq.ROUTER)
            sockets = [frontend, backend, snapshot]
            backend.sndhwm = self.backend_hwm
            backend.setsockopt(zmq.XPUB_VERBOSE, 1)
            frontend.rcvhwm = self.backend_hwm
            for sock, endpoint in zip(sockets, (self.bind.frontend, self.bind.backend, self.bind.snapshot)):
                sock.bind(endpoint)
            self.endpoints = BrokerEndpoints(*(s.getsockopt_string(zmq.LAST_ENDPOINT) for s in sockets))
            frontend.send(b"\x01")  # subscribe to everything upstream: the cache needs it all
        except BaseException as exc:  # reported to start()
            self._error = exc
            for sock in sockets:
                sock.close(0)
            self._ready.set()
            return
        self._ready.set()
        poller = zmq.Poller()
        for sock in sockets:
            poller.register(sock, zmq.POLLIN)
        monitors: list[zmq.Socket] = []
        if self.curve is not None:
            for sock in sockets:
                monitors.append(sock.get_monitor_socket(HANDSHAKE_FAILED))
                poller.register(monitors[-1], zmq.POLLIN)
        next_beat = time.monotonic()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now >= next_beat:
                    self._heartbeat(backend)
                    next_beat = now + self.heartbeat_s
                timeout_ms = max(0, min(100, int((next_beat - now) * 1000)))
                events = dict(poller.poll(timeout_ms))
                if frontend in events:
                    self._forward(frontend, backend)
                if backend in events:
                    self._subscriptions(backend, frontend)
                if snapshot in events:
                    self._snapshot(snapshot)
                for mon in monitors:
                    if mon in events:
                        self._handshake_failures(mon)
        finally:
            for sock in sockets:
                if monitors:
                    sock.disable_monitor()
                sock.close(0)
            for mon in monitors:
                mon.close(0)

    def _forward(self, frontend: zmq.Socket, backend: zmq.Socket) -> None:
        for _ in range(1000):  # drain in batches, then let the other sockets in
            try:
                frames = frontend.recv_multipart(zmq.NOBLOCK, copy=True)
            except zmq.Again:
                return
            if len(frames) != 2 or not frames[0].startswith(TOPIC_PREFIX):
                self.stats.dropped += 1
                continue
            self.stats.messages_in += 1
            self.stats.bytes_in += len(frames[1])
            self._cache[frames[0]] = frames[1]
            self.stats.cached = len(self._cache)
            backend.send_multipart(frames)

    def _subscriptions(self, backend: zmq.Socket, frontend: zmq.Socket) -> None:
        while True:
            try:
                msg = backend.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if msg[:1] == b"\x01":
                self.stats.subscriptions += 1
            # Upstream is already subscribed to everything; no need to forward.

    def _snapshot(self, snapshot: zmq.Socket) -> None:
        while True:
            try:
                frames = snapshot.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            identity, request = frames[0], frames[1:]
            if not request or request[0] != SNAPSHOT_REQUEST:
                continue
            prefix = request[1] if len(request) > 1 else TOPIC_PREFIX
            self.stats.snapshots += 1
            for topic, payload in list(self._cache.items()):
                if topic.startswith(prefix):
                    snapshot.send_multipart([identity, topic, payload])
            snapshot.send_multipart([identity, SNAPSHOT_END, str(self.epoch).encode()])

    def _handshake_failures(self, monitor: zmq.Socket) -> None:
        from zmq.utils.monitor import recv_monitor_message
        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            if event["event"] & HANDSHAKE_FAILED:
                self.stats.handshake_failures += 1
                log.debug("handshake refused", extra={"event": "handshake_failed",
                                                      "endpoint": event["endpoint"].decode(errors="replace"),
                                                      "zmq_event": event["event"],
                                                      "value": event["value"]})

    def _heartbeat(self, backend: zmq.Socket) -> None:
        beat = {"epoch": self.epoch, "time": time.time(), "messages_in": self.stats.messages_in,
                "cached": len(self._cache), "dropped": self.stats.dropped,
                "handshake_failures": self.stats.handshake_failures}
        try:
            backend.send_multipart([HEARTBEAT_TOPIC, msgpack.packb(beat)], zmq.NOBLOCK)
        except zmq.Again:
            pass
