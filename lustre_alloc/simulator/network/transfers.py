"""What a network model is given: the active transfers and the storage they land on.

The data the engine hands every network model (:mod:`lustre_alloc.simulator.network.model`,
:mod:`lustre_alloc.simulator.network.ns3`); kept apart so that the models depend on it and
:mod:`lustre_alloc.simulator.network.model` can import the ns-3 model without a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class TransferSet:
    """The active transfers, as the engine holds them.

    Attributes:
        entry_flow: transfer index of each (transfer, OST) entry, shape (E,).
        entry_ost: OST position of each entry, shape (E,).
        entry_frac: fraction of the transfer's bytes on that OST, shape (E,), > 0.
        flow_count: F.
        flow_write: True for a write (client -> OSS), shape (F,).
        flow_client: client node of each transfer, shape (F,).
        flow_ops_per_byte: requests per byte of each transfer, shape (F,) (None: unused).
    """
    entry_flow: np.ndarray
    entry_ost: np.ndarray
    entry_frac: np.ndarray
    flow_count: int
    flow_write: np.ndarray
    flow_client: np.ndarray
    flow_ops_per_byte: np.ndarray | None = None


@dataclass(frozen=True)
class Storage:
    """What the network model needs of the cluster: ``ost_oss`` (N,) OSS position of each
    OST, ``oss_count`` S, ``ost_bandwidth_bytes_s`` (N,) disk (write) bandwidth; optional
    (None = today's uniform model): ``ost_read_bandwidth_bytes_s`` (N,),
    ``oss_cap_bytes_s`` (S,) OSS NIC/CPU throughput limit, ``ost_latency_s`` (N,)
    per-request latency (the equal-share models only)."""
    ost_oss: np.ndarray
    oss_count: int
    ost_bandwidth_bytes_s: np.ndarray
    ost_read_bandwidth_bytes_s: np.ndarray | None = None
    oss_cap_bytes_s: np.ndarray | None = None
    ost_latency_s: np.ndarray | None = None

    @property
    def uniform(self) -> bool:
        return (self.ost_read_bandwidth_bytes_s is None and self.oss_cap_bytes_s is None
                and self.ost_latency_s is None)
