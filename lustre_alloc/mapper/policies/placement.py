"""The allocation policy interface: a create request in, an ordered OST list out.

Every policy (Lustre's round-robin and QOS allocators, the paper's random and MCMF
policies) implements :class:`PlacementPolicy`. The simulator and the mapper service call
policies only through this interface.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from lustre_alloc.common.lustre import DEFAULT_STRIPE_SIZE_BYTES
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.placement_errors import (AllocationError, InvalidRequestError, NoSpaceError,
                                          PlacementCheckError, QosUnavailable)

__all__ = ["AllocationError", "BatchPolicy", "BooksPlacements", "CreateRequest",
           "InvalidRequestError", "LearnsOstSpeeds", "LearnsSizes", "NoSpaceError",
           "PersistsState", "Placement", "PlacementCheckError", "PlacementPolicy",
           "LeavesToLustre", "PlansAhead", "PreparesDecisions", "QosUnavailable",
           "ReusesLeasedLists",
           "SteersLustre", "lease_order",
           "allocate_each", "decide_batch", "prepare_decisions"]


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """One file creation asking for a layout.

    Attributes:
        job_id: application identity (Lustre jobid).
        stripe_count: requested stripes; ``-1`` = every usable OST, ``0`` = default (1).
        stripe_size: bytes per stripe (multiple of 64 KiB).
        expected_bytes: bytes the application expects to write (0 if unknown).
        pool: OST pool name, or None for all OSTs.
        path: file path (informational; the mapper logs it).
    """
    jobid: str
    stripe_count: int
    stripe_size: int = 1 << 20
    expected_bytes: int = 0
    pool: str | None = None
    path: str = ""

    def bytes_per_stripe(self, count: int) -> float:
        """Bytes a placement books on each of ``count`` stripes: the expected bytes spread
        over them, else one stripe size (the file's size is unknown; 0 means Lustre's
        default stripe size, :data:`lustre_alloc.common.lustre.DEFAULT_STRIPE_SIZE_BYTES`).
        Booking and un-booking a list both use it, so they cancel exactly."""
        if self.expected_bytes > 0:
            return self.expected_bytes / count
        return float(self.stripe_size or DEFAULT_STRIPE_SIZE_BYTES)


@dataclass(frozen=True, slots=True)
class Placement:
    """A policy's decision: OST indices in stripe order, and who decided.

    ``fallback`` is empty when the primary policy decided, else the reason the
    fallback policy did (``"mds_cpu"``, ``"stale"``, ``"budget"``, ``"error"``;
    see :mod:`lustre_alloc.mapper.policies.gate`).
    """
    osts: tuple[int, ...]
    policy: str
    note: str = ""
    fallback: str = ""


@runtime_checkable
class PlacementPolicy(Protocol):
    """An OST allocation policy.

    ``allocate`` returns OST indices in stripe order, all distinct, all usable
    (see :mod:`lustre_alloc.mapper.state.ost_health`) and inside the request's pool; its length is the
    request's stripe count clipped to the usable OSTs. Raises :class:`AllocationError`
    subclasses when nothing can be allocated.
    """
    name: str

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement: ...


def allocate_each(policy: PlacementPolicy, snapshot: ClusterSnapshot,
                  requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
    """Decide a batch of requests one by one (for policies without a batch method).

    Returns one entry per request, in order: its placement, or the
    :class:`AllocationError` it raised (a bad request never spoils the batch).
    """
    out: list[Placement | AllocationError] = []
    for req in requests:
        try:
            out.append(policy.allocate(snapshot, req))
        except AllocationError as e:
            out.append(e)
    return out


class BatchPolicy:
    """Base of policies that decide in rounds: ``allocate`` is a round of one.

    Subclasses implement :meth:`allocate_batch`.
    """

    def allocate_batch(self, snapshot: ClusterSnapshot,
                       requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
        """One round: a :class:`Placement` or an :class:`AllocationError` per request."""
        raise NotImplementedError

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """One request; raises the :class:`AllocationError` the round gave it."""
        result = self.allocate_batch(snapshot, [request])[0]
        if isinstance(result, AllocationError):
            raise result
        return result


def decide_batch(policy: PlacementPolicy, snapshot: ClusterSnapshot,
                 requests: Sequence[CreateRequest]) -> list[Placement | AllocationError]:
    """A round of ``policy``: its own batch method when it decides in rounds
    (:class:`BatchPolicy`), else :func:`allocate_each`."""
    if isinstance(policy, BatchPolicy):
        return policy.allocate_batch(snapshot, requests)
    return allocate_each(policy, snapshot, requests)


# -- what the mapper service needs of a policy beyond placing -----------------
# The service asks a policy for these through the protocols below (isinstance), never by
# probing attribute names: one per capability (preparing, planning and learning, keeping
# learned state, booking what it handed out, learning OST speeds, steering Lustre).

@runtime_checkable
class PreparesDecisions(Protocol):
    """Builds, before the first request, what its first decision on a snapshot would build
    (OST tables, round-robin arrays, speed estimates): the service calls it before it binds
    the request socket, so the first create answers as fast as a later one."""

    def prepare(self, snapshot: ClusterSnapshot) -> None:
        """Build the per-snapshot state a decision on ``snapshot`` needs; decides nothing,
        moves no round-robin cursor, books nothing."""
        ...


def prepare_decisions(policy: Any, snapshot: ClusterSnapshot) -> None:
    """:meth:`PreparesDecisions.prepare` of ``policy`` when it has one; else nothing."""
    if isinstance(policy, PreparesDecisions):
        policy.prepare(snapshot)


@runtime_checkable
class PlansAhead(Protocol):
    """Plans OST lists ahead of the requests (:mod:`lustre_alloc.mapper.policies.mcmf.plan_queues`) and
    learns from the requests it answered later, in the planner's thread; keeps per-jobid
    state (the service bounds how many jobids a client may create)."""

    def learn(self, most: int | None = None) -> int:
        """Learn from at most ``most`` queued requests (None: all); how many."""
        ...

    def tracks_jobid(self, jobid: str) -> bool:
        """True when ``jobid`` already has state."""
        ...

    @property
    def plans(self) -> Any:
        """The plan queues (:class:`~lustre_alloc.mapper.policies.mcmf.plan_queues.PlanQueues`), or None
        when it plans nothing ahead."""
        ...

    def plan_in_background(self) -> None:
        """A background thread calls :meth:`plan` from now on; rounds do not."""
        ...

    def stop_planning(self) -> None:
        """Plan nothing ahead: every request is solved in its round."""
        ...

    def plan(self, snapshot: ClusterSnapshot, only: Any = None, lock: Any = None,
             solve: Any = None) -> int:
        """Refill the plan queues; the lists queued."""
        ...


@runtime_checkable
class LearnsSizes(Protocol):
    """Learns each application's file sizes from what the client reports at close (the
    shim's close reports, docs/protocol.md "Protocol v2: file sizes")."""

    def learn_sizes(self, jobid: str, sizes: Sequence[int]) -> int:
        """Learn ``jobid``'s files' sizes at close, bytes, in close order; how many taken."""
        ...


@runtime_checkable
class PersistsState(Protocol):
    """Has learned state worth keeping across restarts."""

    def save_state(self, path: str | Path) -> Path:
        """Write the learned state to ``path`` atomically."""
        ...

    def load_state(self, path: str | Path) -> int:
        """Replace the learned state with the one at ``path``; the records skipped.

        Raises:
            Exception: an unreadable file (the service moves it aside).
        """
        ...

    def learned_predictor(self) -> Any:
        """The Markov predictor holding the learned state, which the service snapshots in
        slices and writes in a writer thread (:mod:`lustre_alloc.mapper.service.persist`); None when
        the state is saved by :meth:`save_state` alone."""
        ...

    def learned_extras(self) -> dict[str, Any]:
        """Other learned state saved beside the predictor's records, as plain JSON types
        under keys of its own (copied in the loop thread at once when a background save
        begins: it must be small); empty when none."""
        ...


@runtime_checkable
class BooksPlacements(Protocol):
    """Keeps books of what it handed out (pending load), takes back what was never used,
    books what another allocator placed, and reports that load."""

    def predicted_load(self) -> dict[int, float]:
        """OST index -> bytes placed or planned that the samples do not show yet."""
        ...

    def book_observed(self, snapshot: ClusterSnapshot, osts: Sequence[int],
                      bytes_per_stripe: float, jobid: str) -> None:
        """Book a layout someone else placed (Lustre's allocator, reported in shadow mode)."""
        ...

    def unbook(self, osts: Sequence[int], bytes_per_stripe: float) -> None:
        """Take a list handed out but never used (a returned or expired lease, protocol
        v2; a shadow decision once Lustre's layout is reported) off the pending load."""
        ...


@runtime_checkable
class ReusesLeasedLists(Protocol):
    """Hands a list leased and given back unused out again (the round-robin regime,
    :mod:`lustre_alloc.mapper.policies.mcmf.returned_lists`)."""

    def lease_returned(self, osts: Sequence[int]) -> None:
        """``osts`` was leased and never used (after :meth:`BooksPlacements.unbook`)."""
        ...


@runtime_checkable
class LeavesToLustre(Protocol):
    """Says when Lustre's own allocator may place a class of creates itself: the client
    then creates without an OST list (a plain create: LOD's rotation or QOS, no layout
    from the mapper, nothing booked). The lease desk asks before it decides a lease
    (:mod:`lustre_alloc.mapper.service.leases`)."""

    def leaves_to_lustre(self, snapshot: ClusterSnapshot, request: CreateRequest) -> str:
        """Why Lustre's allocator may place ``request``'s class now ("" when the policy
        places it)."""
        ...


@runtime_checkable
class LearnsOstSpeeds(Protocol):
    """Learns each OST's speed from its samples and leaves the ones it judged stragglers
    out of its rounds (``lustre-alloc-ctl status`` and ``forget-speed``)."""

    def straggler_osts(self) -> list[int]:
        """OST indices left out of the last round as stragglers, ascending."""
        ...

    def ost_speed_ratios(self) -> dict[int, float]:
        """Each measured OST's speed estimate over the median of the measured ones."""
        ...

    def forget_ost_speeds(self, osts: Sequence[int]) -> list[int]:
        """Forget what was learned of ``osts``' speed (unmeasured until their next look);
        the indices that had an estimate, ascending."""
        ...


@runtime_checkable
class SteersLustre(Protocol):
    """Acts on Lustre from the statistics stream, not only at creates (the steering
    policy): the simulator shows it every sample and reports its action counts
    (``steer_<name>`` counters)."""

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Fold in a new sample interval's snapshot (``snapshot.time_s`` is its time)."""
        ...

    def action_counts(self) -> dict[str, int]:
        """Action name -> how many so far."""
        ...

    def steering_actions(self) -> list[dict[str, Any]]:
        """The actions in force (:meth:`lustre_alloc.mapper.steer.controller.SteerAction.as_dict`), as the
        mapper's steering loop reports them (the migration service evacuates from them)."""
        ...

    def steering_speed_ratios(self) -> dict[int, float]:
        """Each measured OST's speed estimate over the median, by the steering's own
        tracker (the migration budget's share of a slow OST is of its measured speed)."""
        ...


def lease_order(placements: Sequence[Placement], outstanding: int) -> list[Placement]:
    """The order a lease hands ``placements`` out in, granted while ``outstanding`` other
    leases are held: a client uses a prefix of its lease
    (:meth:`lustre_alloc.mapper.service.leases.LeaseBook.release`).

    Round-robin's layouts (the ``round_robin`` policy, mcmf's round-robin regime) are
    rotated by ``outstanding``: leases of consecutive rotation windows held at once would
    otherwise start every process on the same OSTs (seen on Lustre 2.17.0: 4 processes x 6
    creates left one OST of 4 without a file, two with twice their share); rotated, the
    k-th concurrent lease starts k positions on. A lease granted alone keeps the rotation's
    order, so jobs one after another continue it as Lustre's round-robin does (rotated by
    the lease id instead, one-file jobs landed on arbitrary positions: in the simulator,
    qos-high-fill's phase mean went from 2.9 s to 4.4 s under ``mcmf+lease``). Any other
    policy's layouts keep their order: the flow's lists come cheapest first.
    """
    out = list(placements)
    if out and outstanding > 0 and all(p.policy == "round_robin" or p.note == "regime round_robin"
                                       for p in out):
        k = outstanding % len(out)
        out = out[k:] + out[:k]
    return out
