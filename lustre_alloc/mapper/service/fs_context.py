"""One file system served by the mapper, in one object: its state store, its gated policy
(with its learned state and state file), its last-line placement guard, its expected-bytes
clip and its background planner.

State is keyed by (fsname, OST index), and a job's pattern on one file system says nothing
about the OSTs of another, so everything here is per file system; the service holds one
:class:`FsContext` per ``fsname`` it serves (parallel dicts with "first file system"
aliases made a ping report the first file system's policy and the MDS CPU gauge
last-writer-wins).
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, Sequence, cast

from lustre_alloc.mapper.policies import registry
from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.policies.placement import (BooksPlacements, CreateRequest, InvalidRequestError,
                                       ReusesLeasedLists,
                                       PlacementCheckError, PlansAhead)
from lustre_alloc.mapper.policies.registry import PolicyParamError, UnknownPolicyError
from lustre_alloc.mapper.service.config import MapperConfig
from lustre_alloc.mapper.service.limits import ExpectedBytesClip
from lustre_alloc.mapper.service.background_planner import BackgroundPlanner
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import check_placement, is_usable, pool_members
from lustre_alloc.mapper.state.state_store import StateStore

log = logging.getLogger("lustre_alloc.mapper.service.fs_context")


class FsContextError(Exception):
    """A file system's policy cannot be built (bad name or parameter)."""


class PlacementGuard:
    """The last line of defence: :func:`~lustre_alloc.mapper.state.ost_health.check_placement`'s rules with
    the allowed set (usable OSTs of the pool) cached per state version and pool, so a
    check costs O(stripes) instead of O(OSTs). On failure the full ``check_placement``
    runs to name the violation."""

    def __init__(self) -> None:
        self._version = -1
        self._allowed: dict[str | None, frozenset[int]] = {}

    def violation(self, snapshot: ClusterSnapshot, version: int, osts: Sequence[int],
                  pool: str | None) -> str | None:
        """None when ``osts`` is a valid answer, else why not."""
        try:
            allowed = self._allowed_set(snapshot, version, pool)
        except InvalidRequestError as exc:
            return exc.reason
        if osts and len(set(osts)) == len(osts) and allowed.issuperset(osts):
            return None
        if not osts:
            return "empty OST list"
        try:
            check_placement(snapshot, osts, pool)
        except PlacementCheckError as exc:
            return exc.reason
        return "placement check disagrees with the cached usable set"  # not reached

    def prepare(self, snapshot: ClusterSnapshot, version: int) -> None:
        """Cache the usable set of the file system and of each pool at ``version``."""
        for pool in (None, *snapshot.pools):
            try:
                self._allowed_set(snapshot, version, pool)
            except InvalidRequestError:
                pass            # an empty pool: a request naming it is refused anyway

    def _allowed_set(self, snapshot: ClusterSnapshot, version: int,
                     pool: str | None) -> frozenset[int]:
        """The usable OSTs of ``pool`` at ``version`` (cached); InvalidRequestError for an
        unknown pool."""
        if version != self._version:
            self._allowed.clear()
            self._version = version
        allowed = self._allowed.get(pool)
        if allowed is None:
            members = pool_members(snapshot, pool)
            allowed = self._allowed[pool] = frozenset(o.index for o in members if is_usable(o))
        return allowed


def gated_policy(config: MapperConfig, store: StateStore) -> GatedPolicy:
    """The gated primary/fallback pair of ``config`` for one file system, built by the one
    policy factory (:func:`lustre_alloc.mapper.policies.registry.build_policy`) with
    ``config.policy_params``; the gate reads the store's staleness.

    Raises:
        FsContextError: an unknown policy name or a bad policy parameter.
    """
    try:
        policy = registry.build_policy(
            config.policy, config.policy_params, seed=config.seed, gate=True,
            fallback=config.fallback, mds_cpu_limit_percent=config.mds_cpu_limit_percent,
            max_sample_age_s=None if store.static else store.max_age_s(),
            round_budget_s=config.round_budget_s or None, stale_source=store.stale_servers)
    except (UnknownPolicyError, PolicyParamError) as exc:
        raise FsContextError(str(exc)) from exc
    return cast(GatedPolicy, policy)    # gate=True always wraps


def state_store(config: MapperConfig, fsname: str = "") -> StateStore:
    """A static emulated cluster (``static_cluster``) or an empty store fed by samples, for
    the file system ``fsname`` (``""``: adopt the first sample's)."""
    if config.static_cluster:
        osses, per = config.static_shape()
        return StateStore.static_cluster(osses, per, config.static_kbytes_total, config.pools,
                                         fsname=fsname or "static")
    return StateStore(config.pools, lnet_capacity_bytes_per_s=config.lnet_capacity_bytes_per_s,
                      stale_after_s=config.stale_after_s, fsname=fsname)


def state_file_for(path: str, fsname: str, several: bool) -> str:
    """The learned-state file of one file system: ``path`` itself when the mapper serves one,
    else ``<stem>.<fsname><suffix>`` beside it."""
    if not path or not several:
        return path
    p = Path(path)
    return str(p.with_name(f"{p.stem}.{fsname}{p.suffix}"))


class FsContext:
    """Everything the service keeps for one file system.

    Args:
        key: the configured name (``""`` for a mapper that adopts the first sample's).
        store: its cluster state.
        gate: its gated policy.
        state_path: its learned-state file (``""``: none).
    """

    def __init__(self, key: str, store: StateStore, gate: GatedPolicy, state_path: str):
        self.key = key
        self.store = store
        self.gate = gate
        self.state_path = state_path
        self.guard = PlacementGuard()
        self.clip = ExpectedBytesClip()
        self.background_planner: BackgroundPlanner | None = None

    def prepare(self) -> ClusterSnapshot:
        """Build what the first request on the current state needs (the gated policies'
        tables, the guard's usable sets, the free space the clip compares with); the
        snapshot it used."""
        snap = self.store.current()
        version = self.store.version
        self.gate.prepare(snap)
        self.guard.prepare(snap, version)
        self.clip.prepare(snap, version)
        return snap

    @property
    def fsname(self) -> str:
        """The file system's name as the samples give it ("" before the first sample)."""
        return self.store.fsname

    @property
    def primary(self) -> Any:
        return self.gate.primary

    def unbook(self, create: CreateRequest, osts: Sequence[int]) -> None:
        """Take ``osts``, a list decided for ``create`` that never left (a refused or failed
        one) or was never used (a leased one returned or expired, a shadow decision Lustre's
        layout replaced), off the primary's books, at the bytes per stripe it was booked at
        (:meth:`CreateRequest.bytes_per_stripe`); a primary without books has nothing to
        take back. The one un-book of the service."""
        primary = self.gate.primary
        if isinstance(primary, BooksPlacements):
            primary.unbook(osts, create.bytes_per_stripe(len(osts)))

    def leaves_to_lustre(self, create: CreateRequest) -> str:
        """Why Lustre's own allocator may place ``create``'s class now, on the current
        state (:meth:`lustre_alloc.mapper.policies.gate.GatedPolicy.leaves_to_lustre`);
        "" when the mapper places it."""
        return self.gate.leaves_to_lustre(self.store.current(), create)

    def lease_returned(self, create: CreateRequest, osts: Sequence[int]) -> None:
        """Un-book ``osts``, a leased list never used (:meth:`unbook`), and give it back to
        a primary that hands such lists out again."""
        self.unbook(create, osts)
        primary = self.gate.primary
        if isinstance(primary, ReusesLeasedLists):
            primary.lease_returned(osts)

    def plan_ttl_s(self) -> float | None:
        """How long the primary's planned lists stay good, s; None when it plans nothing
        ahead."""
        primary = self.gate.primary
        plans = primary.plans if isinstance(primary, PlansAhead) else None
        return None if plans is None else float(plans.ttl_s)

    def tracked(self) -> Callable[[str], bool] | None:
        """The primary's per-jobid membership test; None when it keeps no per-jobid state
        (every jobid is then its own: the new-jobid bound has nothing to protect)."""
        primary = self.gate.primary
        return primary.tracks_jobid if isinstance(primary, PlansAhead) else None

    def predicted_load(self) -> dict[int, float]:
        """OST index -> bytes the primary placed or planned that samples do not show yet."""
        primary = self.gate.primary
        return primary.predicted_load() if isinstance(primary, BooksPlacements) else {}

    # -- the planner -----------------------------------------------------------------
    def start_planner(self, config: MapperConfig, lock: threading.Lock, registry: Any) -> None:
        """Start the background planner when the primary plans ahead and ``plan_ahead`` is
        on; with ``plan_ahead`` off, the primary plans nothing (every request is solved in
        its round)."""
        primary = self.gate.primary
        if config.plan_ahead and BackgroundPlanner.supported(self.gate):
            self.background_planner = BackgroundPlanner(self.gate, self.store, lock,
                                             process=config.plan_process,
                                             registry=registry).start()
        elif not config.plan_ahead and isinstance(primary, PlansAhead):
            primary.stop_planning()

    def stop_planner(self) -> None:
        """Stop the planner and teach the chains what it had not learned yet, so the state
        saved on the way out is complete."""
        if self.background_planner is not None:
            self.background_planner.stop()
            self.background_planner = None
        primary = self.gate.primary
        if isinstance(primary, PlansAhead):
            primary.learn()
