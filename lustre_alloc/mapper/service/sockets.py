"""The mapper's sockets: the request socket (ROUTER, CURVE server when configured) and the
state feed (the collectors' samples through the broker's subscriber, the broker embedded
when configured)."""
from __future__ import annotations

import logging
from typing import Any

import zmq

from lustre_alloc.common.curve import expand
from lustre_alloc.mapper.service.config import MapperConfig

MAX_SOCKET_MSG = 1 << 20
"""ZMQ_MAXMSGSIZE: a peer sending more than this is disconnected (frames between
64 KiB and this get an EMSGSIZE reply)."""


class SocketError(Exception):
    """A socket cannot be opened (endpoint in use, bad address)."""


def _connectable(endpoint: str) -> str:
    return endpoint.replace("://0.0.0.0:", "://127.0.0.1:").replace("://*:", "://127.0.0.1:")


class ServiceSockets:
    """Opens and closes the service's sockets.

    Args:
        config: the service's configuration.
        context: the ZeroMQ context.
    """

    def __init__(self, config: MapperConfig, context: zmq.Context):
        self.config = config
        self.context = context
        self.router: zmq.Socket | None = None
        self.subscriber: Any = None
        self.broker: Any = None
        self.auth: Any = None
        self.broker_endpoints: tuple[str, str, str] | None = None

    def bind(self) -> zmq.Socket:
        """The request socket, bound (CURVE server when configured).

        Raises:
            ConfigError: no CURVE on an address other hosts reach, without ``insecure``.
            SocketError: the endpoint cannot be bound.
        """
        cfg = self.config
        cfg.check_exposure()            # ConfigError: no CURVE on an address others reach
        router = self.context.socket(zmq.ROUTER)
        router.linger = 0
        router.setsockopt(zmq.MAXMSGSIZE, MAX_SOCKET_MSG)
        router.rcvhwm = router.sndhwm = 10_000
        serve_curve = cfg.serve_curve()
        if serve_curve is not None:
            from zmq.auth.thread import ThreadAuthenticator
            serve_curve.check()
            self.auth = ThreadAuthenticator(self.context, log=logging.getLogger("lustre_alloc.mapper.auth"))
            self.auth.start()
            self.auth.configure_curve(domain="*", location=expand(serve_curve.authorized_keys_dir))
            serve_curve.apply(router)
        try:
            router.bind(cfg.bind)
        except zmq.ZMQError as exc:
            router.close(0)
            raise SocketError(f"cannot bind {cfg.bind}: {exc}") from exc
        self.router = router
        return router

    def open_feed(self) -> Any:
        """The subscriber to the collectors' samples (the embedded broker started first
        when configured); returns it."""
        from lustre_alloc.collectors.broker import Broker
        from lustre_alloc.collectors.subscriber import Subscriber
        cfg = self.config
        backend, snapshot = cfg.broker_backend, cfg.broker_snapshot
        if cfg.embed_broker:
            from lustre_alloc.common.config import BrokerConfig
            self.broker = Broker(cfg.broker_frontend, cfg.broker_backend_bind,
                                 cfg.broker_snapshot_bind,
                                 curve=BrokerConfig(curve_secret_key=cfg.serve_curve_secret_key,
                                                    curve_authorized_keys=cfg.serve_curve_authorized_keys
                                                    ).curve()).start()
            ends = self.broker.endpoints
            backend, snapshot = _connectable(ends.backend), _connectable(ends.snapshot)
            self.broker_endpoints = (ends.frontend, ends.backend, ends.snapshot)
        else:
            self.broker_endpoints = ("", backend, snapshot)
        self.subscriber = Subscriber(backend, snapshot, curve=cfg.curve(), context=self.context,
                                     snapshot_timeout_s=2.0).start()
        return self.subscriber

    def close(self) -> None:
        """Close whatever was opened."""
        if self.router is not None:
            self.router.close(0)
            self.router = None
        if self.subscriber is not None:
            self.subscriber.close()
            self.subscriber = None
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
        if self.auth is not None:
            self.auth.stop()
            self.auth = None
