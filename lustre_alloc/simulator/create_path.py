"""A create on the simulated MDS: which allocator places the new file, what it decided and
what that decision cost.

A job that preloads the shim asks the placement policy under test (the mapper's real
code); one that does not (``managed = false`` or a fraction) goes to Lustre's own
allocator (QOS/RR as restated in ``lustre_alloc/mapper/policies``), which the mapper never hears of: it
sees that job's traffic only in the next samples.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Mapping

from lustre_alloc.mapper.policies.composite import Extent, OstComponent, component_requests
from lustre_alloc.simulator.leasing import LeasedCreates
from lustre_alloc.mapper.policies.placement import (AllocationError, CreateRequest, LearnsSizes,
                                       PlacementPolicy)
from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.simulator.inflight import SimFile
from lustre_alloc.simulator.job_io import AppIo
from lustre_alloc.simulator.oracle import PerfectInformation

AT_CLOSE = "at_close"
"""The size hint of a workload whose shim reports sizes at close (``LUSTRE_ALLOC_SIZES=1``)."""
from lustre_alloc.traces.format import TraceRecord


class CreatePath:
    """Places new files and counts the decisions.

    Args:
        policy: the policy under test.
        lustre_policy: Lustre's allocator for unmanaged jobs (None when there are none).
        unmanaged: jobids whose creates go to ``lustre_policy``.
        counters: the run's counters (``create_failed_<error>``, ``creates_unmanaged``).
        size_hints: jobid -> what its creates say of the file's size
            (:attr:`lustre_alloc.simulator.scenario.WorkloadSpec.size_hint`); absent: nothing (0).
        pfl: the file system's composite default (:attr:`lustre_alloc.simulator.scenario.Scenario.pfl`):
            each file is placed component by component, as the shim asks the mapper
            (:func:`lustre_alloc.mapper.policies.composite.component_requests`) and as Lustre's
            allocator instantiates them; empty: one plain layout per file.
        file_sizes: file id -> its size once its writes are done
            (:func:`lustre_alloc.simulator.file_sizes.final_sizes`): the ``"final"`` hint's value, and
            what a managed file of an ``"at_close"`` workload reports at close to a policy
            that learns sizes (:class:`lustre_alloc.mapper.policies.placement.LearnsSizes`), as the shim
            does with ``LUSTRE_ALLOC_SIZES=1``; None: neither.

    Attributes:
        alloc_ns: the policy's decision time per managed create, ns.
        notes: managed creates per placement note and per fallback reason.
    """

    def __init__(self, policy: PlacementPolicy, lustre_policy: PlacementPolicy | None,
                 unmanaged: frozenset[str], counters: Counter,
                 size_hints: Mapping[str, str | int] | None = None,
                 pfl: tuple[tuple[int, int], ...] = (),
                 file_sizes: Mapping[str, int] | None = None):
        self.policy = policy
        self.pfl = pfl
        self.lustre_policy = lustre_policy
        self.unmanaged = unmanaged
        self.counters = counters
        self.size_hints = size_hints or {}
        self.file_sizes = file_sizes
        self.learns_sizes = file_sizes is not None and isinstance(policy, LearnsSizes)
        self.alloc_ns: list[int] = []
        self.notes: Counter = Counter()

    def request(self, rec: TraceRecord) -> CreateRequest:
        """The create request of the file ``rec`` creates: what the shim would send for it
        (docs/client.md): the jobid, the layout the application asked for, and
        ``expected_bytes`` only as its workload hints it (0 by default: the shim's)."""
        return CreateRequest(jobid=rec.jobid, stripe_count=rec.stripe_count,
                             stripe_size=rec.stripe_size, expected_bytes=self.announced(rec))

    def announced(self, rec: TraceRecord) -> int:
        """The bytes the create of ``rec``'s file announces (its workload's hint; the
        reference knows every file's first write)."""
        if isinstance(self.policy, PerfectInformation):
            hint = "per_file"           # the reference knows every file's true size
        else:
            hint = self.size_hints.get(rec.jobid, "none")
        if hint == "per_file":
            return rec.bytes
        if hint == "final":
            return (self.file_sizes or {}).get(rec.file_id, rec.bytes)
        if hint == AT_CLOSE:
            return 0
        return hint if isinstance(hint, int) else 0

    def close_at(self, rec: TraceRecord) -> int:
        """The size the file ``rec`` creates reports at close (the shim's close report,
        ``LUSTRE_ALLOC_SIZES=1``: a managed job whose workload hints ``"at_close"``, to a
        policy that learns sizes), -1 none."""
        if (not self.learns_sizes or (self.unmanaged and rec.jobid in self.unmanaged)
                or self.size_hints.get(rec.jobid) != AT_CLOSE):
            return -1
        return self.file_sizes.get(rec.file_id, -1)

    def closed(self, f: SimFile) -> None:
        """A file whose size is reported at close has its bytes landed: the application
        closes it and the policy learns its size (the service's path for a ``sizes``
        message, :class:`lustre_alloc.mapper.service.sizes.SizeDesk`)."""
        self.policy.learn_sizes(f.job, [f.size])

    def components(self, rec: TraceRecord) -> list[OstComponent]:
        """The composite default's components for ``rec``'s file (its stripe size)."""
        out, start = [], 0
        for end, count in self.pfl:
            out.append(OstComponent(Extent(start, end), count, rec.stripe_size))
            start = end
        return out

    def place(self, view: ClusterSnapshot, rec: TraceRecord,
              app: AppIo) -> list[tuple[int, ...]] | None:
        """The OST indices of the file ``rec`` creates, in stripe order, one tuple per
        component (one for a plain layout); None when the allocator refused any
        (counted on ``app`` and in the counters)."""
        req = self.request(rec)
        requests = component_requests(req, self.components(rec)) if self.pfl else [req]
        managed = not (self.unmanaged and rec.jobid in self.unmanaged)
        policy = self.policy if managed else self.lustre_policy
        allocate = policy.allocate
        if self.pfl and isinstance(policy, LeasedCreates):
            # the shim leases flat layouts only: a composite file is asked per create
            allocate = policy.allocate_unleased
        t0 = time.perf_counter_ns()
        placed = []
        try:
            for one in requests:
                placed.append(allocate(view, one))
        except AllocationError as e:
            if managed:
                self.alloc_ns.append(time.perf_counter_ns() - t0)
            app.failed_creates += 1
            self.counters[f"create_failed_{type(e).__name__}"] += 1
            return None
        if managed:
            self.alloc_ns.append(time.perf_counter_ns() - t0)
            for placement in placed:
                if placement.note:
                    self.notes[placement.note.split(":")[0]] += 1
                if placement.fallback:
                    self.notes[f"fallback {placement.fallback}"] += 1
        else:
            self.counters["creates_unmanaged"] += 1
        return [p.osts for p in placed]
