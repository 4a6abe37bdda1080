"""What the mapper's rate cost model says an OST list will cost, on the state it sees.

Used to explain decisions (the cheapest alternatives beside the chosen list) and to compare the
mapper's choice with Lustre's in shadow mode. The price of one stripe on OST ``j`` is the rate
cost's first slot, :meth:`lustre_alloc.mapper.flow.costs.RateCost.completion_s` ``T_j(0)``: the expected
seconds to write ``b`` bytes behind what is queued there, from the OST's smoothed measured write
rate (:class:`lustre_alloc.mapper.speed.rates.OstRateTracker`, fed only the collectors' samples) and its
brw_stats write RPC time. A file is written when its slowest stripe is, so a list costs the
largest of its stripes' prices (``expected_s``); ``stripe_s_sum`` is their sum.

Prices are of the current state only: nothing this mapper placed since the last sample is
added (the same for every list compared), so two lists priced on one state version compare
fairly, and a list priced on a later version says so (``state_version``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lustre_alloc.mapper.flow.costs import RateCost
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.policies.placement import InvalidRequestError
from lustre_alloc.mapper.state.arrays import OstArrays, TableSync, ost_arrays
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import is_usable, pool_members

DEFAULT_BYTES_PER_STRIPE = float(1 << 20)
"""Bytes per stripe priced when the request announced none: one 1 MiB RPC (Lustre's default
stripe size, ``LOV_DESC_STRIPE_SIZE_DEFAULT``)."""


@dataclass(frozen=True)
class ListPrice:
    """The price of one OST list.

    Attributes:
        osts: the list, stripe order.
        stripe_s: each stripe's expected completion time, s (NaN: OST not in the state).
        expected_s: the slowest stripe's, s (NaN when any OST is unknown).
        state_version: the state version priced on.
    """
    osts: tuple[int, ...]
    stripe_s: tuple[float, ...]
    expected_s: float
    state_version: int | None

    @property
    def stripe_s_sum(self) -> float:
        """Sum of the stripes' expected seconds."""
        return float(sum(self.stripe_s))


class ChoicePricer:
    """Prices OST lists with :class:`~lustre_alloc.mapper.flow.costs.RateCost` (module docstring).

    Args:
        cost: the rate cost model (default parameters: ``mcmf``'s default cost).
        smoothing: weight of a new sample in the per-OST rate, (0, 1].

    Not thread-safe: call under the service lock.
    """

    def __init__(self, cost: RateCost | None = None, smoothing: float = 0.05):
        self.cost = cost or RateCost()
        self.tracker = OstRateTracker(smoothing=smoothing)
        self._key: tuple[int, int | None] | None = None
        self._arrays: OstArrays | None = None
        self._version: int | None = None
        self._sync = TableSync()
        self._usable_pos: dict[str | None, np.ndarray] = {}
        """Pool -> positions of its usable OSTs in ``_arrays``, for the state priced."""

    def _state(self, snapshot: ClusterSnapshot) -> OstArrays:
        key = (id(snapshot), snapshot.version)
        if self._arrays is None or key != self._key or snapshot.version is None:
            self.tracker.update(snapshot.osts)
            table = self._sync.table(snapshot)
            rows = table.indices()
            base = ost_arrays(table, rows)
            self._arrays = dataclasses.replace(
                base, rate_bytes_s=self.tracker.rates(rows),
                write_latency_s=self.tracker.latencies(rows), degraded=table.degraded[rows])
            self._key, self._version = key, snapshot.version
            self._usable_pos = {}
        return self._arrays

    def prepare(self, snapshot: ClusterSnapshot) -> None:
        """Price the cheapest OST of the file system and of each pool on ``snapshot`` now
        (read only): the first decision log line reuses the arrays while the version
        holds, and finds the pricing code paths already run."""
        for pool in (None, *snapshot.pools):
            self.cheapest(snapshot, pool, DEFAULT_BYTES_PER_STRIPE, 1)

    def _usable_positions(self, snapshot: ClusterSnapshot, pool: str | None) -> np.ndarray:
        """Positions in the price arrays of ``pool``'s usable OSTs, kept per state priced.

        Raises:
            InvalidRequestError: unknown pool.
        """
        arrays = self._state(snapshot)
        pos = self._usable_pos.get(pool)
        if pos is None:
            usable = [o.index for o in pool_members(snapshot, pool) if is_usable(o)]
            pos = self._usable_pos[pool] = np.flatnonzero(np.isin(arrays.index, usable))
        return pos

    def _seconds(self, arrays: OstArrays, positions: np.ndarray, bytes_per_stripe: float) -> np.ndarray:
        b = bytes_per_stripe if bytes_per_stripe > 0 else DEFAULT_BYTES_PER_STRIPE
        return self.cost.completion_s(arrays, 1, b)[positions, 0]

    def price(self, snapshot: ClusterSnapshot, osts: Sequence[int],
              bytes_per_stripe: float) -> ListPrice:
        """The price of ``osts`` writing ``bytes_per_stripe`` bytes each (0: one 1 MiB RPC)."""
        arrays = self._state(snapshot)
        osts = tuple(int(i) for i in osts)
        pos = np.searchsorted(arrays.index, osts)
        known = np.array([p < len(arrays.index) and arrays.index[p] == i
                          for p, i in zip(pos, osts)], dtype=bool)
        secs = np.full(len(osts), math.nan)
        if known.any():
            secs[known] = self._seconds(arrays, pos[known], bytes_per_stripe)
        expected = float(secs.max()) if len(osts) and known.all() else math.nan
        return ListPrice(osts, tuple(float(s) for s in secs), expected, self._version)

    def cheapest(self, snapshot: ClusterSnapshot, pool: str | None, bytes_per_stripe: float,
                 k: int) -> list[tuple[int, float]]:
        """The ``k`` usable OSTs of ``pool`` with the lowest stripe price, cheapest first:
        [(OST index, expected s)]. An unknown pool gives [] (the request was refused)."""
        try:
            pos = self._usable_positions(snapshot, pool)
        except InvalidRequestError:
            return []
        if not len(pos):
            return []
        arrays = self._state(snapshot)
        secs = self._seconds(arrays, pos, bytes_per_stripe)
        order = np.argsort(secs, kind="stable")[:k]
        return [(int(arrays.index[pos[j]]), float(secs[j])) for j in order]

