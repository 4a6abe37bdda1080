"""Composite (PFL) layouts as the policies see them: one create per component with OST
objects, each carrying the part of the file's expected bytes that falls inside its extent.

The one implementation of that rule: the mapper's protocol v2 composite ``alloc``
(:mod:`lustre_alloc.mapper.service.wire`) and the simulator's composite files
(:mod:`lustre_alloc.simulator.create_path`) both build their component requests here.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from lustre_alloc.mapper.policies.placement import CreateRequest

LUSTRE_EOF = (1 << 64) - 1
"""``LUSTRE_EOF`` (``lustre_user.h``): the end of the last component, ``-E -1``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Extent:
    """A component's byte range ``[start, end)``; ``end`` is :data:`LUSTRE_EOF` for the last."""
    start: int
    end: int

    def share(self, expected_bytes: int) -> int:
        """Bytes of a file of ``expected_bytes`` that fall in this extent (0 when the file
        is not expected to reach it, or its size is unknown)."""
        return max(0, min(expected_bytes, self.end) - self.start)


@dataclasses.dataclass(frozen=True, slots=True)
class OstComponent:
    """A component with OST objects: its extent and what it asks for."""
    extent: Extent
    stripe_count: int
    stripe_size: int
    pool: str | None = None


def component_requests(file_create: CreateRequest,
                       components: Sequence[OstComponent]) -> list[CreateRequest]:
    """One create per component: ``file_create``'s jobid and path, the component's stripe
    count, stripe size and pool (the file's pool when it names none), and ``expected_bytes``
    the file's bytes inside the component's extent."""
    return [dataclasses.replace(
        file_create, stripe_count=c.stripe_count, stripe_size=c.stripe_size,
        pool=c.pool or file_create.pool or None,
        expected_bytes=c.extent.share(file_create.expected_bytes)) for c in components]


__all__ = ["Extent", "LUSTRE_EOF", "OstComponent", "component_requests"]
