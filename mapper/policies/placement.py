"""The allocation policy interface: a create request in, an ordered OST list out.

Every policy (Lustre's round-robin and QOS allocators, the paper's random and MCMF
policies) implements :class:`PlacementPolicy`. The simulator and the mapper service call
policies only through this interface.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from mapper.state.cluster_state import ClusterSnapshot
from mapper.state.placement_errors import (AllocationError, InvalidRequestError, NoSpaceError,
                                          PlacementCheckError, QosUnavailable)

__all__ = ["AllocationError", "BatchPolicy", "CreateRequest", "InvalidRequestError",
           "NoSpaceError", "Placement", "PlacementCheckError", "PlacementPolicy",
           "QosUnavailable", "allocate_each"]


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
    job_id: str
    stripe_count: int
    stripe_size: int = 1 << 20
    expected_bytes: int = 0
    pool: str | None = None
    path: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    """A policy's decision: OST indices in stripe order, and who decided.

    ``fallback`` is empty when the primary policy decided, else the reason the
    fallback policy did (``"mds_cpu"``, ``"stale"``, ``"budget"``, ``"error"``;
    see :mod:`mapper.policies.gate`).
    """
    osts: tuple[int, ...]
    policy: str
    note: str = ""
    fallback: str = ""


@runtime_checkable
class PlacementPolicy(Protocol):
    """An OST allocation policy.

    ``allocate`` returns OST indices in stripe order, all distinct, all usable
    (see :mod:`mapper.state.ost_health`) and inside the request's pool; its length is the
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
    """Mixin for policies that decide in rounds: ``allocate`` is a round of one.

    Subclasses implement ``allocate_batch(snapshot, requests)`` returning a
    :class:`Placement` or an :class:`AllocationError` per request.
    """

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """One request; raises the :class:`AllocationError` the round gave it."""
        result = self.allocate_batch(snapshot, [request])[0]  # type: ignore[attr-defined]
        if isinstance(result, AllocationError):
            raise result
        return result
