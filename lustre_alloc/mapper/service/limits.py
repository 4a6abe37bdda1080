"""Bounds on what one client (peer) can make the mapper do.

A peer is the CURVE public key the client authenticated with (ZAP ``User-Id``, Z85) when the
request socket is a CURVE server, else the client's IP address (``Peer-Address``): a client
that reconnects keeps its identity either way. The rules (numbers are configuration,
``MapperConfig.peer_*``):

* **Request rate**: a token bucket per peer (``peer_requests_per_s`` sustained,
  ``PEER_BURST_S`` seconds of it at once). A request over it is answered at once with ``EBUSY``
  ("rate limit ..."); the shim then uses Lustre's allocator for that create.
* **New applications**: a job id the predictor does not track is a new application. Each peer
  may introduce ``peer_new_apps_per_min`` per minute (a bucket refilled over 60 s) and own at
  most ``peer_max_apps`` tracked applications. Past either limit, its requests are still
  placed, but learned under one shared per-peer id (``overflow:<peer>``), so one peer can hold
  at most ``peer_max_apps`` + 1 of the predictor's slots: evicting other jobs' learned state
  (LRU at ``max_apps``) then takes several peers, never a single one.
* **expected_bytes** is clipped to the free space (``kbytes_avail``) of the usable OSTs of the
  request's pool: no file can be larger, and a self-declared 2^63-1 must not weigh on others'
  placements (:class:`ExpectedBytesClip`).

Memory: per-peer state is dropped after ``IDLE_FORGET_S`` without requests; at most
``MAX_PEERS`` peers are tracked (the oldest idle first).
"""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import is_usable, pool_members
from lustre_alloc.mapper.policies.placement import InvalidRequestError

IDLE_FORGET_S = 600.0
MAX_PEERS = 65_536


def peer_of(user_id: str | None, address: str | None, routing_id: bytes) -> str:
    """The peer key: CURVE key, else IP address, else the routing id (in-process sockets)."""
    if user_id:
        return "key:" + user_id
    if address:
        return "ip:" + address
    return "id:" + routing_id.hex()


def overflow_job(peer: str) -> str:
    """The shared job id a peer's applications are learned under past its limits."""
    return "overflow:" + hashlib.blake2s(peer.encode(), digest_size=6).hexdigest()


@dataclass(slots=True)
class _Peer:
    tokens: float
    new_app_tokens: float
    last_s: float
    apps: set[str] = field(default_factory=set)


class PeerLimits:
    """Per-peer request rate and new-application budget.

    Args:
        requests_per_s, request_burst: request token bucket (0 = no rate limit).
        new_apps_per_min: new applications a peer may introduce per minute.
        max_apps: tracked applications a peer may own at once.
        clock: monotonic seconds.
    """

    def __init__(self, requests_per_s: float, request_burst: int, new_apps_per_min: int,
                 max_apps: int, clock: Callable[[], float] = time.monotonic):
        self.requests_per_s = requests_per_s
        self.request_burst = max(1, request_burst)
        self.new_apps_per_min = new_apps_per_min
        self.max_apps = max_apps
        self.clock = clock
        self._peers: OrderedDict[str, _Peer] = OrderedDict()
        self._last: str | None = None
        """The peer at the end of ``_peers`` (most recently seen), when known."""
        self.rate_limited = 0
        self.overflowed = 0

    def _peer(self, peer: str, now: float) -> _Peer:
        p = self._peers.get(peer)
        if p is None:
            p = _Peer(float(self.request_burst), float(self.new_apps_per_min), now)
            self._peers[peer] = p
            self._last = peer
            self._forget_idle(now)
        else:
            dt = max(0.0, now - p.last_s)
            p.tokens = min(float(self.request_burst), p.tokens + dt * self.requests_per_s)
            p.new_app_tokens = min(float(self.new_apps_per_min),
                                   p.new_app_tokens + dt * self.new_apps_per_min / 60.0)
            p.last_s = now
            if peer != self._last:                  # already the newest: nothing to move
                self._peers.move_to_end(peer)
                self._last = peer
        return p

    def _forget_idle(self, now: float) -> None:
        while self._peers:
            name, oldest = next(iter(self._peers.items()))
            if now - oldest.last_s < IDLE_FORGET_S and len(self._peers) <= MAX_PEERS:
                break
            del self._peers[name]
            if name == self._last:
                self._last = None

    def admit(self, peer: str) -> bool:
        """Take one request token; False (and counted) when the peer is over its rate."""
        p = self._peer(peer, self.clock())
        if self.requests_per_s <= 0:
            return True
        if p.tokens < 1.0:
            self.rate_limited += 1
            return False
        p.tokens -= 1.0
        return True

    def job_for(self, peer: str, job: str, tracked: Callable[[str], bool]) -> str:
        """The job id to learn ``job`` under: itself when the predictor already tracks it or
        the peer is within its new-application limits, else :func:`overflow_job`."""
        if tracked(job):
            return job
        p = self._peer(peer, self.clock())
        if job in p.apps:
            # admitted already; the predictor learns it later, off the request path
            # (the planner's thread), and until then it must not cost another token
            return job
        if len(p.apps) >= self.max_apps:          # forget apps the predictor has evicted
            p.apps = {j for j in p.apps if tracked(j)}
        if p.new_app_tokens >= 1.0 and len(p.apps) < self.max_apps:
            p.new_app_tokens -= 1.0
            p.apps.add(job)
            return job
        self.overflowed += 1
        return overflow_job(peer)


class ExpectedBytesClip:
    """``expected_bytes`` clipped to the pool's free space: the sum of ``kbytes_avail`` x 1024
    over the pool's usable OSTs (all OSTs without a pool), cached per state version."""

    def __init__(self) -> None:
        self._version = -1
        self._free: dict[str | None, int] = {}
        self.clipped = 0

    def clip(self, snapshot: ClusterSnapshot, version: int, pool: str | None,
             expected_bytes: int) -> int:
        try:
            free = self._free_bytes(snapshot, version, pool)
        except InvalidRequestError:
            return expected_bytes          # the policy answers EINVAL for the pool
        if expected_bytes > free:
            self.clipped += 1
            return free
        return expected_bytes

    def prepare(self, snapshot: ClusterSnapshot, version: int) -> None:
        """Sum the free space of the file system and of each pool at ``version``."""
        for pool in (None, *snapshot.pools):
            try:
                self._free_bytes(snapshot, version, pool)
            except InvalidRequestError:
                pass

    def _free_bytes(self, snapshot: ClusterSnapshot, version: int, pool: str | None) -> int:
        """Bytes free on ``pool``'s usable OSTs at ``version`` (cached); InvalidRequestError
        for an unknown pool."""
        if version != self._version:
            self._free.clear()
            self._version = version
        free = self._free.get(pool)
        if free is None:
            members = pool_members(snapshot, pool)
            free = self._free[pool] = sum(o.kbytes_avail for o in members if is_usable(o)) * 1024
        return free
