"""Load models of the simulated servers: bandwidth sharing, OSS CPU/memory, MDS CPU.

Every formula here is ours (the paper does not publish its simulator's), chosen to be
simple, documented and configurable from the scenario. Units: bytes, seconds, percent.

Bandwidth sharing (Paul et al. 2017, Section IV-C: "the simulator also takes into
account the number of applications using a particular OST at a given timestamp and
calculates the read and write bandwidth accordingly"; "OSTs have equal read and write
bandwidth")::

    share[o]   = bandwidth_bytes_s[o] / active_transfers[o]
    rate[f]    = min over OSTs o of f with frac[f,o] > 0 of  share[o] / frac[f,o]
    rate[f]    = min(rate[f], network_cap[f])

``frac[f,o]`` is the fraction of transfer ``f``'s bytes that land on OST ``o`` under
RAID0 striping, so a striped I/O proceeds at the pace of its slowest OST.

OSS CPU and memory (load grows with the bytes and operations an OSS serves)::

    cpu%[s] = min(100, cpu_idle + 100 * bytes_s[s] / cpu_saturation_bytes_s
                                + 100 * ops_s[s]  / cpu_saturation_ops_s)
    mem%[s] = min(100, mem_idle + mem_per_gib_s * bytes_s[s] / 2**30)

A bulk RPC's I/O time on an OST (what brw_stats' "I/O time" histogram bins; ours): an RPC of
``rpc_bytes`` belongs to one of the ``sharing`` streams the OST serves at equal shares, so
it takes ``sharing * rpc_bytes / bandwidth`` plus the OST's request latency
(:func:`rpc_io_time_s`; the simulator's collector readings and the live stack's emulated
OSTs both use it).

MDS CPU (metadata load; used by the mapper's CPU gate, Section III-D)::

    mds_cpu% = min(100, mds_cpu_idle + 100 * creates_s / mds_create_capacity_s
                                     + 100 * meta_ops_s / mds_meta_capacity_s)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GIB = 1 << 30
MIB = 1 << 20
RPC_BYTES = MIB
"""Bytes of one bulk I/O RPC: 256 pages of 4 KiB (``max_pages_per_rpc`` before Lustre 2.9,
and the stripe size of the bundled workloads)."""


def rpc_io_time_s(sharing: np.ndarray | float, bandwidth_bytes_s: np.ndarray | float,
                  latency_s: np.ndarray | float = 0.0, rpc_bytes: float = RPC_BYTES
                  ) -> np.ndarray | float:
    """I/O time of one bulk RPC, s (module docstring): ``sharing`` streams (>= 1) at equal
    shares of ``bandwidth_bytes_s``, plus ``latency_s``; element-wise over arrays."""
    return sharing * rpc_bytes / bandwidth_bytes_s + latency_s


@dataclass(frozen=True)
class OssModel:
    """OSS CPU/memory parameters (scenario table ``[oss_model]``).

    Attributes:
        cpu_idle_percent: CPU% of an idle OSS (daemons, monitoring).
        cpu_saturation_mib_s: throughput (MiB/s) that alone would use 100% CPU.
        cpu_saturation_ops_s: I/O operations per second that alone would use 100% CPU.
        mem_idle_percent: memory% of an idle OSS.
        mem_percent_per_gib_s: memory% added per GiB/s served (page cache, RPC buffers).
    """
    cpu_idle_percent: float = 2.0
    cpu_saturation_mib_s: float = 6000.0
    cpu_saturation_ops_s: float = 400000.0
    mem_idle_percent: float = 15.0
    mem_percent_per_gib_s: float = 8.0

    def cpu_percent(self, bytes_s: np.ndarray, ops_s: np.ndarray) -> np.ndarray:
        """CPU% per OSS from its served bytes/s and operations/s (arrays of shape (S,))."""
        cpu = (self.cpu_idle_percent
               + 100.0 * bytes_s / (self.cpu_saturation_mib_s * MIB)
               + 100.0 * ops_s / self.cpu_saturation_ops_s)
        return np.minimum(cpu, 100.0)

    def mem_percent(self, bytes_s: np.ndarray) -> np.ndarray:
        """Memory% per OSS from its served bytes/s (shape (S,))."""
        return np.minimum(self.mem_idle_percent + self.mem_percent_per_gib_s * bytes_s / GIB, 100.0)


@dataclass(frozen=True)
class MdsModel:
    """MDS CPU parameters (scenario table ``[mds_model]``).

    Attributes:
        cpu_idle_percent: CPU% of the MDS without client load.
        create_capacity_s: file creates per second that alone would use 100% CPU.
        meta_capacity_s: other metadata operations per second for 100% CPU.
    """
    cpu_idle_percent: float = 5.0
    create_capacity_s: float = 20000.0
    meta_capacity_s: float = 200000.0

    def cpu_percent(self, creates_s: float, meta_ops_s: float) -> float:
        """MDS CPU% for the given creates/s and other metadata ops/s."""
        cpu = (self.cpu_idle_percent + 100.0 * creates_s / self.create_capacity_s
               + 100.0 * meta_ops_s / self.meta_capacity_s)
        return min(cpu, 100.0)


def raid0_bytes_per_ost(file_bytes: int, stripe_size: int, stripe_count: int) -> np.ndarray:
    """Bytes each stripe of a RAID0 layout holds for a file of ``file_bytes``.

    Stripe ``i`` holds stripe-size chunks ``i, i+count, i+2*count, ...`` (Lustre's
    ``LOV_PATTERN_RAID0``). Returns an int64 array of shape (stripe_count,).
    """
    full, rem = divmod(int(file_bytes), stripe_size)
    per = np.full(stripe_count, (full // stripe_count) * stripe_size, dtype=np.int64)
    extra = full % stripe_count
    per[:extra] += stripe_size
    per[extra] += rem if extra < stripe_count else 0
    return per


MAX_RPCS_IN_FLIGHT = 8
"""Lustre's default ``osc.*.max_rpcs_in_flight``: requests a client keeps outstanding per
OST, so per-request latency is paid once per 8 requests."""


def transfer_rates(entry_flow: np.ndarray, entry_ost: np.ndarray, entry_frac: np.ndarray,
                   flow_count: int, bandwidth_bytes_s: np.ndarray,
                   network_cap_bytes_s: np.ndarray, *,
                   entry_write: np.ndarray | None = None,
                   read_bandwidth_bytes_s: np.ndarray | None = None,
                   ost_oss: np.ndarray | None = None, oss_cap_bytes_s: np.ndarray | None = None,
                   latency_s: np.ndarray | None = None,
                   ops_per_byte: np.ndarray | None = None) -> np.ndarray:
    """Rate (bytes/s) of every active transfer under the equal-share model above.

    The transfers' stripes are given as parallel "entry" arrays (one entry per
    transfer and OST with a non-zero fraction).

    Args:
        entry_flow: transfer index of each entry, shape (E,).
        entry_ost: OST index of each entry, shape (E,).
        entry_frac: fraction of the transfer's bytes on that OST, shape (E,), > 0.
        flow_count: number of transfers F.
        bandwidth_bytes_s: OST bandwidths, shape (N,).
        network_cap_bytes_s: per-transfer network cap, shape (F,) (inf = none).
        entry_write: True where the entry is a write, shape (E,) (with
            ``read_bandwidth_bytes_s``: reads take the OST's read bandwidth; an OST
            time-shares between its transfers, so a read's share is
            ``read_bandwidth[o] / active[o]``).
        read_bandwidth_bytes_s: OST read bandwidths, shape (N,) (None: same as write).
        ost_oss, oss_cap_bytes_s: OSS position of each OST (N,) and each OSS's
            throughput limit (S,): every transfer touching OSS ``s`` gets at most
            ``cap[s] / transfers_on[s] / frac[f, s]`` (the same equal share, one level up).
        latency_s, ops_per_byte: per-request latency per OST (N,) and requests per byte
            of each transfer (F,): each byte on OST ``o`` also costs
            ``ops_per_byte * latency[o] / MAX_RPCS_IN_FLIGHT`` seconds.
    Returns:
        rates, shape (F,).
    """
    if flow_count == 0:
        return np.zeros(0)
    active = np.bincount(entry_ost, minlength=bandwidth_bytes_s.shape[0])
    bw = bandwidth_bytes_s[entry_ost]
    if read_bandwidth_bytes_s is not None and entry_write is not None:
        bw = np.where(entry_write, bw, read_bandwidth_bytes_s[entry_ost])
    share = bw / active[entry_ost]
    if latency_s is not None and ops_per_byte is not None:
        # seconds per byte of the transfer spent on this OST: its share plus request latency
        per_entry = 1.0 / (entry_frac / share + entry_frac * ops_per_byte[entry_flow]
                           * latency_s[entry_ost] / MAX_RPCS_IN_FLIGHT)
    else:
        per_entry = share / entry_frac
    rates = np.full(flow_count, np.inf)
    np.minimum.at(rates, entry_flow, per_entry)
    if oss_cap_bytes_s is not None and ost_oss is not None:
        s = oss_cap_bytes_s.shape[0]
        pair, inverse = np.unique(entry_flow * s + ost_oss[entry_ost], return_inverse=True)
        pair_frac = np.bincount(inverse, entry_frac)
        pair_oss = pair % s
        on_oss = np.bincount(pair_oss, minlength=s)
        per_pair = oss_cap_bytes_s[pair_oss] / on_oss[pair_oss] / pair_frac
        np.minimum.at(rates, pair // s, per_pair)
    return np.minimum(rates, network_cap_bytes_s)
