"""The allocation protocol's one codec (shim -> mapper, ``docs/protocol.md``): decode and
validate requests of both versions, encode replies and (for clients and tests) requests.
:func:`decode_request` dispatches on the body's ``v``: version 1 (``alloc``, ``ping``,
``report``), version 2 (leases and composite layouts, below).

A request is one msgpack map of at most :data:`MAX_FRAME_BYTES` bytes; every way a request
can be wrong becomes a :class:`WireError` carrying the Linux errno and a one-line reason
naming the field at fault, and the request id when it could be read, so the reply can be
matched.

Limits restated from Lustre (``docs/reference/lustre-client-layout-api.md``):
``lmm_stripe_size`` is a u32 in a multiple of 64 KiB, so a stripe size is a positive
multiple of 65 536 below 4 GiB; a pool name is at most ``LOV_MAXPOOLNAME`` = 15 bytes.

**Version 2: layout leases** (``docs/protocol.md``, "Protocol v2: leases"). A v2 client
asks, off its create path, for a batch of layouts for one request class (its job, pool,
stripe count, stripe size, expected bytes and directory) and takes one per create without
asking; when it is done with a lease it says how many layouts it used, so the mapper
un-books the rest. Every other op keeps its v1 frames: a v1 client never sees a v2 reply,
and a v2 client that meets a v1 mapper gets ``EPROTO`` ("protocol version 2") and asks per
create. A lease request asks for 1..:data:`MAX_LEASE_ASK` layouts; a release names at most
:data:`MAX_RELEASES` leases (ours).

**Version 2: composite (PFL) layouts** (``docs/protocol.md``, "Protocol v2: composite
layouts"). A file created in a directory whose default layout is composite gets one OST
list per component that has OST objects. The client sends those components (their
extents, stripe counts, stripe sizes and pools) in one ``alloc`` with ``v: 2``; components
without OST objects (Data-on-MDT, self-extending, foreign) stay with the client. Each
component is decided as one create, with the part of the file's expected bytes inside its
extent. 1..:data:`MAX_COMPONENTS` components, extents ascending and disjoint, each end a
multiple of 64 KiB or ``LUSTRE_EOF`` (``lustre_user.h``).
"""
from __future__ import annotations

import errno
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import msgpack

from lustre_alloc.common.lustre import STRIPE_SIZE_UNIT_BYTES
from lustre_alloc.mapper.policies.composite import LUSTRE_EOF, Extent, OstComponent, component_requests
from lustre_alloc.mapper.policies.placement import CreateRequest

PROTOCOL_VERSION = 1
LEASE_VERSION = 2
"""Protocol v2 adds layout leases (``lease``, ``release``: :func:`decode_v2`)."""
PROTOCOL_VERSIONS = (PROTOCOL_VERSION, LEASE_VERSION)
MAX_FRAME_BYTES = 65_536
"""Largest request body accepted, bytes; a larger frame is refused undecoded (EMSGSIZE)."""
MAX_STRIPE_SIZE = (1 << 32) - STRIPE_SIZE_UNIT_BYTES
"""Largest multiple of 64 KiB that fits ``lmm_stripe_size`` (u32)."""
MAX_POOL_NAME = 15
"""``LOV_MAXPOOLNAME``: bytes in a pool name, without the NUL."""
MAX_JOB_BYTES = 255
"""Longest job id, bytes: the shim's ``char job[256]`` (liblustre_alloc/la_internal.h)."""
MAX_FSNAME = 8
"""Longest Lustre fsname, bytes (mkfs.lustre ``--fsname``)."""
MAX_ID = (1 << 64) - 1
MAX_ID32 = (1 << 32) - 1
"""Largest uid, gid or project id (32-bit in Linux and Lustre)."""
MAX_EXPECTED_BYTES = (1 << 63) - 1
OPS = ("alloc", "ping", "report")
MAX_STRIPES = 2000
"""``LOV_MAX_STRIPE_COUNT``: most OSTs a layout (and a shadow report) names."""
MAX_OST_INDEX = 0xFFFE
"""Largest OST index (``LOV_OFFSET_DEFAULT`` 0xffff means "none")."""


class WireError(Exception):
    """A request that cannot be served as sent.

    Attributes:
        errno: Linux errno for the reply (EPROTO, EINVAL, EMSGSIZE, ...).
        reason: one line naming the field at fault.
        request_id: the request's ``id`` when it could be read, else 0.
    """

    def __init__(self, err: int, reason: str, request_id: int = 0):
        super().__init__(reason)
        self.errno = err
        self.reason = reason
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class Owner:
    """The creating process's effective uid and gid and the new file's project id, as the
    client sends them (None: not sent). A client's claim, not a credential: the shim runs as
    the user (docs/operations.md, "Scope")."""
    uid: int | None = None
    gid: int | None = None
    projid: int | None = None


@dataclass(frozen=True, slots=True)
class ShadowReport:
    """The layout Lustre chose for a file the mapper decided in shadow mode."""
    token: int
    """The ``shadow`` token of the mapper's reply."""
    osts: tuple[int, ...]
    """OST indices in stripe order, as ``LL_IOC_LOV_GETSTRIPE`` gave them."""
    stripe_size: int
    """Bytes."""


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded, validated request: ``op`` ``"ping"`` (``create`` None), ``"alloc"``,
    ``"report"`` (``report`` set), or, in v2, ``"lease"`` (``create`` is the class's
    template, ``lease_count`` set), ``"release"`` (``released`` set) or a composite
    ``"alloc"`` (``components`` set)."""
    op: str
    id: int
    create: CreateRequest | None = None
    fsname: str | None = None
    """The file system to place on (``fsname``); None = the mapper's only one."""
    report: ShadowReport | None = None
    owner: Owner | None = None
    """Who creates, as the client says (``uid``, ``gid``, ``projid``; for the scope rules)."""
    version: int = PROTOCOL_VERSION
    """The protocol version the request spoke (its reply speaks the same)."""
    lease_count: int = 0
    """``lease`` (v2): layouts wanted for ``create``'s class."""
    released: tuple[tuple[int, int], ...] = ()
    """``release`` (v2): (lease id, layouts used) pairs the client is done with."""
    files: tuple[tuple[int, int, str], ...] = ()
    """``release`` (v2): (lease id, layout index, file name) of the files created with a
    leased layout."""
    job: str = ""
    """``sizes`` (v2): the application (jobid) whose files closed."""
    sizes: tuple[int, ...] = ()
    """``sizes`` (v2): their sizes at close, bytes, in close order."""
    components: tuple[CreateRequest, ...] = ()
    """A composite ``alloc`` (v2, :func:`decode_composite`): one create per OST
    component, in extent order; empty for a plain ``alloc``."""
    extents: tuple[Any, ...] = ()
    """The components' :class:`lustre_alloc.mapper.policies.composite.Extent` (byte ranges)."""

    def create_request(self) -> CreateRequest:
        """The create of an ``alloc`` request.

        Raises:
            WireError: EINVAL, the request is not an ``alloc`` (a ping has no create).
        """
        if self.create is None:
            raise WireError(errno.EINVAL, f"request {self.id} ({self.op}) is not an alloc",
                            self.id)
        return self.create


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(body: dict[Any, Any], key: str, request_id: int, *, required: bool,
          default: str = "") -> str:
    value = body.get(key)
    if value is None:
        if required:
            raise WireError(errno.EINVAL, f"missing field {key!r}", request_id)
        return default
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if not isinstance(value, str):
        raise WireError(errno.EINVAL, f"field {key!r} must be a string, not "
                        f"{type(value).__name__}", request_id)
    return value


def _int(body: dict[Any, Any], key: str, request_id: int) -> int:
    if key not in body:
        raise WireError(errno.EINVAL, f"missing field {key!r}", request_id)
    value = body[key]
    if not _is_int(value):
        raise WireError(errno.EINVAL, f"field {key!r} must be an integer, not "
                        f"{type(value).__name__}", request_id)
    return value


_unpackb = msgpack.unpackb
_MAX_STRIPE_SIZE = MAX_STRIPE_SIZE


def _fsname(body: dict[Any, Any], request_id: int) -> str | None:
    """The request's ``fsname`` (None when absent or empty).

    Raises:
        WireError: EINVAL, not a string of at most :data:`MAX_FSNAME` bytes.
    """
    fsname = body.get("fsname")
    if fsname is not None:
        if not isinstance(fsname, str) or len(fsname.encode()) > MAX_FSNAME:
            raise WireError(errno.EINVAL, f"field 'fsname' must be a string of at most "
                            f"{MAX_FSNAME} bytes or nil", request_id)
        fsname = fsname or None
    return fsname


def _decode_common(body: dict[Any, Any], ost_count: int | None) -> Request | None:
    """The request in ``body`` when it is a well-formed v1 request with every field of
    its plain type (what a client sends), else None: :func:`decode_request`'s full
    validation then runs and names the fault. Accepts nothing the full validation
    refuses, and decodes to the same :class:`Request`."""
    get = body.get
    v = get("v")
    request_id = get("id")
    if (type(v) is not int or v != PROTOCOL_VERSION or type(request_id) is not int
            or not 0 <= request_id <= MAX_ID):
        return None
    op = get("op")
    if op == "ping":
        fsname = get("fsname")
        if fsname is None:
            return Request("ping", request_id)
        if type(fsname) is not str or len(fsname.encode()) > MAX_FSNAME:
            return None
        return Request("ping", request_id, fsname=fsname or None)
    if op != "alloc":
        return None
    job = get("job")
    stripe_count = get("stripe_count")
    stripe_size = get("stripe_size")
    expected = get("expected_bytes", 0)
    path = get("path")
    pool = get("pool")
    fsname = get("fsname")
    if (type(job) is not str or not job
            or (len(job) > MAX_JOB_BYTES // 4
                and len(job.encode("utf-8", "surrogateescape")) > MAX_JOB_BYTES)
            or type(stripe_count) is not int or (stripe_count < 1 and stripe_count != -1)
            or (ost_count is not None and stripe_count > ost_count)
            or type(stripe_size) is not int or stripe_size <= 0
            or stripe_size % STRIPE_SIZE_UNIT_BYTES or stripe_size > _MAX_STRIPE_SIZE):
        return None
    if expected is None:
        expected = 0
    elif type(expected) is not int or not 0 <= expected <= MAX_EXPECTED_BYTES:
        return None
    if path is None:
        path = ""
    elif type(path) is not str:
        return None
    if pool is not None:
        if type(pool) is not str or len(pool.encode()) > MAX_POOL_NAME:
            return None
        pool = pool or None
    if fsname is not None:
        if type(fsname) is not str or len(fsname.encode()) > MAX_FSNAME:
            return None
        fsname = fsname or None
    ids = (get("uid"), get("gid"), get("projid"))
    for v in ids:
        if v is not None and (type(v) is not int or not 0 <= v <= MAX_ID32):
            return None
    return Request("alloc", request_id,
                   CreateRequest(job, stripe_count, stripe_size, expected, pool, path), fsname,
                   owner=None if ids == (None, None, None) else Owner(*ids))


def decode_request(frame: bytes, ost_count: int | None = None) -> Request:
    """Decode and validate one request body, of either protocol version.

    Args:
        frame: the body frame (msgpack map).
        ost_count: OSTs the mapper knows; a stripe count above it is refused (None: no
            upper check here, the policy clips).
    Raises:
        WireError: EMSGSIZE (frame over :data:`MAX_FRAME_BYTES`), EPROTO (not msgpack,
            not a map, trailing bytes, another protocol version), EINVAL (a field is
            missing, has the wrong type or is out of range; unknown op).
    """
    if len(frame) <= MAX_FRAME_BYTES:
        # the common case first: a well-formed v1 request, decoded with one pass of checks
        try:
            body = _unpackb(frame, raw=False, strict_map_key=False)
        except Exception:  # noqa: BLE001 - the full validation below names the fault
            body = None
        if type(body) is dict:
            request = _decode_common(body, ost_count)
            if request is not None:
                return request
    return _decode_checked(frame, ost_count)


def _decode_checked(frame: bytes, ost_count: int | None) -> Request:
    """:func:`decode_request` with every check spelled out and named on failure, and the
    version dispatch: v2 bodies go to :func:`decode_v2`."""
    if len(frame) > MAX_FRAME_BYTES:
        raise WireError(errno.EMSGSIZE, f"request of {len(frame)} bytes exceeds "
                        f"{MAX_FRAME_BYTES}")
    try:
        body = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except (msgpack.UnpackException, ValueError, TypeError, UnicodeDecodeError,
            RecursionError, OverflowError) as exc:
        raise WireError(errno.EPROTO, f"body is not one msgpack object: "
                        f"{type(exc).__name__}") from None
    if not isinstance(body, dict):
        raise WireError(errno.EPROTO, f"body is a msgpack {type(body).__name__}, not a map")
    raw_id = body.get("id")
    request_id = raw_id if _is_int(raw_id) and 0 <= raw_id <= MAX_ID else 0
    if "v" not in body:
        raise WireError(errno.EPROTO, "missing field 'v' (protocol version)", request_id)
    if body["v"] not in PROTOCOL_VERSIONS or not _is_int(body["v"]):
        raise WireError(errno.EPROTO, f"protocol version {body['v']!r} (this mapper speaks "
                        f"{', '.join(map(str, PROTOCOL_VERSIONS))})", request_id)
    if "id" not in body:
        raise WireError(errno.EINVAL, "missing field 'id'")
    if not _is_int(raw_id) or not 0 <= raw_id <= MAX_ID:
        raise WireError(errno.EINVAL, "field 'id' must be an integer 0..2^64-1")
    if body["v"] == LEASE_VERSION:
        return decode_v2(body, request_id, ost_count)
    op = body.get("op")
    if op not in OPS:
        raise WireError(errno.EINVAL, f"field 'op' must be one of {', '.join(OPS)}, not "
                        f"{op!r}"[:200], request_id)
    if op == "ping":
        return Request("ping", request_id, fsname=_fsname(body, request_id))
    if op == "report":
        return Request("report", request_id, fsname=_fsname(body, request_id),
                       report=_shadow_report(body, request_id))
    create, fsname, owner = alloc_fields(body, request_id, ost_count)
    return Request("alloc", request_id, create, fsname, owner=owner)


def alloc_fields(body: dict[Any, Any], request_id: int, ost_count: int | None = None
                 ) -> tuple[CreateRequest, str | None, Owner | None]:
    """The create an ``alloc`` (v1) or ``lease`` (v2) body describes, its ``fsname`` and
    its owner ids, every field checked.

    Raises:
        WireError: EINVAL naming the first field that is missing, mistyped or out of range.
    """
    job = _job(body, request_id)
    stripe_count = _int(body, "stripe_count", request_id)
    if stripe_count == 0 or stripe_count < -1:
        raise WireError(errno.EINVAL, f"stripe_count {stripe_count} (must be >= 1, or -1 for "
                        f"all OSTs)", request_id)
    if ost_count is not None and stripe_count > ost_count:
        raise WireError(errno.EINVAL, f"stripe_count {stripe_count} exceeds the {ost_count} "
                        f"OSTs", request_id)
    stripe_size = _int(body, "stripe_size", request_id)
    if stripe_size <= 0 or stripe_size % STRIPE_SIZE_UNIT_BYTES or stripe_size > MAX_STRIPE_SIZE:
        raise WireError(errno.EINVAL, f"stripe_size {stripe_size} is not a positive multiple of "
                        f"{STRIPE_SIZE_UNIT_BYTES} below 4 GiB", request_id)
    expected = body.get("expected_bytes", 0)
    if expected is None:
        expected = 0
    if not _is_int(expected):
        raise WireError(errno.EINVAL, "field 'expected_bytes' must be an integer, not "
                        f"{type(expected).__name__}", request_id)
    if not 0 <= expected <= MAX_EXPECTED_BYTES:
        raise WireError(errno.EINVAL, f"expected_bytes {expected} outside 0..2^63-1", request_id)
    path = _text(body, "path", request_id, required=False)
    pool = body.get("pool")
    if pool is not None:
        if not isinstance(pool, str):
            raise WireError(errno.EINVAL, "field 'pool' must be a string or nil, not "
                            f"{type(pool).__name__}", request_id)
        if len(pool.encode()) > MAX_POOL_NAME:
            raise WireError(errno.EINVAL, f"pool name of {len(pool.encode())} bytes exceeds "
                            f"LOV_MAXPOOLNAME ({MAX_POOL_NAME})", request_id)
        pool = pool or None  # "" = no pool, as lfs setstripe -p ""
    fsname = _fsname(body, request_id)
    ids = []
    for key in ("uid", "gid", "projid"):
        v = body.get(key)
        if v is not None and (not _is_int(v) or not 0 <= v <= MAX_ID32):
            raise WireError(errno.EINVAL, f"field {key!r} must be an integer 0..2^32-1",
                            request_id)
        ids.append(v)
    return (CreateRequest(jobid=job, stripe_count=stripe_count, stripe_size=stripe_size,
                          expected_bytes=expected, pool=pool, path=path), fsname,
            None if ids == [None, None, None] else Owner(*ids))


def _shadow_report(body: dict[Any, Any], request_id: int) -> ShadowReport:
    token = _int(body, "shadow", request_id)
    if not 0 < token <= MAX_ID:
        raise WireError(errno.EINVAL, "field 'shadow' must be a token 1..2^64-1", request_id)
    osts = body.get("osts")
    if (not isinstance(osts, list) or not 0 < len(osts) <= MAX_STRIPES
            or not all(_is_int(i) and 0 <= i <= MAX_OST_INDEX for i in osts)):
        raise WireError(errno.EINVAL, f"field 'osts' must list 1..{MAX_STRIPES} OST indices "
                        f"0..{MAX_OST_INDEX}", request_id)
    if len(set(osts)) != len(osts):
        raise WireError(errno.EINVAL, "field 'osts' names an OST twice", request_id)
    stripe_size = _int(body, "stripe_size", request_id)
    if stripe_size <= 0 or stripe_size % STRIPE_SIZE_UNIT_BYTES or stripe_size > MAX_STRIPE_SIZE:
        raise WireError(errno.EINVAL, f"stripe_size {stripe_size} is not a positive multiple of "
                        f"{STRIPE_SIZE_UNIT_BYTES} below 4 GiB", request_id)
    return ShadowReport(token, tuple(osts), stripe_size)


_local = threading.local()


def _pack(body: dict[str, Any]) -> bytes:
    # one Packer per thread, reused (msgpack.packb builds one per call)
    try:
        packer = _local.packer
    except AttributeError:
        packer = _local.packer = msgpack.Packer(use_bin_type=True)
    return packer.pack(body)


def encode_placement(request_id: int, osts: tuple[int, ...] | list[int], stripe_size: int,
                     policy: str, fallback: str = "") -> bytes:
    """Reply body of a layout: ``{v, id, ok: true, osts, stripe_size, policy, fallback}``."""
    return _pack({"v": PROTOCOL_VERSION, "id": request_id, "ok": True,
                         "osts": osts, "stripe_size": stripe_size, "policy": policy,
                         "fallback": fallback})


def encode_error(request_id: int, err: int, reason: str) -> bytes:
    """Reply body of an error: ``{v, id, ok: false, errno, error}``."""
    return _pack({"v": PROTOCOL_VERSION, "id": request_id, "ok": False, "errno": err,
                         "error": reason})


def encode_shadow(request_id: int, token: int, osts: tuple[int, ...] | list[int],
                  policy: str) -> bytes:
    """Reply body of a shadow decision: an error reply to every v1 client (``errno``
    EPERM: the file goes to Lustre's allocator) with ``shadow`` (the token to report
    Lustre's layout under), ``osts`` and ``policy`` (what the mapper would have chosen)."""
    return _pack({"v": PROTOCOL_VERSION, "id": request_id, "ok": False, "errno": errno.EPERM,
                  "error": "shadow mode: use Lustre's allocator and report its layout",
                  "shadow": token, "osts": osts, "policy": policy})


def encode_reported(request_id: int, result: str) -> bytes:
    """Reply body of a shadow report: ``{v, id, ok: true, op: "reported", result}``
    (``result``: ``ok``, ``unknown`` or ``duplicate``)."""
    return _pack({"v": PROTOCOL_VERSION, "id": request_id, "ok": True, "op": "reported",
                  "result": result})


def encode_pong(request_id: int, policy: str, fsname: str = "",
                version: int = PROTOCOL_VERSION) -> bytes:
    """Reply body of a ping: ``{v, id, ok: true, op: "pong", policy, fsname}``: the policy
    of the file system the ping named (or of the mapper's only or first one), and that
    file system's name ("" before its first sample); ``v`` is the ping's own version (a
    v2 pong says the mapper leases)."""
    return _pack({"v": version, "id": request_id, "ok": True, "op": "pong",
                  "policy": policy, "fsname": fsname})


def encode_request(request_id: int, job: str, stripe_count: int, stripe_size: int,
                   expected_bytes: int = 0, path: str = "", pool: str | None = None,
                   op: str = "alloc", fsname: str | None = None,
                   owner: Owner | None = None) -> bytes:
    """Request body as a client sends it (used by :mod:`lustre_alloc.mapper.service.client` and tests)."""
    if op == "ping":
        ping: dict[str, Any] = {"v": PROTOCOL_VERSION, "op": "ping", "id": request_id}
        if fsname is not None:
            ping["fsname"] = fsname
        return _pack(ping)
    return _pack(create_body(PROTOCOL_VERSION, op, request_id, job, stripe_count, stripe_size,
                             expected_bytes, path, pool, fsname, owner))


def create_body(version: int, op: str, request_id: int, job: str, stripe_count: int,
                stripe_size: int, expected_bytes: int, path: str, pool: str | None,
                fsname: str | None, owner: Owner | None) -> dict[str, Any]:
    """The map of an ``alloc`` (v1) or ``lease`` (v2) request as a client sends it."""
    body: dict[str, Any] = {"v": version, "op": op, "id": request_id, "job": job,
                            "stripe_count": stripe_count, "stripe_size": stripe_size,
                            "expected_bytes": expected_bytes, "path": path}
    if pool is not None:
        body["pool"] = pool
    if fsname is not None:
        body["fsname"] = fsname
    if owner is not None:
        body.update({k: v for k, v in (("uid", owner.uid), ("gid", owner.gid),
                                       ("projid", owner.projid)) if v is not None})
    return body


def encode_report(request_id: int, token: int, osts: list[int], stripe_size: int,
                  fsname: str | None = None) -> bytes:
    """A shadow report as the shim sends it: Lustre's layout for the decision ``token``."""
    body: dict[str, Any] = {"v": PROTOCOL_VERSION, "op": "report", "id": request_id,
                            "shadow": token, "osts": osts, "stripe_size": stripe_size}
    if fsname is not None:
        body["fsname"] = fsname
    return _pack(body)


def decode_reply(frame: bytes) -> dict[str, Any]:
    """Parse a reply body (client side).

    Raises:
        WireError: EPROTO when the body is not a map with ``v``, ``id`` and ``ok``.
    """
    try:
        body = msgpack.unpackb(frame, raw=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise WireError(errno.EPROTO, f"reply is not msgpack: {exc}") from None
    if not isinstance(body, dict) or not {"v", "id", "ok"} <= body.keys():
        raise WireError(errno.EPROTO, "reply is not a map with v, id and ok")
    return body


# ---------------------------------------------------------------------- version 2: leases
MAX_LEASE_ASK = (1 << 32) - 1
"""Most layouts one lease request may ask for (the grant is bounded by the mapper)."""
MAX_RELEASES = 1024
"""Most leases one ``release`` names."""
MAX_LEASE_USED = 1 << 16
"""A lease holds fewer layouts than this; a larger ``used`` is a malformed release."""
MAX_RELEASE_FILES = 1024
"""Most files one ``release`` names."""
NAME_MAX = 255
"""Longest file name, bytes (Linux ``NAME_MAX``, ``<linux/limits.h>``)."""
MAX_SIZES = 1024
"""Most file sizes one ``sizes`` message carries."""
MAX_FILE_BYTES = (1 << 63) - 1
"""Largest file size a ``sizes`` message may name (``off_t``)."""
OPS_V2 = ("lease", "release", "ping", "alloc", "sizes")


def decode_v2(body: dict[Any, Any], request_id: int, ost_count: int | None = None) -> Request:
    """A v2 request body (``v`` already read as 2, ``id`` checked; ``ost_count`` as
    :func:`decode_request` takes it).

    A v2 ``alloc`` is a composite (PFL) layout request (:func:`decode_composite`).

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
    if op == "sizes":
        return _sizes(body, request_id)
    if op == "release":
        released, files = _released(body, request_id), _files(body, request_id)
        if not released and not files:
            raise WireError(errno.EINVAL, "a release names no lease and no file", request_id)
        return Request("release", request_id, fsname=_fsname(body, request_id),
                       version=LEASE_VERSION, released=released, files=files)
    count = _int(body, "count", request_id)
    if not 1 <= count <= MAX_LEASE_ASK:
        raise WireError(errno.EINVAL, f"count {count} outside 1..{MAX_LEASE_ASK}", request_id)
    create, fsname, owner = alloc_fields(body, request_id, ost_count)
    return Request("lease", request_id, create, fsname, owner=owner, version=LEASE_VERSION,
                   lease_count=count)


def _released(body: dict[Any, Any], request_id: int) -> tuple[tuple[int, int], ...]:
    leases = body.get("leases")
    if not isinstance(leases, list) or len(leases) > MAX_RELEASES:
        raise WireError(errno.EINVAL, f"field 'leases' must list 0..{MAX_RELEASES} "
                        f"[lease, used] pairs", request_id)
    out = []
    for pair in leases:
        if (not isinstance(pair, list) or len(pair) != 2 or not all(map(_is_int, pair))
                or not 0 < pair[0] <= MAX_ID or not 0 <= pair[1] < MAX_LEASE_USED):
            raise WireError(errno.EINVAL, f"field 'leases' holds {pair!r}"[:120] + ", not a "
                            f"[lease 1..2^64-1, used 0..{MAX_LEASE_USED - 1}] pair", request_id)
        out.append((pair[0], pair[1]))
    return tuple(out)


def _job(body: dict[Any, Any], request_id: int) -> str:
    """The ``job`` field: a non-empty string of at most :data:`MAX_JOB_BYTES` bytes."""
    job = _text(body, "job", request_id, required=True)
    if not job:
        raise WireError(errno.EINVAL, "field 'job' is empty", request_id)
    if len(job.encode("utf-8", "surrogateescape")) > MAX_JOB_BYTES:
        raise WireError(errno.EINVAL, f"field 'job' of {len(job.encode('utf-8', 'surrogateescape'))}"
                        f" bytes exceeds {MAX_JOB_BYTES} (the shim's limit)", request_id)
    return job


def _sizes(body: dict[Any, Any], request_id: int) -> Request:
    """A ``sizes`` message: ``{v: 2, op: "sizes", id, job, sizes: [bytes, ...], fsname?}``."""
    job = _job(body, request_id)
    sizes = body.get("sizes")
    if (not isinstance(sizes, list) or not 0 < len(sizes) <= MAX_SIZES
            or not all(_is_int(x) and 0 <= x <= MAX_FILE_BYTES for x in sizes)):
        raise WireError(errno.EINVAL, f"field 'sizes' must list 1..{MAX_SIZES} file sizes "
                        f"(integers 0..2^63-1, bytes)", request_id)
    return Request("sizes", request_id, fsname=_fsname(body, request_id),
                   version=LEASE_VERSION, job=job, sizes=tuple(sizes))


def _is_file_name(name: Any) -> bool:
    """One path component: not empty, ``.`` or ``..``, no ``/`` or NUL, at most
    :data:`NAME_MAX` bytes."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\0" not in name and len(name.encode("utf-8", "surrogateescape")) <= NAME_MAX)


def _files(body: dict[Any, Any], request_id: int) -> tuple[tuple[int, int, str], ...]:
    files = body.get("files", [])
    if not isinstance(files, list) or len(files) > MAX_RELEASE_FILES:
        raise WireError(errno.EINVAL, f"field 'files' must list 0..{MAX_RELEASE_FILES} "
                        f"[lease, index, name] triples", request_id)
    out = []
    for f in files:
        if (not isinstance(f, list) or len(f) != 3 or not all(map(_is_int, f[:2]))
                or not 0 < f[0] <= MAX_ID or not 0 <= f[1] < MAX_LEASE_USED
                or not _is_file_name(f[2])):
            raise WireError(errno.EINVAL, f"field 'files' holds {f!r}"[:120] + ", not a "
                            f"[lease 1..2^64-1, index 0..{MAX_LEASE_USED - 1}, file name] "
                            "triple", request_id)
        out.append((f[0], f[1], f[2]))
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
                       per_create: bool = False, retry_ms: int = 0,
                       allocator: str = "") -> bytes:
    """Reply body of a refused lease: ``{v: 2, id, ok: false, errno, error, revoke}``, with
    ``per_create: true`` when the class must ask per create with v1 ``alloc`` (shadow
    mode: each file's decision has its own report token), ``retry_ms`` when the
    client should not ask for this class again for that long (outside the scope, or left
    to Lustre) and ``allocator: "lustre"`` when the mapper leaves the class's creates to
    Lustre's own allocator for ``retry_ms`` (the OSTs look alike)."""
    body: dict[str, Any] = {"v": LEASE_VERSION, "id": request_id, "ok": False, "errno": err,
                            "error": reason, "revoke": list(revoke)}
    if per_create:
        body["per_create"] = True
    if retry_ms:
        body["retry_ms"] = retry_ms
    if allocator:
        body["allocator"] = allocator
    return _pack(body)


def encode_released(request_id: int, results: Sequence[str]) -> bytes:
    """Reply body of a release: ``{v: 2, id, ok: true, op: "released", results}``, one of
    ``ok`` / ``unknown`` per lease named (``unknown``: expired, revoked and returned
    already, or never this client's)."""
    return _pack({"v": LEASE_VERSION, "id": request_id, "ok": True, "op": "released",
                  "results": list(results)})


def encode_sized(request_id: int, learned: int) -> bytes:
    """Reply body of a ``sizes`` message: ``{v: 2, id, ok: true, op: "sized", learned}``,
    ``learned`` the sizes the policy took (0 when it learns none)."""
    return _pack({"v": LEASE_VERSION, "id": request_id, "ok": True, "op": "sized",
                  "learned": learned})


# ---------------------------------------------------------------------- client side
def encode_lease_request(request_id: int, count: int, job: str, stripe_count: int,
                         stripe_size: int, expected_bytes: int = 0, path: str = "",
                         pool: str | None = None, fsname: str | None = None,
                         owner: Owner | None = None) -> bytes:
    """A lease request as a client sends it (``path``: the directory the files go to)."""
    body = create_body(LEASE_VERSION, "lease", request_id, job, stripe_count, stripe_size,
                            expected_bytes, path, pool, fsname, owner)
    body["count"] = count
    return _pack(body)


def encode_sizes_request(request_id: int, job: str, sizes: Sequence[int],
                         fsname: str | None = None) -> bytes:
    """A ``sizes`` message as a client sends it: ``job``'s files' sizes at close, bytes."""
    body: dict[str, Any] = {"v": LEASE_VERSION, "op": "sizes", "id": request_id, "job": job,
                            "sizes": list(sizes)}
    if fsname is not None:
        body["fsname"] = fsname
    return _pack(body)


def encode_release_request(request_id: int, leases: Sequence[tuple[int, int]],
                           fsname: str | None = None,
                           files: Sequence[tuple[int, int, str]] = ()) -> bytes:
    """A release as a client sends it: (lease id, layouts used) pairs, and the
    (lease id, layout index, file name) of each file created with a leased layout."""
    body: dict[str, Any] = {"v": LEASE_VERSION, "op": "release", "id": request_id,
                            "leases": [list(p) for p in leases]}
    if files:
        body["files"] = [list(f) for f in files]
    if fsname is not None:
        body["fsname"] = fsname
    return _pack(body)


# ---------------------------------------------------------------------- version 2: composite layouts
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
        a :class:`Request` with op ``"alloc"``, ``version`` 2,
        ``components`` (one :class:`~lustre_alloc.mapper.policies.placement.CreateRequest` per component, its ``expected_bytes``
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


@dataclass(frozen=True, slots=True)
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
