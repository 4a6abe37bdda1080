"""Allocation protocol v2: composite (PFL) layouts (``docs/protocol.md``, "Protocol v2:
composite layouts").

A file created in a directory whose default layout is composite (Progressive File Layouts,
``lfs setstripe -E <end> -c <n> ... -E -1 ...``) gets one OST list per component that has
OST objects. The client sends those components (their extents, stripe counts, stripe sizes
and pools) in one ``alloc`` with ``v: 2``; components without OST objects (Data-on-MDT,
self-extending, foreign) stay with the client and are never sent. Each component is
decided as one create of the gated policy, with the part of the file's expected bytes that
falls inside its extent, so a file's first megabyte and its bulk are booked where they go.

Limits (ours): 1..:data:`MAX_COMPONENTS` components, extents ascending and disjoint,
each end a multiple of 64 KiB or ``LUSTRE_EOF`` (``lustre_user.h``: component ends are
multiples of the stripe size, at least 64 KiB; ``-E -1`` is ``LUSTRE_EOF``).
"""
from __future__ import annotations

import dataclasses
import errno
from typing import Any, Sequence

from common.lustre import STRIPE_SIZE_UNIT_BYTES
from mapper.policies.composite import LUSTRE_EOF, Extent, OstComponent, component_requests
from mapper.service.wire import (LEASE_VERSION, MAX_POOL_NAME, MAX_STRIPE_SIZE, Owner, Request,
                                 WireError, _int, _is_int, _pack, alloc_fields, create_body)

MAX_COMPONENTS = 32
"""Most OST components one composite request carries (ours; ``lfs setstripe`` sites use
two to five)."""
COMPONENT_KEYS = ("start", "end", "stripe_count", "stripe_size")


def decode_composite(body: dict[Any, Any], request_id: int,
                     ost_count: int | None = None) -> Request:
    """A v2 ``alloc`` body: the file's fields (``job``, ``path``, ``expected_bytes``,
    ``pool``, ``fsname``, owner ids, as a v1 ``alloc`` has them; ``stripe_count`` and
    ``stripe_size`` not required) and ``components``.

    Returns:
        a :class:`~mapper.service.wire.Request` with op ``"alloc"``, ``version`` 2,
        ``components`` (one :class:`~mapper.policies.placement.CreateRequest` per component, its ``expected_bytes``
        the file's bytes inside its extent) and ``extents``; ``create`` is the first
        component's (the scope rules and the intake's checks read it).
    Raises:
        WireError: EINVAL naming the first missing, mistyped or out-of-range field.
    """
    raw = body.get("components")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_COMPONENTS:
        raise WireError(errno.EINVAL, f"field 'components' must list 1..{MAX_COMPONENTS} "
                        f"component maps", request_id)
    # the file's own fields, validated as v1 does (stripe fields come per component)
    file_body = dict(body, stripe_count=1, stripe_size=STRIPE_SIZE_UNIT_BYTES)
    file_create, fsname, owner = alloc_fields(file_body, request_id, ost_count)
    comps: list[OstComponent] = []
    for i, comp in enumerate(raw):
        one = _component(comp, i, request_id, ost_count)
        if comps and one.extent.start < comps[-1].extent.end:
            raise WireError(errno.EINVAL, f"components[{i}] starts at {one.extent.start}, "
                            f"inside the previous extent (ending at {comps[-1].extent.end})",
                            request_id)
        comps.append(one)
    creates = component_requests(file_create, comps)
    extents = [c.extent for c in comps]
    return Request("alloc", request_id, creates[0], fsname, owner=owner,
                   version=LEASE_VERSION, components=tuple(creates), extents=tuple(extents))


def _component(comp: Any, i: int, request_id: int, ost_count: int | None) -> OstComponent:
    where = f"components[{i}]"
    if not isinstance(comp, dict):
        raise WireError(errno.EINVAL, f"{where} must be a map", request_id)
    for key in COMPONENT_KEYS:
        if not _is_int(comp.get(key)):
            raise WireError(errno.EINVAL, f"{where}.{key} missing or not an integer",
                            request_id)
    start, end = _int(comp, "start", request_id), _int(comp, "end", request_id)
    if not 0 <= start < end <= LUSTRE_EOF or (end != LUSTRE_EOF and end % STRIPE_SIZE_UNIT_BYTES):
        raise WireError(errno.EINVAL, f"{where} extent [{start}, {end}) is not a range "
                        f"ending at a multiple of {STRIPE_SIZE_UNIT_BYTES} or at LUSTRE_EOF",
                        request_id)
    count, size = comp["stripe_count"], comp["stripe_size"]
    if count == 0 or count < -1 or (ost_count is not None and count > ost_count):
        raise WireError(errno.EINVAL, f"{where}.stripe_count {count} (must be -1 or "
                        f"1..OST count)", request_id)
    if size <= 0 or size % STRIPE_SIZE_UNIT_BYTES or size > MAX_STRIPE_SIZE:
        raise WireError(errno.EINVAL, f"{where}.stripe_size {size} is not a positive multiple "
                        f"of {STRIPE_SIZE_UNIT_BYTES} below 4 GiB", request_id)
    pool = comp.get("pool")
    if pool is not None and (not isinstance(pool, str)
                             or len(pool.encode()) > MAX_POOL_NAME):
        raise WireError(errno.EINVAL, f"{where}.pool must be a string of at most "
                        f"{MAX_POOL_NAME} bytes or nil", request_id)
    return OstComponent(Extent(start, end), count, size, pool or None)


def encode_composite(request_id: int, layouts: Sequence[Sequence[int]], policy: str,
                     fallback: str = "") -> bytes:
    """Reply body of a composite layout: ``{v: 2, id, ok: true, op: "composite", layouts,
    policy, fallback}``, ``layouts`` one OST list (stripe order) per requested component,
    in the request's order; ``fallback`` the first component's that the fallback policy
    decided (``""``: the primary decided every one)."""
    return _pack({"v": LEASE_VERSION, "id": request_id, "ok": True, "op": "composite",
                  "layouts": [list(o) for o in layouts], "policy": policy,
                  "fallback": fallback})


@dataclasses.dataclass(frozen=True, slots=True)
class Component:
    """One OST component as a client asks for it (client side)."""
    start: int
    end: int
    stripe_count: int
    stripe_size: int = 1 << 20
    pool: str | None = None


def encode_composite_request(request_id: int, job: str, components: Sequence[Component],
                             expected_bytes: int = 0, path: str = "", pool: str | None = None,
                             fsname: str | None = None, owner: Owner | None = None) -> bytes:
    """A composite ``alloc`` as a client sends it."""
    body = create_body(LEASE_VERSION, "alloc", request_id, job, 1, STRIPE_SIZE_UNIT_BYTES,
                       expected_bytes, path, pool, fsname, owner)
    del body["stripe_count"], body["stripe_size"]
    body["components"] = [
        {k: v for k, v in (("start", c.start), ("end", c.end), ("stripe_count", c.stripe_count),
                           ("stripe_size", c.stripe_size), ("pool", c.pool)) if v is not None}
        for c in components]
    return _pack(body)


__all__ = ["Component", "Extent", "LUSTRE_EOF", "MAX_COMPONENTS", "decode_composite",
           "encode_composite", "encode_composite_request"]
