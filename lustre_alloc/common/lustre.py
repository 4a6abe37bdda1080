"""Lustre constants shared by the mapper, the simulator, the traces and the live
stack: each defined here once.

Sources: ``lustre/include/uapi/linux/lustre/lustre_user.h`` and ``lustre_idl.h``
(Lustre 2.12-2.16); restated in ``docs/reference/lustre-lod-allocator.md``.
"""
from __future__ import annotations

LOV_MAX_STRIPE_COUNT = 2000
"""Most stripes of one layout component (``LOV_MAX_STRIPE_COUNT``, lustre_idl.h);
``-1`` in a request means "all usable OSTs"."""
DEFAULT_STRIPE_SIZE_BYTES = 1 << 20
"""Stripe size when a layout names none: ``LOV_DESC_STRIPE_SIZE_DEFAULT`` (1 MiB,
lustre_idl.h), also ``lfs setstripe``'s default."""
STRIPE_SIZE_UNIT_BYTES = 1 << 16
"""A stripe size must be a multiple of this (``LOV_MIN_STRIPE_SIZE``, 64 KiB)."""

