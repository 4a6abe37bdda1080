"""Policy switching: when round-robin is enough, when to solve the flow.

A Mantle-style rule (Sevilla et al., SC 2015: a balancer is "when" to move load,
"where" to, and "how much"), applied per statistics sample to the round's candidate
OSTs (:class:`lustre_alloc.mapper.flow.costs.OstArrays`). Stragglers (:mod:`lustre_alloc.mapper.flow.stragglers`)
always mean the flow. Otherwise each test below says "uneven" or not; a threshold set to
None is not tested, and the defaults test
only persistent evidence, what a 5 s-old sample cannot make up:

* **speed** (default on): the estimated rates (:class:`lustre_alloc.mapper.speed.rates.OstRateTracker`,
  which counts the I/Os in flight, so a busy OST reads at its rate) spread by more than
  ``rate_ratio`` (2.0) between the median and the 10th percentile. 2.0 is one step of
  brw_stats' log2 I/O-time histogram: two OSTs a hair apart on either side of a bucket
  edge read at bucket means 2x apart in one look (scale-800-hetero: OSTs of 291-348 MiB/s
  read 12 and 24 ms, median over p10 1.53-1.59; nersc-edison-real, alike OSTs, up to
  1.43x), so only a spread beyond one step is evidence. It was 1.5, below the 2x of OSTs
  failed over to half speed; the failover test below sees those at once;
* **a slow OST** (``slowest_ratio``, default 2.0;
  :meth:`lustre_alloc.mapper.speed.rates.OstRateTracker.slow_in_both`): an OST more than 2.0 times
  slower than the median by both its smoothed estimate and its latest look with RPC
  times. A single slow OST among hundreds is below no percentile, so the speed test above
  misses it. 2.0 is the same one log2 bucket step. Both must agree: the smoothed estimate
  alone also falls with bytes-only looks (an OST that wrote little), and among 3,600 OSTs
  one read 2.06x below the median that way while its latest look read 1.45x
  (scale-3600); a single look is the slow look's, below. straggler-ost-pfl's OST at 1/49
  reads 2.87x slower in both (the per-RPC latency and the in-flight histogram's last
  bucket, 31, compress the ratio below the straggler and slow-look factor of 3), and this
  test sends the next job's creates to the flow (docs/history.md, "A slow OST by estimate and look");
* **one OST off the median** (``rate_band``, off): any one OST's estimated rate more than
  that fraction from the median, either side;
* **load** (``load_ratio``, off): the per-byte times for a new stream,
  ``max(L_j / rpc, 1 / r_j)`` (brw_stats RPC time, rate; the rate cost's ``T_j(0) / b``),
  spread by more than this between the 90th percentile and the median. Off by default:
  in a busy world with alike OSTs some OST always has a few streams more, the test sent
  every round to the flow, and the flow's greedy optimum over 5 s-old samples lost to
  RR's rotation;
* **failed over** (``failed_over``, default on; :func:`failover_evidence`): an OST served
  by an OSS other than the one that first published it
  (:attr:`lustre_alloc.mapper.state.cluster_state.OstState.failed_over`), on an OSS that now serves
  more OSTs than the median OSS. Its failover partner serves two sets of OSTs through one
  NIC and CPU, and the
  failed-over OSTs ran at about half speed where measured (https://github.com/hpc/ior/issues/371). Lustre
  exposes the move at once (the partner's collector publishes the target), while the
  rate estimates take several rounds to spread past ``rate_ratio``: the first checkpoint
  after the move was placed by RR (failover-half, docs/placement.md);
* **a slow look** (``look_factor``, default 3; :meth:`lustre_alloc.mapper.speed.rates.OstRateTracker.slow_looks`):
  an OST whose latest look with brw_stats RPC times, unsmoothed, read more than 3x slower
  than the median smoothed rate and than the median of the OSTs' latest looks (most OSTs
  slow in one look is load: behind more than 31 queued RPCs brw_stats' in-flight
  histogram stops counting, expansion-25pct). 3 is the straggler factor (:mod:`lustre_alloc.mapper.flow.stragglers`):
  beyond the 2x one log2 bucket step makes of alike OSTs, and above the 2.88-2.98x that
  alike OSTs' single looks read on nersc-edison-real, each at 31 RPCs in flight (the
  in-flight histogram's last bucket: Little's law under-reads a saturated OST). The
  smoothed estimate falls 0.3 of the way per look, so an OSS at 30% (degraded-oss) needs
  about four looks to spread the rates past ``rate_ratio``; one look can show it
  (docs/history.md, "One bucket step and a slow look");
* **room** (always): an OST within one RPC of Lustre's ENOSPC reserve
  (:func:`lustre_alloc.mapper.state.ost_health.enospc_reserve_bytes`) is the flow's to keep stripes off;
* **space balance** (``qos_threshold_rr_pct``, ``used_band``, off): free space of the
  emptiest and fullest OST further apart than Lustre's ``qos_threshold_rr``
  (:func:`lustre_alloc.mapper.policies.lustre_qos.free_space_within_rr_band`), or used space max/mean
  above ``1 + used_band``. Off by default: evening out space costs bandwidth in the
  flow, and is the rebalancer's job (:mod:`lustre_alloc.rebalance`).

**Where**: nothing uneven: round-robin interleaving (Lustre's RR). Otherwise the flow.
**How much**: the flow's cost decides how many stripes each OST takes.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from lustre_alloc.mapper.state.arrays import OstArrays
from lustre_alloc.mapper.state.cluster_state import OstState
from lustre_alloc.mapper.state.ost_health import enospc_reserve_bytes
from lustre_alloc.mapper.policies.lustre_qos import free_space_within_rr_band, pct_to_stored

ROUND_ROBIN = "round_robin"
FLOW = "flow"


@dataclass(frozen=True)
class RegimeThresholds:
    """Thresholds of the rule (module docstring). A threshold set to None is not tested.

    Attributes:
        load_ratio: p90 / median per-byte time above which load is uneven (> 1).
        rate_ratio: median / p10 measured rate above which load is uneven (> 1).
        qos_threshold_rr_pct: Lustre's ``qos_threshold_rr``, percent: free space of the
            emptiest and fullest OST further apart is uneven space.
        used_band: used max/mean above ``1 + used_band`` is uneven space.
        rpc_bytes: bytes of the RPC the brw_stats time refers to.
        rate_band: any OST's estimated rate outside ``median * (1 +- rate_band)`` is
            uneven load.
        failed_over: an OST served by its failover partner is uneven load.
        look_factor: an OST whose latest look read more than this many times slower than
            the median smoothed rate is uneven load (> 1).
        slowest_ratio: an OST whose smoothed estimate and latest look both read more
            than this many times slower than the median is uneven load (> 1; 2.0: one
            log2 bucket step).
    """
    load_ratio: float | None = None
    rate_ratio: float | None = 2.0
    qos_threshold_rr_pct: int | None = None
    used_band: float | None = None
    rpc_bytes: float = 1 << 20
    rate_band: float | None = None
    failed_over: bool = True
    look_factor: float | None = 3.0
    slowest_ratio: float | None = 2.0

    def __post_init__(self) -> None:
        def off_or(value, ok) -> bool:
            return value is None or ok(value)
        if not (off_or(self.load_ratio, lambda v: v > 1)
                and off_or(self.rate_ratio, lambda v: v > 1)
                and off_or(self.look_factor, lambda v: v > 1)
                and off_or(self.slowest_ratio, lambda v: v > 1)
                and off_or(self.used_band, lambda v: v >= 0)
                and off_or(self.qos_threshold_rr_pct, lambda v: 0 <= v <= 100)
                and off_or(self.rate_band, lambda v: 0 <= v < 1) and self.rpc_bytes > 0
                and isinstance(self.failed_over, bool)):
            raise ValueError(f"regime thresholds out of range: {self}")


@dataclass(frozen=True)
class Regime:
    """The rule's answer: ``mode`` (ROUND_ROBIN or FLOW) and why."""
    mode: str
    load_uniform: bool
    space_in_band: bool
    failed_over: bool = False
    slow_look: bool = False
    slow_ost: bool = False


def failover_evidence(osts: Iterable[OstState], oss_names: Iterable[str] = ()) -> bool:
    """Some OST is served by its failover partner: moved from the OSS that first published
    it (``failed_over``) to one that now serves more OSTs than the median OSS (over
    ``oss_names``, every OSS that ever sent a sample, the failed one serving none, and the
    OSTs' servers). The count keeps a wrong first OSS from counting: a mapper started
    during a failover takes the partner as home, and after the failback every OSS serves
    its usual count again."""
    osts = list(osts)
    moved_to = {o.oss for o in osts if o.failed_over}
    if not moved_to:
        return False
    served = Counter(o.oss for o in osts)
    median = float(np.median([served.get(n, 0) for n in set(oss_names) | set(served)]))
    return any(served[oss] > median for oss in moved_to)


def classify(osts: OstArrays, t: RegimeThresholds, failed_over: bool = False,
             slow_look: bool = False, slow_ost: bool = False) -> Regime:
    """The regime of the candidate OSTs (all rows); ``failed_over``: one of the usable OSTs
    is served by its failover partner; ``slow_look``: one read slower than the median by
    more than ``t.look_factor`` in its latest look; ``slow_ost``: one read slower than
    the median by more than ``t.slowest_ratio`` in both its estimate and its latest look."""
    if len(osts.index) == 0:
        return Regime(ROUND_ROBIN, True, True)
    moved = failed_over and t.failed_over
    slow = slow_look and t.look_factor is not None
    slowest = slow_ost and t.slowest_ratio is not None
    load_uniform = (not moved and not slow and not slowest
                    and (len(osts.index) < 2 or _load_uniform(osts, t)))
    space = _space_in_band(osts, t)
    mode = ROUND_ROBIN if load_uniform and space else FLOW
    return Regime(mode, load_uniform, space, moved, slow, slowest)


def _load_uniform(osts: OstArrays, t: RegimeThresholds) -> bool:
    if osts.rate_bytes_s is None:
        return True
    rate = np.maximum(osts.rate_bytes_s.astype(float), 1.0)
    p10, p50 = np.percentile(rate, [10, 50])
    if t.rate_ratio is not None and p50 > t.rate_ratio * p10:
        return False
    if t.rate_band is not None and not np.all(np.abs(rate / p50 - 1.0) <= t.rate_band):
        return False
    if t.load_ratio is None:
        return True
    per_byte = 1.0 / rate
    if osts.write_latency_s is not None:
        lat = osts.write_latency_s.astype(float)
        ok = np.isfinite(lat) & (lat > 0)
        per_byte = np.where(ok, np.maximum(np.where(ok, lat, 0.0) / t.rpc_bytes, per_byte),
                            per_byte)
    m50, m90 = np.percentile(per_byte, [50, 90])
    return bool(m90 <= t.load_ratio * m50)


def _space_in_band(osts: OstArrays, t: RegimeThresholds) -> bool:
    # Always: an OST within an RPC of Lustre's ENOSPC reserve is the flow's to handle
    # (its space rule keeps stripes off it); Lustre's RR would use it until OSP flags it.
    avail = osts.kbytes_avail.astype(float) * 1024.0
    if np.any(avail < enospc_reserve_bytes(osts.kbytes_total) + t.rpc_bytes):
        return False
    if t.qos_threshold_rr_pct is not None:
        ba = (osts.kbytes_avail.astype(np.int64) * 1024) >> 8
        ba = ba[ba > 0]
        if len(ba) == 0 or not free_space_within_rr_band(
                int(ba.min()), int(ba.max()), pct_to_stored(t.qos_threshold_rr_pct)):
            return False
    if t.used_band is not None:
        used = (osts.kbytes_total - osts.kbytes_avail).astype(float)
        mean_used = float(used.mean())
        if mean_used > 0 and float(used.max()) / mean_used > 1.0 + t.used_band:
            return False
    return True
