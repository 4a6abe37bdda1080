"""The simulator's network seam.

A network model caps each transfer's rate by what its path (client -> LNet ->
OSS) can carry. The packet-level ns-3 model and the calibrated flow-level model come
with their own issue; until then the scenario chooses between:

* ``none``: the network is never the bottleneck (infinite cap), the paper's
  assumption for its bandwidth figures (Section IV-C: OST bandwidth only);
* ``client_link``: every transfer is capped at one client link's rate
  (``client_link_gbit_s``, default 10 Gbit/s: the paper's real setup is 10 Gbps
  Ethernet, Section IV-A2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np


class NetworkModel(Protocol):
    """Caps on transfer rates. ``caps`` gets the OSS index list of each transfer."""
    name: str

    def caps(self, transfer_osses: Sequence[Sequence[int]]) -> np.ndarray:
        """Rate caps in bytes/s, shape (len(transfer_osses),)."""
        ...


@dataclass(frozen=True)
class NoNetwork:
    """The network never limits a transfer."""
    name: str = "none"

    def caps(self, transfer_osses: Sequence[Sequence[int]]) -> np.ndarray:
        return np.full(len(transfer_osses), np.inf)


@dataclass(frozen=True)
class ClientLinkNetwork:
    """Each transfer is limited by its client's link (Gbit/s, decimal)."""
    client_link_gbit_s: float = 10.0
    name: str = "client_link"

    def caps(self, transfer_osses: Sequence[Sequence[int]]) -> np.ndarray:
        return np.full(len(transfer_osses), self.client_link_gbit_s * 1e9 / 8)


NETWORK_MODELS = {"none": NoNetwork, "client_link": ClientLinkNetwork}


def make_network(name: str, **params: float) -> NetworkModel:
    """Build a network model by name; raises ValueError for an unknown one."""
    try:
        return NETWORK_MODELS[name](**params)
    except KeyError:
        raise ValueError(f"unknown network model {name!r}; known: {', '.join(NETWORK_MODELS)}") from None
