"""The request path's intake: decode each message, name its client, route it to its file
system and apply the client bounds, before any round runs.

Bad requests are answered here at once (one error reply each, the loop keeps serving),
pings with a pong naming the file system's policy; what is left is grouped per file system
for :meth:`lustre_alloc.mapper.service.server.Rounds.run`.
"""
from __future__ import annotations

import dataclasses
import errno
import logging
from typing import Any

import zmq

from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.service import wire
from lustre_alloc.mapper.service.config import MapperConfig
from lustre_alloc.mapper.service.fs_context import FsContext
from lustre_alloc.mapper.service.limits import PeerLimits, peer_of
from lustre_alloc.mapper.service.scope import SHADOW
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot

log = logging.getLogger("lustre_alloc.mapper.service.intake")

MAX_PEERS_CACHED = 100_000
"""Routing ids whose client name is remembered (the cache is cleared beyond)."""

Message = tuple[bytes, list[bytes], str]
"""(routing id, frames after it, client name)."""
Alloc = tuple[bytes, wire.Request, str]
"""(routing id, decoded request, client name)."""


@dataclasses.dataclass
class Sorted:
    """One batch after intake: replies to send now, allocation requests per file system
    key, shadow reports, and how many replies were errors and pongs."""
    replies: list[tuple[bytes, bytes]]
    allocs: dict[str, list[Alloc]]
    reports: list[tuple[bytes, wire.Request]] = dataclasses.field(default_factory=list)
    leases: dict[str, list[Alloc]] = dataclasses.field(default_factory=dict)
    """Lease requests (protocol v2) per file system key."""
    releases: list[Alloc] = dataclasses.field(default_factory=list)
    sizes: dict[str, list[Alloc]] = dataclasses.field(default_factory=dict)
    """File sizes at close (protocol v2) per file system key."""
    bad: int = 0
    pings: int = 0
    out_of_scope: int = 0


class Intake:
    """Decoding, client names, routing and client bounds of the request loop.

    Args:
        config: the service's configuration (batch and peer limits).
        limits: the per-client bounds (:mod:`lustre_alloc.mapper.service.limits`).
        contexts: file system key -> its context, in configuration order.
    """

    def __init__(self, config: MapperConfig, limits: PeerLimits, contexts: dict[str, FsContext]):
        self.config = config
        self.limits = limits
        self.contexts = contexts
        self.scope = config.scope_rules()
        """Which requests are placed (:mod:`lustre_alloc.mapper.service.scope`; a reload replaces it)."""
        self._peers: dict[bytes, str] = {}


    def mode(self, fsname: str) -> str:
        """The scope mode in force for ``fsname`` (``place``, ``shadow`` or ``off``): read
        from the scope a reload last set, so every part of the service sees the same one."""
        return self.scope.mode(fsname)

    def peer(self, identity: bytes, frame: Any) -> str:
        """The client behind a message (:func:`lustre_alloc.mapper.service.limits.peer_of`), cached per
        routing id; ``frame`` (a part of the message, received as a Frame) carries the
        ``User-Id``/``Peer-Address`` properties read for a routing id not seen yet."""
        peer = self._peers.get(identity)
        if peer is None:
            props = []
            for name in ("User-Id", "Peer-Address"):
                try:
                    props.append(frame.get(name))
                except (zmq.ZMQError, AttributeError):
                    props.append(None)
            peer = peer_of(props[0], props[1], identity)
            if len(self._peers) > MAX_PEERS_CACHED:
                self._peers.clear()
            self._peers[identity] = peer
        return peer

    def context_for(self, req: wire.Request) -> FsContext:
        """The file system serving ``req``.

        Raises:
            wire.WireError: ENODEV for a file system this mapper does not serve; EINVAL when
                it serves several and an allocation names none.
        """
        contexts = self.contexts
        if req.fsname is None:
            if len(contexts) == 1 or req.op not in ("alloc", "lease", "sizes"):
                return next(iter(contexts.values()))
            raise wire.WireError(errno.EINVAL, f"field 'fsname' is required: this mapper serves "
                                 f"{', '.join(contexts)}", req.id)
        for ctx in contexts.values():
            if req.fsname == ctx.fsname:
                return ctx
        served = ", ".join(c.fsname or "(none yet)" for c in contexts.values())
        raise wire.WireError(errno.ENODEV, f"file system {req.fsname!r} is not served by this "
                             f"mapper (serves: {served})", req.id)

    def sort(self, messages: list[Message]) -> Sorted:
        """Decode and check a batch (hot path: one call per batch)."""
        cfg = self.config
        out = Sorted([], {})
        replies = out.replies
        in_batch: dict[str, int] = {}
        contexts = self.contexts
        only = next(iter(contexts.values())) if len(contexts) == 1 else None
        ost_counts = {key: ctx.store.ost_count for key, ctx in contexts.items()}  # fixed for the batch
        decode = wire.decode_request     # v1 and v2
        admit = self.limits.admit
        for identity, parts, peer in messages:
            if len(parts) != 2 or parts[0] != b"":
                replies.append((identity, wire.encode_error(
                    0, errno.EPROTO, f"expected frames [empty delimiter, body], got "
                    f"{len(parts)} frame(s) after the routing id")))
                out.bad += 1
                continue
            try:
                req = decode(parts[1])
                ctx = only if only is not None and req.fsname is None else self.context_for(req)
                create = req.create
                if create is not None:
                    ost_count = ost_counts[ctx.key]
                    for one in req.components or (create,):
                        if ost_count and one.stripe_count > ost_count:
                            raise wire.WireError(errno.EINVAL, f"stripe_count {one.stripe_count} "
                                                 f"exceeds the {ost_count} OSTs", req.id)
            except wire.WireError as exc:
                replies.append((identity, wire.encode_error(exc.request_id, exc.errno,
                                                            exc.reason)))
                out.bad += 1
                log.debug("bad request", extra={"event": "bad_request", "errno": exc.errno,
                                                "reason": exc.reason})
                continue
            if not admit(peer):
                replies.append((identity, wire.encode_error(
                    req.id, errno.EBUSY, f"rate limit: over {cfg.peer_requests_per_s:g} "
                    f"requests/s from {peer}; use Lustre's allocator")))
                out.bad += 1
                continue
            # one client's pipelined burst must not make everyone's round long
            n = in_batch[peer] = in_batch.get(peer, 0) + 1
            if n > cfg.peer_batch_max and req.op != "ping":
                self.limits.rate_limited += 1
                replies.append((identity, wire.encode_error(
                    req.id, errno.EBUSY, f"rate limit: over {cfg.peer_batch_max} requests "
                    f"in one round from {peer}; use Lustre's allocator")))
                out.bad += 1
                continue
            op = req.op
            if op == "ping":
                replies.append((identity, wire.encode_pong(req.id, ctx.gate.name, ctx.fsname,
                                                           req.version)))
                out.pings += 1
            elif op == "report":
                out.reports.append((identity, req))     # tokens are the service's, not a fs's
            elif op == "release":
                out.releases.append((identity, req, peer))   # lease ids are the service's
            elif op == "sizes":
                out.sizes.setdefault(ctx.key, []).append((identity, req, peer))
            elif (why := self._outside_scope(ctx, req)) is not None:
                reason = f"outside the placement scope: {why}; use Lustre's allocator"
                replies.append((identity, wire.encode_error(req.id, errno.EPERM, reason)
                                if op == "alloc" else wire.encode_lease_error(
                                    req.id, errno.EPERM, reason,
                                    retry_ms=int(cfg.layout_lease_s * 1000))))
                out.out_of_scope += 1
            elif ost_counts[ctx.key] == 0:
                reason = "no cluster state yet (no collector sample)"
                replies.append((identity, wire.encode_error(req.id, errno.EAGAIN, reason)
                                if op == "alloc" else wire.encode_lease_error(
                                    req.id, errno.EAGAIN, reason)))
                out.bad += 1
            else:
                by_fs = out.allocs if op == "alloc" else out.leases
                group = by_fs.get(ctx.key)
                if group is None:
                    group = by_fs[ctx.key] = []
                group.append((identity, req, peer))
        return out

    def _outside_scope(self, ctx: FsContext, req: wire.Request) -> str | None:
        """Why the scope leaves ``req`` to Lustre (every component of a composite layout
        must be in scope: a pool rule may cover one and not another), else None. Shadow
        mode leaves composite layouts to Lustre too: the shadow report reads back plain
        layouts only."""
        create = req.create_request()
        why = self.scope.why_not
        for one in req.components or (create,):
            reason = why(ctx.fsname, one.path, one.pool, one.jobid, req.owner)
            if reason is not None:
                return reason
        if req.components and self.scope.mode(ctx.fsname) == SHADOW:
            return "shadow mode compares plain layouts only (composite layouts are not placed)"
        return None

    def bounded(self, ctx: FsContext, snap: ClusterSnapshot, version: int,
                creates: list[CreateRequest], peers: list[str]) -> list[CreateRequest]:
        """The requests the policy gets: each create with its jobid and expected bytes
        bounded (:mod:`lustre_alloc.mapper.service.limits`); a create itself when neither changes."""
        tracked = ctx.tracked()
        clip = ctx.clip.clip
        out: list[CreateRequest] = []
        if tracked is None:
            # every jobid counts as its own (job_for keeps it): only expected_bytes may change
            for create in creates:
                expected = clip(snap, version, create.pool, create.expected_bytes)
                out.append(create if expected == create.expected_bytes else
                           dataclasses.replace(create, expected_bytes=expected))
            return out
        job_for = self.limits.job_for
        for create, peer in zip(creates, peers):
            job = job_for(peer, create.jobid, tracked)
            expected = clip(snap, version, create.pool, create.expected_bytes)
            out.append(create if job == create.jobid and expected == create.expected_bytes
                       else dataclasses.replace(create, jobid=job, expected_bytes=expected))
        return out


__all__ = ["Alloc", "Intake", "Message", "Sorted"]
