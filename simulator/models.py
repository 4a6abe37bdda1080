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

MDS CPU (metadata load; used by the mapper's CPU gate, Section III-D)::

    mds_cpu% = min(100, mds_cpu_idle + 100 * creates_s / mds_create_capacity_s
                                     + 100 * meta_ops_s / mds_meta_capacity_s)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GIB = 1 << 30
MIB = 1 << 20


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


def transfer_rates(entry_flow: np.ndarray, entry_ost: np.ndarray, entry_frac: np.ndarray,
                   flow_count: int, bandwidth_bytes_s: np.ndarray,
                   network_cap_bytes_s: np.ndarray) -> np.ndarray:
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
    Returns:
        rates, shape (F,).
    """
    if flow_count == 0:
        return np.zeros(0)
    active = np.bincount(entry_ost, minlength=bandwidth_bytes_s.shape[0])
    share = bandwidth_bytes_s[entry_ost] / active[entry_ost]
    per_entry = share / entry_frac
    rates = np.full(flow_count, np.inf)
    np.minimum.at(rates, entry_flow, per_entry)
    return np.minimum(rates, network_cap_bytes_s)
