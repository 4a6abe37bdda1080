"""``oracle``: a perfect-information placement, as a reference for the tables.

Simulation only: it reads what no mapper can know, the simulator's true state at each
create (:class:`SimulationTruth`): every OST's bandwidth now (events included), the bytes
every transfer in flight still has to move on each OST, and the new file's true size (the
bytes of the trace record that creates it). It places each file's stripes on the usable
OSTs of its pool (the same Lustre rules as every policy, :mod:`lustre_alloc.mapper.state.ost_health`)
where one stripe would finish first given what is running: under the processor sharing an
OST gives its streams (the simulator's model), a new stream of ``x`` bytes next to streams
with ``r_i`` bytes left finishes after ``(sum_i min(r_i, x) + x) / bandwidth`` (Kleinrock,
*Queueing Systems* II, Section 4.4). It is greedy per file and ignores the network and the
OSS limits and the files that will come: a *reference*, not a bound proven optimal.

The mapper service refuses it (:data:`lustre_alloc.mapper.policies.registry.SIMULATION_ONLY`).
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from lustre_alloc.mapper.policies.placement import CreateRequest, Placement
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import is_usable, members_and_stripe_count

ORACLE = "oracle"


class SimulationTruth:
    """What only the simulator knows, read at the moment of a create.

    Args:
        sim: the running :class:`lustre_alloc.simulator.engine.Simulation`.
    """

    def __init__(self, sim: Any):
        self._sim = sim

    def position(self, index: int) -> int:
        """Simulated position of OST ``index``."""
        return self._sim.pos_of_index[index]

    def bandwidth_bytes_s(self) -> np.ndarray:
        """Each position's write bandwidth now, bytes/s (events included), (N,)."""
        return self._sim.storage.ost_bandwidth_bytes_s

    def remaining_on(self) -> list[list[float]]:
        """Per position, the bytes each transfer in flight still moves there."""
        out: list[list[float]] = [[] for _ in range(self._sim.cl.ost_count)]
        for tr, left in self._sim.book.remaining():
            for p, b in zip(tr.osts.tolist(), (tr.per_ost * left / tr.nbytes).tolist()):
                out[p].append(b)
        return out


@runtime_checkable
class PerfectInformation(Protocol):
    """A policy that reads the simulator's truth (never the mapper's state alone)."""

    def attach(self, truth: SimulationTruth) -> None:
        ...


class Oracle:
    """The perfect-information reference (module docstring).

    Args:
        seed: unused (the choice is deterministic); accepted like every policy's.
    """
    name = ORACLE
    needs_gate = False

    def __init__(self, seed: int = 0):
        self.truth: SimulationTruth | None = None

    def attach(self, truth: SimulationTruth) -> None:
        """The simulation this oracle sees into."""
        self.truth = truth

    def finish_s(self, positions: list[int], stripe_bytes: float) -> np.ndarray:
        """When one new stripe of ``stripe_bytes`` would finish on each of ``positions``
        under processor sharing with what runs there now, s (inf on a stalled OST)."""
        truth = self.truth
        bw = truth.bandwidth_bytes_s()
        left = truth.remaining_on()
        out = np.empty(len(positions))
        for k, p in enumerate(positions):
            ahead = sum(min(r, stripe_bytes) for r in left[p])
            out[k] = (ahead + stripe_bytes) / bw[p] if bw[p] > 0 else np.inf
        return out

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        """The ``count`` usable pool members where a stripe of the file finishes first.

        Raises:
            NoSpaceError, InvalidRequestError: as Lustre's allocators
                (:func:`lustre_alloc.mapper.state.ost_health.members_and_stripe_count`).
        """
        if self.truth is None:
            raise RuntimeError("the oracle reads the simulator's truth: attach() first")
        members, count = members_and_stripe_count(snapshot, request.pool, request.stripe_count)
        usable = [o.index for o in members if is_usable(o)]
        size = request.expected_bytes or request.stripe_size
        finish = self.finish_s([self.truth.position(i) for i in usable], size / count)
        order = np.lexsort((np.array(usable), finish))[:count]
        return Placement(tuple(usable[k] for k in order.tolist()), self.name)
