"""Subscriber API for the mapper: decoded samples, gaps by sequence number, last-value cache.

Usage::

    with Subscriber("tcp://mds1:5556", "tcp://mds1:5557") as sub:
        for sample in sub.samples(timeout_s=10):
            state.update(sample.host, sample.targets)
        print(sub.gaps)

On :meth:`Subscriber.start` the subscriber connects its SUB socket first, then asks the broker's
snapshot socket for the last sample of every server (the Clone pattern's order: nothing published
between the two steps is missed; duplicates are dropped by sequence number). Samples from the
cache come out first with ``from_cache=True``. Per server (role, host) the subscriber keeps the
publisher ``epoch`` and last ``seq``: a higher seq than expected records a :class:`Gap`; an equal
or lower one is a duplicate and is dropped; a new epoch is a restarted collector (no gap). When
the broker's heartbeat shows a new broker epoch (restart), the cache is fetched again.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import msgpack
import zmq

from lustre_alloc.collectors.broker import SNAPSHOT_END, SNAPSHOT_REQUEST
from lustre_alloc.common.curve import CurveClient
from lustre_alloc.common.errors import SchemaError
from lustre_alloc.collectors.schema import HEARTBEAT_TOPIC, TOPIC_PREFIX, decode

log = logging.getLogger("lustre_alloc.collectors.subscriber")


@dataclass(slots=True)
class Sample:
    """One decoded sample (fields as in docs/protocol.md)."""
    role: str
    host: str
    epoch: int
    seq: int
    time: float
    interval_s: float
    server: dict[str, Any]
    targets: dict[str, Any]
    from_cache: bool = False
    received_at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class Gap:
    """Samples of one server that never arrived: ``expected_seq`` .. ``received_seq - 1``."""
    role: str
    host: str
    epoch: int
    expected_seq: int
    received_seq: int

    @property
    def missing(self) -> int:
        """How many samples were lost."""
        return self.received_seq - self.expected_seq


class Subscriber:
    """Receives samples from the broker backend.

    Args:
        backend: broker XPUB endpoint, e.g. ``tcp://mds1:5556``.
        snapshot: broker snapshot endpoint (``None``: no last-value cache on join).
        prefix: topic prefix; ``lustre-alloc.v1.oss.`` for OSS samples only.
        curve: CURVE client keys when the broker requires them.
        snapshot_timeout_s: how long to wait for the cache.
        context: ZeroMQ context (process-wide instance by default).
    """

    def __init__(self, backend: str, snapshot: str | None = None, *,
                 prefix: bytes = TOPIC_PREFIX, curve: CurveClient | None = None,
                 snapshot_timeout_s: float = 2.0, context: zmq.Context | None = None) -> None:
        self.backend = backend
        self.snapshot = snapshot
        self.prefix = prefix
        self.curve = curve
        self.snapshot_timeout_s = snapshot_timeout_s
        self.context = context or zmq.Context.instance()
        self.gaps: list[Gap] = []
        self.duplicates = 0
        self.undecodable = 0
        self.broker_epoch: int | None = None
        self.broker_restarts = 0
        self._last: dict[tuple[str, str], tuple[int, int]] = {}
        self._pending: list[Sample] = []
        self._sub: zmq.Socket | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "Subscriber":
        """Connect, subscribe, and load the last-value cache."""
        self._sub = self.context.socket(zmq.SUB)
        self._sub.linger = 0
        self._sub.rcvhwm = 100_000
        self._sub.reconnect_ivl = 100
        self._sub.reconnect_ivl_max = 2000
        if self.curve is not None:
            self.curve.apply(self._sub)
        self._sub.setsockopt(zmq.SUBSCRIBE, self.prefix)
        self._sub.setsockopt(zmq.SUBSCRIBE, HEARTBEAT_TOPIC)
        self._sub.connect(self.backend)
        self.fetch_snapshot()
        return self

    def close(self) -> None:
        """Close the socket."""
        if self._sub is not None:
            self._sub.close(0)
            self._sub = None

    def __enter__(self) -> "Subscriber":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ cache
    def fetch_snapshot(self) -> int:
        """Ask the broker for its last-value cache; queue the samples. Returns how many came.

        A broker that does not answer within ``snapshot_timeout_s`` yields nothing (logged).
        """
        if self.snapshot is None:
            return 0
        req = self.context.socket(zmq.DEALER)
        req.linger = 0
        if self.curve is not None:
            self.curve.apply(req)
        req.connect(self.snapshot)
        count = 0
        try:
            req.send_multipart([SNAPSHOT_REQUEST, self.prefix])
            deadline = time.monotonic() + self.snapshot_timeout_s
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not req.poll(int(remaining * 1000)):
                    log.warning("snapshot timed out", extra={"event": "snapshot_timeout",
                                                             "endpoint": self.snapshot})
                    break
                frames = req.recv_multipart()
                if frames[0] == SNAPSHOT_END:
                    self._note_broker_epoch(int(frames[1]) if len(frames) > 1 else None)
                    break
                if len(frames) == 2:
                    sample = self._accept(frames[1], from_cache=True)
                    if sample is not None:
                        self._pending.append(sample)
                        count += 1
        finally:
            req.close(0)
        return count

    def _note_broker_epoch(self, epoch: int | None) -> bool:
        if epoch is None or epoch == self.broker_epoch:
            return False
        restarted = self.broker_epoch is not None
        self.broker_epoch = epoch
        if restarted:
            self.broker_restarts += 1
            log.info("broker restarted", extra={"event": "broker_restart", "epoch": epoch})
        return restarted

    # ------------------------------------------------------------------ receive
    def _accept(self, payload: bytes, *, from_cache: bool) -> Sample | None:
        try:
            msg = decode(payload)
        except SchemaError as exc:
            self.undecodable += 1
            log.warning("undecodable sample", extra={"event": "bad_sample", "error": str(exc)})
            return None
        key = (msg["role"], msg["host"])
        epoch, seq = msg["epoch"], msg["seq"]
        last = self._last.get(key)
        if last is not None:
            last_epoch, last_seq = last
            if epoch < last_epoch or (epoch == last_epoch and seq <= last_seq):
                self.duplicates += 1
                return None
            if epoch == last_epoch and seq > last_seq + 1:
                gap = Gap(key[0], key[1], epoch, last_seq + 1, seq)
                self.gaps.append(gap)
                log.warning("sample gap", extra={"event": "gap", "role": gap.role, "host": gap.host,
                                                 "expected": gap.expected_seq, "received": seq})
        self._last[key] = (epoch, seq)
        return Sample(msg["role"], msg["host"], epoch, seq, float(msg["time"]),
                      float(msg["interval_s"]), msg["server"], msg["targets"], from_cache)

    def recv(self, timeout_s: float | None = None) -> Sample | None:
        """The next sample, or ``None`` when ``timeout_s`` passes without one (``None``: wait)."""
        if self._pending:
            return self._pending.pop(0)
        if self._sub is None:
            raise RuntimeError("Subscriber.start() was not called")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            wait_ms = -1 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            if not self._sub.poll(wait_ms):
                return None
            frames = self._sub.recv_multipart()
            if len(frames) != 2:
                continue
            if frames[0] == HEARTBEAT_TOPIC:
                try:
                    beat = msgpack.unpackb(frames[1])
                    epoch = int(beat["epoch"])
                except (ValueError, TypeError, KeyError, msgpack.UnpackException):
                    continue
                if self._note_broker_epoch(epoch):
                    self.fetch_snapshot()
                    if self._pending:
                        return self._pending.pop(0)
                continue
            sample = self._accept(frames[1], from_cache=False)
            if sample is not None:
                return sample
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def samples(self, timeout_s: float | None = None) -> Iterator[Sample]:
        """Yield samples until none arrives for ``timeout_s`` seconds (forever with ``None``)."""
        while True:
            sample = self.recv(timeout_s)
            if sample is None:
                return
            yield sample

    def last_seq(self, role: str, host: str) -> int | None:
        """Last sequence number accepted from a server, ``None`` if never heard from."""
        last = self._last.get((role, host))
        return None if last is None else last[1]
