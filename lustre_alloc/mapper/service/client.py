"""Python client of the mapper (allocation protocol v1, v2's leases and composite layouts,
``docs/protocol.md``), for scripts, tests and benchmarks; the C shim in ``liblustre_alloc/`` speaks the same protocol.

Usage::

    with MapperClient("tcp://mds1:5558", timeout_s=0.05) as client:
        layout = client.alloc("ior.1000", stripe_count=4, stripe_size=1 << 20,
                              expected_bytes=1 << 30, path="/lustre/out.0")
        layout.osts, layout.policy, layout.fallback

A DEALER socket sends ``[b"", body]`` (as a REQ would) and matches replies to requests by
``id``, dropping late replies to requests it gave up on, so one lost reply never wedges
the client. Not thread-safe: one client per thread.
"""
from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from typing import Any

import zmq

from lustre_alloc.common.curve import CurveClient
from lustre_alloc.mapper.service import wire


class MapperError(Exception):
    """The mapper answered with an error (``errno``, ``reason``)."""

    def __init__(self, err: int, reason: str):
        super().__init__(f"[errno {err}] {reason}")
        self.errno = err
        self.reason = reason


class ShadowDecision(MapperError):
    """Shadow mode: create the file with Lustre's allocator, then :meth:`MapperClient.report`
    its layout under :attr:`token`; :attr:`osts` is what the mapper would have chosen."""

    def __init__(self, err: int, reason: str, token: int, osts: tuple[int, ...], policy: str):
        super().__init__(err, reason)
        self.token = token
        self.osts = osts
        self.policy = policy


class MapperTimeout(Exception):
    """No reply within the timeout: create the file with Lustre's allocator."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A granted lease (protocol v2): ``layouts`` to use in order, good for ``lease_ms``
    from the reply; ``revoke`` names earlier leases to stop using."""
    id: int
    layouts: tuple[tuple[int, ...], ...]
    stripe_size: int
    policy: str
    lease_ms: int
    version: int
    revoke: tuple[int, ...]


class LeaseRefused(MapperError):
    """The mapper granted no lease: ``per_create`` (ask per create with :meth:`MapperClient.alloc`,
    shadow mode), ``retry_ms`` (do not ask for this class again for that long),
    ``allocator`` (``"lustre"``: create this class's files without an OST list, Lustre's
    allocator places them, for ``retry_ms``; "" otherwise), ``revoke`` as in
    :class:`Lease`."""

    def __init__(self, err: int, reason: str, per_create: bool, retry_ms: int,
                 revoke: tuple[int, ...], allocator: str = ""):
        super().__init__(err, reason)
        self.per_create = per_create
        self.retry_ms = retry_ms
        self.revoke = revoke
        self.allocator = allocator


@dataclass(frozen=True, slots=True)
class CompositeLayout:
    """An ``ok`` composite (PFL) reply: one OST list per requested component, in order."""
    layouts: tuple[tuple[int, ...], ...]
    policy: str
    fallback: str


@dataclass(frozen=True, slots=True)
class Layout:
    """An ``ok`` allocation reply."""
    osts: tuple[int, ...]
    stripe_size: int
    policy: str
    fallback: str


class MapperClient:
    """Request/reply client over a DEALER socket.

    Args:
        endpoint: the mapper's ROUTER endpoint.
        timeout_s: how long each call waits for its reply.
        curve: CURVE keys when the mapper's request socket requires them.
        context: ZeroMQ context (the process-wide instance by default).
    """

    def __init__(self, endpoint: str, timeout_s: float = 1.0, *,
                 curve: CurveClient | None = None, context: zmq.Context | None = None):
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.socket = (context or zmq.Context.instance()).socket(zmq.DEALER)
        self.socket.linger = 0
        if curve is not None:
            curve.apply(self.socket)
        self.socket.connect(endpoint)
        self._ids = itertools.count((os.getpid() & 0xFFFF) << 32 | 1)
        self.late_replies = 0

    def close(self) -> None:
        self.socket.close(0)

    def __enter__(self) -> "MapperClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_frames(self, frames: list[bytes]) -> None:
        """Send raw frames (after the DEALER's own routing; tests send malformed ones)."""
        self.socket.send_multipart(frames)

    def recv_reply(self, want_id: int | None, timeout_s: float | None = None) -> dict[str, Any]:
        """The next reply with ``id == want_id`` (any reply when None), as a map.

        Raises:
            MapperTimeout: nothing matching within the timeout.
        """
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.socket.poll(max(1, int(left * 1000))):
                raise MapperTimeout(f"no reply from {self.endpoint} within the timeout")
            frames = self.socket.recv_multipart()
            reply = wire.decode_reply(frames[-1])
            if want_id is None or reply["id"] == want_id:
                return reply
            self.late_replies += 1

    def request(self, body: bytes, request_id: int | None) -> dict[str, Any]:
        """Send one body and wait for its reply map (errors are returned, not raised)."""
        self.socket.send_multipart([b"", body])
        return self.recv_reply(request_id)

    def alloc(self, job: str, stripe_count: int, stripe_size: int = 1 << 20,
              expected_bytes: int = 0, path: str = "", pool: str | None = None,
              fsname: str | None = None, owner: wire.Owner | None = None) -> Layout:
        """Ask for a layout (``owner``: the uid, gid and project id to send).

        Raises:
            ShadowDecision: shadow mode (a MapperError: old callers use Lustre's allocator).
            MapperError: the mapper refused (errno and reason from the reply).
            MapperTimeout: no reply in time.
        """
        rid = next(self._ids)
        reply = self.request(wire.encode_request(rid, job, stripe_count, stripe_size,
                                                 expected_bytes, path, pool,
                                                 fsname=fsname, owner=owner), rid)
        if not reply.get("ok"):
            err, reason = int(reply.get("errno", 0)), str(reply.get("error", ""))
            if reply.get("shadow"):
                raise ShadowDecision(err, reason, int(reply["shadow"]),
                                     tuple(reply.get("osts") or ()), str(reply.get("policy", "")))
            raise MapperError(err, reason)
        return Layout(tuple(reply["osts"]), int(reply["stripe_size"]), str(reply["policy"]),
                      str(reply.get("fallback", "")))

    def alloc_composite(self, job: str, components: list[wire.Component],
                        expected_bytes: int = 0, path: str = "", pool: str | None = None,
                        fsname: str | None = None,
                        owner: wire.Owner | None = None) -> CompositeLayout:
        """Ask for the OSTs of each OST component of a composite (PFL) layout (protocol v2,
        :mod:`lustre_alloc.mapper.service.wire`).

        Raises:
            MapperError: the mapper refused (a v1 mapper: EPROTO; then leave the file to
                Lustre's allocator).
            MapperTimeout: no reply in time.
        """
        rid = next(self._ids)
        reply = self.request(wire.encode_composite_request(
            rid, job, components, expected_bytes, path, pool, fsname, owner), rid)
        if not reply.get("ok"):
            raise MapperError(int(reply.get("errno", 0)), str(reply.get("error", "")))
        return CompositeLayout(tuple(tuple(x) for x in reply["layouts"]), str(reply["policy"]),
                               str(reply.get("fallback", "")))

    def report(self, token: int, osts: list[int], stripe_size: int,
               fsname: str | None = None) -> str:
        """Report the layout Lustre chose for a shadow decision; returns the mapper's
        ``result`` (``ok``, ``unknown``, ``duplicate``).

        Raises:
            MapperError: the report was refused (EINVAL naming the field).
            MapperTimeout: no reply in time.
        """
        rid = next(self._ids)
        reply = self.request(wire.encode_report(rid, token, osts, stripe_size, fsname), rid)
        if not reply.get("ok"):
            raise MapperError(int(reply.get("errno", 0)), str(reply.get("error", "")))
        return str(reply["result"])

    def lease(self, count: int, job: str, stripe_count: int, stripe_size: int = 1 << 20,
              expected_bytes: int = 0, path: str = "", pool: str | None = None,
              fsname: str | None = None, owner: wire.Owner | None = None) -> Lease:
        """Lease up to ``count`` layouts of one class (protocol v2; ``path`` is the
        directory the files go to).

        Raises:
            LeaseRefused: the mapper granted none (a v1 mapper: errno EPROTO; then ask
                per create with :meth:`alloc`).
            MapperTimeout: no reply in time.
        """
        rid = next(self._ids)
        reply = self.request(wire.encode_lease_request(
            rid, count, job, stripe_count, stripe_size, expected_bytes, path, pool, fsname,
            owner), rid)
        revoke = tuple(reply.get("revoke") or ())
        if not reply.get("ok"):
            raise LeaseRefused(int(reply.get("errno", 0)), str(reply.get("error", "")),
                               bool(reply.get("per_create")), int(reply.get("retry_ms", 0)),
                               revoke, str(reply.get("allocator", "")))
        return Lease(int(reply["lease"]), tuple(tuple(x) for x in reply["layouts"]),
                     int(reply["stripe_size"]), str(reply["policy"]), int(reply["lease_ms"]),
                     int(reply["version"]), revoke)

    def release(self, leases: list[tuple[int, int]], fsname: str | None = None,
                files: list[tuple[int, int, str]] = ()) -> list[str]:
        """Return leases: (lease id, layouts used) pairs, with the files created from them
        ((lease id, layout index, file name) triples, a file's lease named before or in the
        same release); the mapper's result per lease (``ok``, ``unknown``).

        Raises:
            MapperError: the release was refused (EINVAL naming the field).
            MapperTimeout: no reply in time.
        """
        rid = next(self._ids)
        reply = self.request(wire.encode_release_request(rid, leases, fsname, files), rid)
        if not reply.get("ok"):
            raise MapperError(int(reply.get("errno", 0)), str(reply.get("error", "")))
        return [str(r) for r in reply["results"]]

    def sizes(self, job: str, sizes: list[int], fsname: str | None = None) -> int:
        """Report ``job``'s files' sizes at close (bytes, close order; protocol v2
        ``sizes``); the number the mapper's policy learned.

        Raises:
            MapperError: refused (EINVAL naming the field).
            MapperTimeout: no reply in time.
        """
        rid = next(self._ids)
        reply = self.request(wire.encode_sizes_request(rid, job, sizes, fsname), rid)
        if not reply.get("ok"):
            raise MapperError(int(reply.get("errno", 0)), str(reply.get("error", "")))
        return int(reply["learned"])

    def ping(self, fsname: str | None = None) -> str:
        """Liveness check; returns the primary policy name of the file system ``fsname``
        (None: the mapper's only or first one).

        Raises:
            MapperError: the mapper refused (ENODEV: it does not serve ``fsname``).
        """
        rid = next(self._ids)
        reply = self.request(wire.encode_request(rid, "", 0, 0, op="ping", fsname=fsname), rid)
        if not reply.get("ok"):
            raise MapperError(int(reply.get("errno", 0)), str(reply.get("error", "")))
        return str(reply["policy"])
