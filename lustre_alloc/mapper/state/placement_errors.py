"""The errors of a placement: what a policy raises when no layout can be allocated, and
what the placement check raises when a layout breaks an invariant.

They live in the lowest layer of ``lustre_alloc/mapper/`` (the state rules of
:mod:`lustre_alloc.mapper.state.ost_health` raise them; every policy and the service catch them) and
are re-exported by :mod:`lustre_alloc.mapper.policies.placement`.
"""
from __future__ import annotations

import errno


class AllocationError(Exception):
    """No layout could be allocated. ``errno`` is the code Lustre would return."""
    errno: int = errno.EIO

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NoSpaceError(AllocationError):
    """No usable OST left (Lustre returns ENOSPC)."""
    errno = errno.ENOSPC


class InvalidRequestError(AllocationError):
    """The request itself is wrong: bad stripe count, unknown pool (EINVAL)."""
    errno = errno.EINVAL


class PlacementCheckError(Exception):
    """A layout breaks an invariant every policy guarantees (a duplicate, unknown,
    unusable or out-of-pool OST): a bug in the policy that produced it, never a request
    error. Raised by :func:`lustre_alloc.mapper.state.ost_health.check_placement`.

    Attributes:
        ost: the first offending OST index (None for an empty list).
        reason: one line naming the violation.
    """

    def __init__(self, reason: str, ost: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.ost = ost


class QosUnavailable(AllocationError):
    """QOS declined (EAGAIN in lod_qos.c): the caller falls back to round-robin."""
    errno = errno.EAGAIN
