"""Publishes a server's samples to the broker's frontend (a ZeroMQ PUB socket that connects).

ZeroMQ reconnects a connecting socket by itself (every ``reconnect_ivl``, backing off to
``reconnect_ivl_max``), so a collector keeps running across broker restarts; samples published
while no broker is connected are dropped by PUB and show up as a sequence gap at the subscriber.

With CURVE, a broker that does not authorise this collector's key drops it in the handshake,
which PUB never reports by itself: a socket monitor watches the handshakes, and
:meth:`Publisher.poll_auth` logs the first rejection (``event: broker_rejected``), counts every
one (:attr:`Publisher.rejected`) and logs the first success after it (otherwise only the
broker would count the failure).
"""
from __future__ import annotations

import logging
import time
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from lustre_alloc.common.curve import CurveClient
from lustre_alloc.collectors.schema import encode, make_sample, topic_for

log = logging.getLogger("lustre_alloc.collectors.publisher")


class Publisher:
    """Sequence-numbered sample publisher for one server.

    Args:
        endpoint: the broker frontend, e.g. ``tcp://mds1:5555``.
        role: ``oss`` or ``mds``.
        host: server name put in the topic and the message.
        compress: zlib the payload.
        curve: CURVE client keys, or ``None`` for plain TCP.
        sndhwm: samples queued while the broker is slow or away (older ones are dropped).
        context: ZeroMQ context (the process-wide instance by default).
    """

    def __init__(self, endpoint: str, role: str, host: str, *, compress: bool = False,
                 curve: CurveClient | None = None, sndhwm: int = 100,
                 context: zmq.Context | None = None) -> None:
        self.endpoint = endpoint
        self.role = role
        self.host = host
        self.compress = compress
        self.epoch = time.time_ns()
        self.seq = 0
        self.topic = topic_for(role, host)
        self.socket = (context or zmq.Context.instance()).socket(zmq.PUB)
        self.socket.linger = 500
        self.socket.sndhwm = sndhwm
        self.socket.reconnect_ivl = 100
        self.socket.reconnect_ivl_max = 5000
        self.rejected = 0
        """Handshakes the broker refused (CURVE: this collector's key is not authorised)."""
        self._monitor = None
        self._rejecting = False
        if curve is not None:
            curve.apply(self.socket)
            self._monitor = self.socket.get_monitor_socket(
                zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self.socket.connect(endpoint)
        self.bytes_sent = 0

    def publish(self, sample_time: float, interval_s: float, body: dict[str, Any]) -> int:
        """Send one sample (``body`` from :meth:`lustre_alloc.collectors.collector.Collector.collect`).

        Returns:
            The sequence number used (1 for the first sample of this publisher).
        """
        self.seq += 1
        message = make_sample(role=self.role, host=self.host, epoch=self.epoch, seq=self.seq,
                              time=sample_time, interval_s=interval_s, body=body)
        payload = encode(message, self.compress)
        self.bytes_sent += len(payload)
        try:
            self.socket.send_multipart([self.topic, payload], zmq.NOBLOCK)
        except zmq.Again:
            pass  # queue full: dropped, the subscriber sees the gap
        return self.seq

    def poll_auth(self) -> int:
        """Read the handshake events since the last call (CURVE only); returns the
        rejections among them. The first rejection is logged as an error naming the broker,
        the first success after rejections as info."""
        if self._monitor is None:
            return 0
        rejected = 0
        while self._monitor.poll(0):
            event = recv_monitor_message(self._monitor)["event"]
            if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                rejected += 1
                if not self._rejecting:
                    log.error("the broker rejected this collector's CURVE key: nothing it "
                              "publishes arrives; authorise its public key on the broker",
                              extra={"event": "broker_rejected", "broker": self.endpoint,
                                     "host": self.host})
                self._rejecting = True
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED and self._rejecting:
                self._rejecting = False
                log.info("the broker accepts this collector's key again",
                         extra={"event": "broker_accepted", "broker": self.endpoint})
        self.rejected += rejected
        return rejected

    def skip(self, count: int = 1) -> None:
        """Advance the sequence number without sending (tests inject gaps with it)."""
        self.seq += count

    def close(self) -> None:
        """Close the socket (pending samples get ``linger`` = 0.5 s to leave)."""
        if self._monitor is not None:
            self.socket.disable_monitor()
            self._monitor.close(0)
            self._monitor = None
        self.socket.close()
