"""Policy switching: when round-robin is enough, when to solve the flow.

A Mantle-style rule (Sevilla et al., SC 2015: a balancer is "when" to move load,
"where" to, and "how much"), applied per statistics sample to the round's candidate
OSTs (:class:`mapper.flow.costs.OstArrays`):

* **when**: the load is *uneven* when the OSTs' per-byte times for a new stream,
  ``max(L_j / rpc, 1 / r_j)`` (brw_stats RPC time, smoothed rate; the rate cost's
  ``T_j(0) / b``), spread by more than ``load_ratio`` between the 90th percentile and
  the median, or the measured rates by more than ``rate_ratio`` between the median and
  the 10th percentile (slow or loaded targets, unmanaged jobs). Percentiles, not
  max/min: in a busy uniform system a few OSTs always have a stream more. With
  ``rate_band`` set, load is also uneven when any one OST's estimated rate is more than
  that fraction from the median (``CapabilityInterleave``'s test,
  :mod:`mapper.policies.interleave`): a single slow OST among hundreds is below no
  percentile, and the rate estimate keeps its memory while the OST is idle, when its
  brw_stats time (and so the straggler test) has nothing to say.
  Space is *within the band* when Lustre's own test holds (free space of the emptiest and
  fullest OST within ``qos_threshold_rr``, 17%: :func:`mapper.policies.lustre_qos.free_space_within_rr_band`)
  and used space max/mean is at most ``1 + used_band`` (the balance metric, so a young,
  nearly empty file system with a few much fuller OSTs counts as uneven, which Lustre's
  test alone misses).
* **where**: uniform load and space within the band: round-robin interleaving (Lustre's
  RR, cheap and as good as any there). Otherwise the flow.
* **how much**: the flow's cost decides how many stripes each OST takes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mapper.state.arrays import OstArrays
from mapper.policies.lustre_qos import QOS_THRESHOLD_RR_DEFAULT_PCT, free_space_within_rr_band, pct_to_stored

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
    """
    load_ratio: float | None = 2.0
    rate_ratio: float | None = 1.25
    qos_threshold_rr_pct: int | None = QOS_THRESHOLD_RR_DEFAULT_PCT
    used_band: float | None = 0.05
    rpc_bytes: float = 1 << 20
    rate_band: float | None = None

    def __post_init__(self) -> None:
        def off_or(value, ok) -> bool:
            return value is None or ok(value)
        if not (off_or(self.load_ratio, lambda v: v > 1)
                and off_or(self.rate_ratio, lambda v: v > 1)
                and off_or(self.used_band, lambda v: v >= 0)
                and off_or(self.qos_threshold_rr_pct, lambda v: 0 <= v <= 100)
                and off_or(self.rate_band, lambda v: 0 <= v < 1) and self.rpc_bytes > 0):
            raise ValueError(f"regime thresholds out of range: {self}")


@dataclass(frozen=True)
class Regime:
    """The rule's answer: ``mode`` (ROUND_ROBIN or FLOW) and why."""
    mode: str
    load_uniform: bool
    space_in_band: bool


def classify(osts: OstArrays, t: RegimeThresholds) -> Regime:
    """The regime of the candidate OSTs (all rows)."""
    if len(osts.index) < 2:
        return Regime(ROUND_ROBIN, True, True)
    load_uniform = _load_uniform(osts, t)
    space = _space_in_band(osts, t)
    mode = ROUND_ROBIN if load_uniform and space else FLOW
    return Regime(mode, load_uniform, space)


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
