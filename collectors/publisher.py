"""Publishes a server's samples to the broker's frontend (a ZeroMQ PUB socket that connects).

ZeroMQ reconnects a connecting socket by itself (every ``reconnect_ivl``, backing off to
``reconnect_ivl_max``), so a collector keeps running across broker restarts; samples published
while no broker is connected are dropped by PUB and show up as a sequence gap at the subscriber.
"""
from __future__ import annotations

import time
from typing import Any

import zmq

from common.curve import CurveClient
from collectors.schema import encode, make_sample, topic_for


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
        if curve is not None:
            curve.apply(self.socket)
        self.socket.connect(endpoint)
        self.bytes_sent = 0

    def publish(self, sample_time: float, interval_s: float, body: dict[str, Any]) -> int:
        """Send one sample (``body`` from :meth:`collectors.collector.Collector.collect`).

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

    def skip(self, count: int = 1) -> None:
        """Advance the sequence number without sending (tests inject gaps with it)."""
        self.seq += count

    def close(self) -> None:
        """Close the socket (pending samples get ``linger`` = 0.5 s to leave)."""
        self.socket.close()
