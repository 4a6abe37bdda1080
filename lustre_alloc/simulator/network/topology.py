"""The simulated LNet topology: clients, optional LNet routers, OSSes and the MDS.

Shape (a star around a non-blocking core switch, as in a small Lustre cluster on one
Ethernet fabric; Paul et al. 2017, Section IV-A2: "all components are connected through
a 10 Gbps Ethernet interconnect")::

    client c --[client link]-- (LNet router c % R --[router link]--) core switch
    core switch --[OSS link]-- OSS s          core switch --[MDS link]-- MDS

Links are full duplex: each direction is its own resource. A write goes client -> OSS
(client uplink, router uplink, OSS downlink), a read OSS -> client. Bulk data never
crosses the MDS link (creates are small RPCs); the MDS is part of the packet-level
topology so that its link exists, as in the paper's ns-3 model.

Resources are numbered for the max-min solver (:mod:`lustre_alloc.simulator.network.maxmin`)::

    [client up C][client down C][router up R][router down R][OSS up S][OSS down S][OST N]

("up" = towards the core). One TCP connection per (transfer, OSS) in the packet model
and one "subflow" per (transfer, OSS) in the flow model: Lustre clients keep one LNet
connection per server and stripes on different OSSes travel in parallel.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, fields

import numpy as np

LINK_TYPES = ("client", "router", "oss", "mds")


class NetworkSpecError(ValueError):
    """An invalid ``[network]`` parameter; the message names it."""


@dataclass(frozen=True)
class LnetSpec:
    """The ``[network]`` parameters of the flow-level and ns-3 models.

    Attributes:
        client_nodes: client nodes in the cluster (traces' processes run on them).
        nodes_per_job: client nodes one job's transfers spread over (consecutive from a
            node chosen by a CRC32 of the application name; our choice).
        client_link_gbit_s, oss_link_gbit_s, mds_link_gbit_s, router_link_gbit_s: link
            rates, Gbit/s (decimal); default 10, the paper's real setup (IV-A2).
        routers: LNet routers between clients and the core (0 = clients on the
            servers' fabric, the usual single-fabric setup).
        link_delay_us: one-way propagation delay of every link, microseconds (a few
            metres of cable plus a switch hop).
        mtu_bytes: link MTU (1500: standard Ethernet; 9000 for jumbo frames).
    """
    client_nodes: int = 32
    nodes_per_job: int = 8
    client_link_gbit_s: float = 10.0
    oss_link_gbit_s: float = 10.0
    mds_link_gbit_s: float = 10.0
    routers: int = 0
    router_link_gbit_s: float = 10.0
    link_delay_us: float = 5.0
    mtu_bytes: int = 1500

    @classmethod
    def from_params(cls, params: dict[str, float]) -> "LnetSpec":
        """Build from scenario ``[network]`` keys (floats); unknown keys are errors."""
        known = {f.name: f.type for f in fields(cls)}
        kw = {}
        for k, v in params.items():
            if k not in known:
                raise NetworkSpecError(f"unknown network parameter {k!r} "
                                       f"(known: {', '.join(sorted(known))})")
            kw[k] = int(v) if known[k] in (int, "int") else float(v)
        spec = cls(**kw)
        for k in ("client_nodes", "nodes_per_job", "mtu_bytes"):
            if getattr(spec, k) < 1:
                raise NetworkSpecError(f"{k}: must be >= 1, got {getattr(spec, k)}")
        if spec.routers < 0:
            raise NetworkSpecError(f"routers: must be >= 0, got {spec.routers}")
        for k in ("client_link_gbit_s", "oss_link_gbit_s", "mds_link_gbit_s", "router_link_gbit_s"):
            if getattr(spec, k) <= 0:
                raise NetworkSpecError(f"{k}: must be > 0, got {getattr(spec, k)}")
        if spec.mtu_bytes < 576:
            raise NetworkSpecError(f"mtu_bytes: must be >= 576, got {spec.mtu_bytes}")
        return spec

    def link_bytes_s(self, link_type: str) -> float:
        """Nominal rate of a link type, bytes/s."""
        return getattr(self, f"{link_type}_link_gbit_s") * 1e9 / 8


class ClientMap:
    """Which client node each transfer runs on, deterministic for a run.

    Job ``j``'s ``k``-th transfer runs on node ``(base(j) + k % nodes_per_job) %
    client_nodes``, ``base(j) = crc32(application name)``: an application's processes
    occupy a few consecutive nodes, and its transfers rotate over them.
    """

    def __init__(self, spec: LnetSpec):
        self.spec = spec
        self._next: dict[str, int] = {}
        self._base: dict[str, int] = {}

    def assign(self, job: str) -> int:
        """The client node of the next transfer of ``job``."""
        k = self._next.get(job, 0)
        self._next[job] = k + 1
        base = self._base.get(job)
        if base is None:
            base = self._base[job] = zlib.crc32(job.split("#", 1)[0].encode())
        return (base + k % self.spec.nodes_per_job) % self.spec.client_nodes


@dataclass
class Subflows:
    """The (transfer, OSS) pairs of a set of transfers: one network connection each.

    Attributes:
        flow: transfer index, shape (K,).
        oss: OSS index, shape (K,).
        coef: fraction of the transfer's bytes through that OSS, shape (K,).
        weight: per transfer, ``1 / max coef`` (its largest subflow carries
            ``rate / weight``), shape (F,).
    """
    flow: np.ndarray
    oss: np.ndarray
    coef: np.ndarray
    weight: np.ndarray


def subflows(entry_flow: np.ndarray, entry_ost: np.ndarray, entry_frac: np.ndarray,
             flow_count: int, ost_oss: np.ndarray, oss_count: int) -> Subflows:
    """Group a transfer set's per-OST entries by OSS (vectorised)."""
    key = entry_flow.astype(np.int64) * oss_count + ost_oss[entry_ost]
    uniq, inv = np.unique(key, return_inverse=True)
    coef = np.bincount(inv, entry_frac, minlength=uniq.shape[0])
    flow = uniq // oss_count
    cmax = np.zeros(flow_count)
    np.maximum.at(cmax, flow, coef)
    weight = np.where(cmax > 0, 1.0 / np.where(cmax > 0, cmax, 1.0), 1.0)
    return Subflows(flow=flow, oss=uniq % oss_count, coef=coef, weight=weight)
