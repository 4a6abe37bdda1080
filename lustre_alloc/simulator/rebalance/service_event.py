"""The migration service in the simulator: ``[[event]] kind = "migrate"`` runs its rules
(:mod:`lustre_alloc.rebalance`: evacuation of steered OSTs, and with ``balance_fill`` fill balance)
on the simulated file system.

* **Which OSTs, which files, where**: every ``every_s`` the steering policy's actions in force
  (the ``qos_steer`` row's controller, :meth:`lustre_alloc.mapper.policies.placement.SteersLustre.steering_actions`)
  and the steering policy's own view of the OSTs become the mapper's ``migration_view`` entries
  (:func:`lustre_alloc.mapper.service.migration_view.ost_entries`); :func:`lustre_alloc.rebalance.selection.select`
  picks the OSTs steered for ``evacuate_after_s`` and plans their files' moves with the
  rebalance planner, listing files from the simulator's file table as ``lfs find`` and
  ``lfs getstripe`` would (:class:`SimFiles`). With ``balance_fill``, OSTs fuller than
  ``(1 + fill_tolerance)`` times the mean shed files too. A file written within ``quiet_s``
  waits.
* **When a move starts**: :class:`lustre_alloc.rebalance.budget.MigrationBudget` (bandwidth share per
  OST, moves per OSS, data in flight, pauses), as live.
* **How fast**: as deployed. With ``lfs_bandwidth_option`` (Lustre 2.16+ clients) each move's
  read and write are capped at the budget's per-move rate (the ``lfs migrate -W`` the
  service passes); without it (every earlier release, and the service's default) a move
  runs at whatever speed the OSTs and network give it, and only its start is budgeted
  (bandwidth share, bytes in flight per OST). Either way it shares the OSTs and network
  with the jobs (:mod:`lustre_alloc.simulator.rebalance.plan_event` runs the transfers).

A policy that steers nothing (any row but ``qos_steer``) evacuates nothing, as a mapper
without ``[steer]`` (fill balance still runs). Units: seconds, bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lustre_alloc.rebalance.budget import BudgetParams, MigrationBudget, OstLoad, loads_from_view
from lustre_alloc.mapper.policies.placement import LearnsOstSpeeds
from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.rebalance.lfs import FileListError
from lustre_alloc.rebalance.selection import EvacuationSet, PlannedMove, SelectRules, select
from lustre_alloc.mapper.service.migration_view import ost_entries


@dataclass(frozen=True)
class MigrateEvent:
    """One ``[[event]] kind = "migrate"`` table: the ``[migrate]`` keys the simulator runs
    (``every_s``: its ``replan_s``; moves start once a loop, every ``interval_s``)."""
    every_s: float = 60.0
    interval_s: float = 10.0
    start_s: float = 0.0
    evacuate_after_s: float = 3600.0
    quiet_s: float = 3600.0
    min_file_bytes: float = 0.0
    balance_fill: bool = False
    fill_tolerance: float = 0.02
    budget: BudgetParams = field(default_factory=BudgetParams)
    lfs_bandwidth_option: bool = False
    """Moves run with ``lfs migrate -W`` (``[migrate] lfs_bandwidth_option``, 2.16+)."""


def parse_migrate_event(table: Any) -> MigrateEvent:
    """Build from a scenario ``_Table`` (its ``err`` names file and key).

    Raises:
        ScenarioError: a key out of range (the budget's own checks, named).
    """
    table.used.add("kind")
    kw = dict(ost_share=table.get("ost_share", float, 0.1, minimum=0.0, maximum=1.0),
              max_per_oss=table.get("max_per_oss", int, 2, minimum=1),
              max_in_flight_ratio=table.get("max_in_flight_ratio", float, 0.05, minimum=0.0,
                                            maximum=1.0),
              busy_share=table.get("busy_share", float, 0.8, minimum=0.0),
              ost_in_flight_mib=table.get("ost_in_flight_mib", float, 1024.0, minimum=0.0))
    try:
        budget = BudgetParams(**kw)
    except ValueError as exc:
        raise table.err("ost_share", str(exc)) from None
    ev = MigrateEvent(every_s=table.get("every_s", float, 60.0, minimum=1.0),
                      interval_s=table.get("interval_s", float, 10.0, minimum=0.1),
                       start_s=table.get("start_s", float, 0.0, minimum=0.0),
                       evacuate_after_s=table.get("evacuate_after_s", float, 3600.0, minimum=0.0),
                       quiet_s=table.get("quiet_s", float, 3600.0, minimum=0.0),
                       min_file_bytes=table.get("min_file_bytes", float, 0.0, minimum=0.0),
                       balance_fill=table.get("balance_fill", bool, False),
                       fill_tolerance=table.get("fill_tolerance", float, 0.02, minimum=0.0),
                       budget=budget,
                       lfs_bandwidth_option=table.get("lfs_bandwidth_option", bool, False))
    table.finish()
    return ev


class SimFiles:
    """The simulator's files as the live file source lists them (:class:`lustre_alloc.rebalance.selection.FileSource`)."""

    def __init__(self, sim: Any, now: float, skip: set[str]):
        self.sim, self.now, self.skip = sim, now, skip

    def files_on_ost(self, ost: int) -> list[tuple[str, int]]:
        p = self.sim.pos_of_index.get(ost)
        return [(k, int(f.landed.sum())) for k, f in self.sim.files.items()
                if k not in self.skip and p in f.osts.tolist() and f.landed.sum() > 0]

    def layouts(self, paths: list[str]) -> dict[str, ll.Layout]:
        """Plain layouts (a simulated composite file is not rebalanced: scenario.py)."""
        ix = self.sim.cl.ost_index
        return {k: ll.Layout(magic=ll.LOV_USER_MAGIC_V1, stripe_count=len(f.osts),
                             stripe_size=int(f.stripe_size), pattern=ll.LOV_PATTERN_RAID0,
                             osts=[int(i) for i in ix[f.osts]])
                for k in paths if (f := self.sim.files.get(k)) is not None}

    def pool_osts(self, pool: str) -> set[int]:
        raise FileListError(f"pool {pool}: the simulator has no pools")

    def recently_modified(self, path: str, quiet_s: float) -> bool:
        f = self.sim.files.get(path)
        return f is None or f.transfers > 0 or self.now - f.last_write_s < quiet_s


class Evacuation:
    """One migrate event's planning and admission, for :class:`lustre_alloc.simulator.rebalance.plan_event.Rebalancer`."""

    def __init__(self, sim: Any, ev: MigrateEvent):
        self.sim, self.ev = sim, ev
        self.budget = MigrationBudget(ev.budget, rate_capped=ev.lfs_bandwidth_option)
        self.next_s = ev.start_s
        self.next_start_s = ev.start_s
        self.evacuating: list[int] = []
        self.evac_set = EvacuationSet(ev.evacuate_after_s)
        rate = float(np.median(sim.cl.bandwidth_bytes_s))
        self.rules = SelectRules(ost_rate_bytes_s=rate, ost_share=ev.budget.ost_share,
                                 evacuate_after_s=ev.evacuate_after_s, quiet_s=ev.quiet_s,
                                 min_file_bytes=ev.min_file_bytes,
                                 fill_tolerance=ev.fill_tolerance,
                                 balance_fill=ev.balance_fill)
        self.log: list[dict] = []

    def _view(self, now: float) -> dict[str, Any]:
        """The mapper's ``migration_view`` here: the steering policy's own view and actions,
        else the MDS's view with no steering (and the policy's speed estimates, if any)."""
        sim = self.sim
        watcher, watch = sim.watcher, sim.watch
        if watcher is not None and watch is not None:
            snap = watch.view
            steered = {a["ost"]: a for a in watcher.steering_actions()}
            ratios = watcher.steering_speed_ratios()
        else:
            if sim.mds.statfs_due(now):
                sim.refresh_statfs(now)
            snap, steered = sim.view, {}
            ratios = sim.policy.ost_speed_ratios() if isinstance(sim.policy, LearnsOstSpeeds) \
                else {}
        return {"time_s": now, "osts": ost_entries(snap, ratios, steered)}

    def loads(self, now: float) -> dict[int, OstLoad]:
        view = self._view(now)
        loads = loads_from_view(view["osts"], self.rules.ost_rate_bytes_s)
        self.budget.refill(now, loads)
        return loads

    def plan(self, now: float, busy: set[str]) -> list[PlannedMove]:
        """The moves of this pass (empty before ``start_s`` and between passes)."""
        if now < self.next_s:
            return []
        self.next_s = now + self.ev.every_s
        view = self._view(now)
        sel = select(self.rules, view, self.evac_set.update(view["osts"], now),
                     SimFiles(self.sim, now, busy), {})
        if sel.evacuating != self.evacuating:
            self.log.append({"time_s": now, "evacuating": sel.evacuating,
                             "moves": len(sel.moves),
                             "bytes": float(sum(m.size for m in sel.moves))})
            self.evacuating = sel.evacuating
        return sel.moves

    def next_wake_s(self) -> float:
        return self.next_s
