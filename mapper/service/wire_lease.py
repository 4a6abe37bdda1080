"""Allocation protocol v2: layout leases (``docs/protocol.md``, "Protocol v2: leases").

A v2 client asks, off its create path, for a batch of layouts for one request class (its
job, pool, stripe count, stripe size, expected bytes and directory) and takes one per
create without asking; when it is done with a lease it says how many layouts it used, so
the mapper un-books the rest. Every other op keeps its v1 frames: a v1 client never sees a
v2 reply, and a v2 client that meets a v1 mapper gets ``EPROTO`` ("protocol version 2")
and asks per create.

Limits (ours): a lease request asks for 1..:data:`MAX_LEASE_ASK` layouts (a larger count
is refused, EINVAL; the mapper grants at most its own per-lease maximum and what the
client's quota leaves); a release names at most :data:`MAX_RELEASES` leases.
"""
from __future__ import annotations

import errno
from typing import Any, Sequence

from mapper.service import wire
from mapper.service.wire_pfl import decode_composite
from mapper.service.wire import (LEASE_VERSION, MAX_ID, Owner, Request, WireError, _fsname, _int,
                                 _is_int, _pack, alloc_fields)

MAX_LEASE_ASK = (1 << 32) - 1
"""Most layouts one lease request may ask for (the grant is bounded by the mapper)."""
MAX_RELEASES = 1024
"""Most leases one ``release`` names."""
MAX_LEASE_USED = 1 << 16
"""A lease holds fewer layouts than this; a larger ``used`` is a malformed release."""
OPS_V2 = ("lease", "release", "ping", "alloc")


def decode_v2(body: dict[Any, Any], request_id: int, ost_count: int | None = None) -> Request:
    """A v2 request body (``v`` already read as 2, ``id`` checked; ``ost_count`` as
    :func:`mapper.service.wire.decode_request` takes it).

    A v2 ``alloc`` is a composite (PFL) layout request (:mod:`mapper.service.wire_pfl`).

    Raises:
        WireError: EINVAL for an op v2 does not have (``report`` is a v1 op) or a
            missing, mistyped or out-of-range field, naming it.
    """
    op = body.get("op")
    if op not in OPS_V2:
        raise WireError(errno.EINVAL, f"field 'op' must be one of {', '.join(OPS_V2)} in "
                        f"protocol v{LEASE_VERSION}, not {op!r}"[:200], request_id)
    if op == "ping":
        return Request("ping", request_id, fsname=_fsname(body, request_id),
                       version=LEASE_VERSION)
    if op == "alloc":
        return decode_composite(body, request_id, ost_count)
    if op == "release":
        return Request("release", request_id, fsname=_fsname(body, request_id),
                       version=LEASE_VERSION, released=_released(body, request_id))
    count = _int(body, "count", request_id)
    if not 1 <= count <= MAX_LEASE_ASK:
        raise WireError(errno.EINVAL, f"count {count} outside 1..{MAX_LEASE_ASK}", request_id)
    create, fsname, owner = alloc_fields(body, request_id, ost_count)
    return Request("lease", request_id, create, fsname, owner=owner, version=LEASE_VERSION,
                   lease_count=count)


def decode_request(frame: bytes, ost_count: int | None = None) -> Request:
    """:func:`mapper.service.wire.decode_request` speaking v1 and v2 (what the mapper's
    intake decodes with).

    Raises:
        WireError: as :func:`mapper.service.wire.decode_request` and :func:`decode_v2`.
    """
    return wire.decode_request(frame, ost_count, v2=decode_v2)


def _released(body: dict[Any, Any], request_id: int) -> tuple[tuple[int, int], ...]:
    leases = body.get("leases")
    if not isinstance(leases, list) or not 0 < len(leases) <= MAX_RELEASES:
        raise WireError(errno.EINVAL, f"field 'leases' must list 1..{MAX_RELEASES} "
                        f"[lease, used] pairs", request_id)
    out = []
    for pair in leases:
        if (not isinstance(pair, list) or len(pair) != 2 or not all(map(_is_int, pair))
                or not 0 < pair[0] <= MAX_ID or not 0 <= pair[1] < MAX_LEASE_USED):
            raise WireError(errno.EINVAL, f"field 'leases' holds {pair!r}"[:120] + ", not a "
                            f"[lease 1..2^64-1, used 0..{MAX_LEASE_USED - 1}] pair", request_id)
        out.append((pair[0], pair[1]))
    return tuple(out)


# ---------------------------------------------------------------------- replies
def encode_lease(request_id: int, lease_id: int, layouts: Sequence[Sequence[int]],
                 stripe_size: int, policy: str, lease_ms: int, version: int,
                 revoke: Sequence[int] = ()) -> bytes:
    """Reply body of a granted lease: ``{v: 2, id, ok: true, lease, layouts, stripe_size,
    policy, lease_ms, version, revoke}``: ``layouts`` in the order the client should use
    them, each an OST list in stripe order; ``lease_ms`` how long they stay good from
    now; ``version`` the cluster state version they were made on; ``revoke`` the client's
    earlier leases it must stop using (an OST of theirs became unusable)."""
    return _pack({"v": LEASE_VERSION, "id": request_id, "ok": True, "lease": lease_id,
                  "layouts": [list(osts) for osts in layouts], "stripe_size": stripe_size,
                  "policy": policy, "lease_ms": lease_ms, "version": version,
                  "revoke": list(revoke)})


def encode_lease_error(request_id: int, err: int, reason: str, *, revoke: Sequence[int] = (),
                       per_create: bool = False, retry_ms: int = 0) -> bytes:
    """Reply body of a refused lease: ``{v: 2, id, ok: false, errno, error, revoke}``, with
    ``per_create: true`` when the class must ask per create with v1 ``alloc`` (shadow
    mode: each file's decision has its own report token) and ``retry_ms`` when the
    client should not ask for this class again for that long (outside the scope)."""
    body: dict[str, Any] = {"v": LEASE_VERSION, "id": request_id, "ok": False, "errno": err,
                            "error": reason, "revoke": list(revoke)}
    if per_create:
        body["per_create"] = True
    if retry_ms:
        body["retry_ms"] = retry_ms
    return _pack(body)


def encode_released(request_id: int, results: Sequence[str]) -> bytes:
    """Reply body of a release: ``{v: 2, id, ok: true, op: "released", results}``, one of
    ``ok`` / ``unknown`` per lease named (``unknown``: expired, revoked and returned
    already, or never this client's)."""
    return _pack({"v": LEASE_VERSION, "id": request_id, "ok": True, "op": "released",
                  "results": list(results)})


# ---------------------------------------------------------------------- client side
def encode_lease_request(request_id: int, count: int, job: str, stripe_count: int,
                         stripe_size: int, expected_bytes: int = 0, path: str = "",
                         pool: str | None = None, fsname: str | None = None,
                         owner: Owner | None = None) -> bytes:
    """A lease request as a client sends it (``path``: the directory the files go to)."""
    body = wire.create_body(LEASE_VERSION, "lease", request_id, job, stripe_count, stripe_size,
                            expected_bytes, path, pool, fsname, owner)
    body["count"] = count
    return _pack(body)


def encode_release_request(request_id: int, leases: Sequence[tuple[int, int]],
                           fsname: str | None = None) -> bytes:
    """A release as a client sends it: (lease id, layouts used) pairs."""
    body: dict[str, Any] = {"v": LEASE_VERSION, "op": "release", "id": request_id,
                            "leases": [list(p) for p in leases]}
    if fsname is not None:
        body["fsname"] = fsname
    return _pack(body)


__all__ = ["MAX_LEASE_ASK", "MAX_RELEASES", "decode_request", "decode_v2", "encode_lease",
           "encode_lease_error", "encode_lease_request", "encode_release_request",
           "encode_released"]
