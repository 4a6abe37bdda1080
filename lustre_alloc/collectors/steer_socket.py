"""The steering agent's socket: a ZeroMQ REP endpoint in a thread of the collector, which
answers the mapper's steering requests (:mod:`lustre_alloc.collectors.steer_agent`) and expires leases
once a second.

Authenticated as the rest of the stack: with CURVE keys the socket is a CURVE server under
the collector's own key pair, and only the public keys in ``authorized_keys_dir`` (the
mapper's) may connect (:class:`zmq.auth.thread.ThreadAuthenticator`). Messages are msgpack
maps; a request that is not one gets ``{"ok": false, "error": ...}`` and the agent keeps
serving.
"""
from __future__ import annotations

import logging
import threading

import msgpack
import zmq
from zmq.auth.thread import ThreadAuthenticator

from lustre_alloc.collectors.steer_agent import SteerAgent
from lustre_alloc.common.curve import CurveServer, expand

log = logging.getLogger("lustre_alloc.collectors.steer_socket")

EXPIRE_EVERY_S = 1.0
"""Seconds between lease checks (a lease ends at most this late)."""
MAX_REQUEST_BYTES = 4096
"""Largest request accepted (a steering request is about 150 bytes)."""


class AgentServer:
    """Serve ``agent`` on ``endpoint`` until :meth:`stop`; at stop every lease is restored.

    Args:
        agent: the steering agent.
        endpoint: bind endpoint, e.g. ``tcp://*:5561``.
        curve: the collector's CURVE server keys (its own pair and the directory of the
            mapper's public key), or None for plain TCP.
        context: ZeroMQ context (default: the process's).
    """

    def __init__(self, agent: SteerAgent, endpoint: str, curve: CurveServer | None = None,
                 context: zmq.Context | None = None):
        self.agent = agent
        self.context = context or zmq.Context.instance()
        self._auth: ThreadAuthenticator | None = None
        if curve is not None:
            curve.check()
            self._auth = ThreadAuthenticator(self.context)
            self._auth.start()
            self._auth.configure_curve(domain="*", location=expand(curve.authorized_keys_dir))
        self.socket = self.context.socket(zmq.REP)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.MAXMSGSIZE, MAX_REQUEST_BYTES)
        if curve is not None:
            curve.apply(self.socket)
        self.socket.bind(endpoint)
        self.endpoint = self.socket.getsockopt(zmq.LAST_ENDPOINT).decode()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="steer-agent", daemon=True)

    def start(self) -> "AgentServer":
        self._thread.start()
        log.info("steering agent serving", extra={"event": "steer_agent_start",
                                                  "endpoint": self.endpoint,
                                                  "role": self.agent.role})
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving and restore every lease (a second call does nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self.agent.release_all("collector stopping")
        self.socket.close(0)
        if self._auth is not None:
            self._auth.stop()

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        while not self._stop.is_set():
            if poller.poll(int(EXPIRE_EVERY_S * 1000)):
                raw = self.socket.recv()
                try:
                    request = msgpack.unpackb(raw, raw=False, strict_map_key=True)
                except (ValueError, msgpack.UnpackException) as exc:
                    reply = {"ok": False, "error": f"request is not msgpack: {exc}"}
                else:
                    reply = self.agent.handle(request)
                self.socket.send(msgpack.packb(reply, use_bin_type=True))
            self.agent.expire()
