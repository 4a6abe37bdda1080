"""A stand-in mapper for the selftest: it answers the shim with the OST lists a check sets,
including lists Lustre must refuse, which the real mapper's placement guard would never
let out. It speaks the real protocol through the mapper's own codec
(:mod:`lustre_alloc.mapper.service.wire`;
docs/protocol.md) on a loopback port, in a thread of its own.
"""
from __future__ import annotations

import errno
import itertools
import threading
from dataclasses import dataclass, field
from typing import Sequence

import zmq

from lustre_alloc.mapper.service import wire

POLICY = "selftest"
LEASE_MS = 60_000


@dataclass
class Asked:
    """A request the shim sent: its op (``alloc``, ``composite``, ``lease``), the path it
    named and the stripe count of its (first) create."""
    op: str
    path: str
    stripe_count: int
    stripe_size: int


@dataclass
class ListResponder:
    """Answers every create with ``osts`` (every component of a composite request, and
    every layout of a lease, gets it too); :attr:`asked` lists what the shim sent.

    Use as a context manager; :attr:`endpoint` is where it listens.
    """
    osts: Sequence[int] = ()
    asked: list[Asked] = field(default_factory=list)
    endpoint: str = ""
    to_lustre_ms: int = 0
    """Above 0: every lease is answered "Lustre's allocator" (``allocator: "lustre"``) for
    this many ms, as the mapper does while the OSTs look alike."""

    def __post_init__(self) -> None:
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.linger = 0
        port = self._sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._leases = itertools.count(1)
        self._thread = threading.Thread(target=self._serve, name="selftest-responder",
                                        daemon=True)

    def __enter__(self) -> "ListResponder":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close(0)
        self._ctx.term()

    def answer_with(self, osts: Sequence[int]) -> None:
        """The list the next creates get."""
        with self._lock:
            self.osts = tuple(osts)

    def leave_to_lustre(self, for_ms: int = LEASE_MS) -> None:
        """Answer the next leases "Lustre's allocator" for ``for_ms`` ms each."""
        with self._lock:
            self.to_lustre_ms = for_ms

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self._sock.poll(50):
                continue
            frames = self._sock.recv_multipart()
            reply = self._reply(frames[-1])
            self._sock.send_multipart([frames[0], b"", reply])

    def _reply(self, frame: bytes) -> bytes:
        try:
            req = wire.decode_request(frame, None)
        except wire.WireError as exc:
            return wire.encode_error(exc.request_id, exc.errno, exc.reason)
        with self._lock:
            osts = list(self.osts)
            to_lustre_ms = self.to_lustre_ms
        if req.op == "ping":
            return wire.encode_pong(req.id, POLICY, "", req.version)
        if req.op == "release":
            return wire.encode_released(req.id, ["ok"] * len(req.released))
        if req.op == "report":
            return wire.encode_reported(req.id, "ok")
        if req.components:
            first = req.components[0]
            self.asked.append(Asked("composite", first.path, first.stripe_count,
                                    first.stripe_size))
            return wire.encode_composite(req.id, [osts[:max(1, c.stripe_count)]
                                                      for c in req.components], POLICY)
        create = req.create
        if create is None:
            return wire.encode_error(req.id, errno.EINVAL, "no create in the request")
        self.asked.append(Asked(req.op, create.path, create.stripe_count, create.stripe_size))
        size = create.stripe_size or (1 << 20)
        if req.op == "lease" and to_lustre_ms > 0:
            return wire.encode_lease_error(req.id, errno.EAGAIN, "left to Lustre's allocator",
                                           retry_ms=to_lustre_ms, allocator="lustre")
        if req.op == "lease":
            return wire.encode_lease(req.id, next(self._leases),
                                           [osts] * req.lease_count, size, POLICY, LEASE_MS,
                                           1)
        return wire.encode_placement(req.id, osts, size, POLICY, "")
