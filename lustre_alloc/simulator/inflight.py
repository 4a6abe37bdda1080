"""What the simulation holds in flight: files and transfers.

Kept apart from :mod:`lustre_alloc.simulator.engine` so that :mod:`lustre_alloc.simulator.rebalance.plan_event` (a migration is a
read transfer and a write transfer) can build them without importing the engine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class SimFile:
    """A file the simulation has created: its OSTs (positions, stripe order), stripe size (bytes)
    and the bytes landed per stripe."""
    job: str
    osts: np.ndarray            # simulated OST positions, stripe order
    stripe_size: int
    size: int = 0               # bytes the file will hold once its writes land
    landed: np.ndarray = field(default_factory=lambda: np.zeros(0))  # bytes landed per stripe
    last_write_s: float = 0.0
    transfers: int = 0          # in flight
    recent_bytes: float = 0.0   # read + written since the last rebalance plan
    times: list = field(default_factory=lambda: [math.inf, -math.inf, math.inf, -math.inf])
    """first write start, last write end, first read start, last read end (s)."""
    comps: tuple = ()
    """A composite (PFL) file: per component ``(start, end, first slot, stripe count)``,
    bytes and slots of ``osts`` (its components' OSTs one after the other); empty for a
    plain layout."""
    close_at: int = -1
    """Its size once its writes are done, when the shim reports it at close (the create
    announced none and the policy learns sizes); -1: nothing is reported."""


@dataclass
class SimTransfer:
    """One read or write in flight: bytes per OST (shape (k,)) and what remains (bytes)."""
    write: bool
    job: str
    file: SimFile | None
    osts: np.ndarray            # positions, only those with bytes
    per_ost: np.ndarray         # bytes per OST of this transfer
    nbytes: float
    remaining: float
    ops: int
    start_s: float
    stripe_pos: np.ndarray | None = None  # write: stripe slots of ``osts`` in the file
    client: int = 0             # client node (network model)
    cap_bytes_s: float = math.inf          # a migration's budget cap (lustre_alloc.simulator.rebalance.plan_event)
    rebalance_key: str | None = None       # the file a migration transfer moves
    rfile: SimFile | None = None  # read: the file read
    lands: bool = True          # a write that lands bytes (background traffic does not)
