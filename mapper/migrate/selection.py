"""Which files the migration service moves, and where: the mapper's evidence, ``lfs``'s file
lists and the rebalance planner (:func:`mapper.rebalance.planner.plan_migration`, the same
code as ``lustre-alloc-rebalance plan``).

* **Evacuation**: an OST the mapper has steered (:mod:`mapper.steer`) for at least
  ``evacuate_after_s`` is evacuated: it is the planner's decommissioned set (Pufferscale's
  ``I^-``: every listed file with an object there moves off). An OST whose steering ended
  (it recovered) leaves the set; its files stay wherever they are by then, and nothing is
  moved back.
* **Fill balance** (``balance_fill``): OSTs fuller than ``(1 + fill_tolerance)`` times the
  mean shed files to the others, as the planner decides.

Targets are the OSTs the mapper would place on now (``receives``: its usability rule, not
steered). Files are skipped (counted) when smaller than ``min_file_bytes``, modified within
``quiet_s``, given up by the journal, or without a readable layout.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from mapper.migrate.budget import Move
from mapper.migrate.config import MigrateConfig
from mapper.migrate.journal import MoveState
from mapper.migrate.lfs import Lfs
from mapper.rebalance.planner import FileTable, MigrationOsts, PlanTargets, plan_migration

MIB = 1 << 20


@dataclass
class PlannedMove(Move):
    """A move with its new layout's stripe size and why it is made."""
    stripe_size: int = 0
    why: str = ""


@dataclass
class Selection:
    """One planning pass: the moves in order, the OSTs evacuated, and what was skipped."""
    moves: list[PlannedMove] = field(default_factory=list)
    evacuating: list[int] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    fill_max_mean: float = 1.0


def evacuating(view_osts: Sequence[Mapping[str, Any]], now_s: float,
               after_s: float) -> list[int]:
    """OSTs steered by the mapper for at least ``after_s`` at ``now_s`` (its clock)."""
    return sorted(int(o["ost"]) for o in view_osts
                  if o.get("steered") and now_s - float(o["steered"]["since_s"]) >= after_s)


def migration_osts(view_osts: Sequence[Mapping[str, Any]], rate_bytes_s: float,
                   draining: set[int]) -> MigrationOsts:
    """The planner's OST table from the mapper's view (``migration_view`` entries)."""
    idx = np.array([int(o["ost"]) for o in view_osts], dtype=np.int64)
    return MigrationOsts(
        index=idx,
        kbytes_total=np.array([max(1, int(o["kbytes_total"])) for o in view_osts], dtype=float),
        kbytes_used=np.array([int(o["kbytes_used"]) for o in view_osts], dtype=float),
        rate_bytes_s=np.array([rate_bytes_s * max(float(o.get("speed_ratio", 1.0)), 1e-3)
                               for o in view_osts]),
        can_receive=np.array([bool(o.get("receives")) and int(o["ost"]) not in draining
                              for o in view_osts]),
        can_read=np.array([bool(o.get("available", True)) for o in view_osts]),
        draining=np.array([int(o["ost"]) in draining for o in view_osts]))


def _over_full(table: MigrationOsts, tolerance: float) -> list[int]:
    fill = table.kbytes_used / table.kbytes_total
    ok = table.can_receive | table.draining
    mean = float(fill[ok].mean()) if ok.any() else 0.0
    return [int(i) for i, f in zip(table.index, fill) if mean > 0 and f > (1 + tolerance) * mean]


def select(cfg: MigrateConfig, view: Mapping[str, Any], lfs: Lfs, workdir: Path,
           journal: Mapping[str, MoveState], now_wall_s: float) -> Selection:
    """Plan the next moves (see the module doc). Raises :class:`mapper.migrate.lfs.LfsError`."""
    osts = view["osts"]
    sel = Selection(evacuating=evacuating(osts, float(view["time_s"]), cfg.evacuate_after_s))
    table = migration_osts(osts, cfg.ost_rate_mib_s * MIB, set(sel.evacuating))
    fill = table.kbytes_used / table.kbytes_total
    sel.fill_max_mean = float(fill.max() / fill.mean()) if fill.mean() > 0 else 1.0
    sources = list(sel.evacuating)
    if cfg.balance_fill:
        sources += [o for o in _over_full(table, cfg.fill_tolerance) if o not in sources]
    if not sources or not table.can_receive.any():
        return sel
    listed: dict[str, int] = {}
    for ost in sources:
        for path, size in lfs.files_on_ost(cfg.mount, ost, workdir):
            listed[path] = size
    keep: list[tuple[str, int]] = []
    for path, size in listed.items():
        state = journal.get(path)
        if state is not None and state.event == "given_up":
            sel.skipped["given up"] += 1
        elif size < cfg.min_file_bytes:
            sel.skipped["small"] += 1
        elif _recently_modified(path, now_wall_s, cfg.quiet_s):
            sel.skipped["recently modified"] += 1
        else:
            keep.append((path, size))
    layouts = lfs.layouts([p for p, _ in keep], workdir)
    known = set(int(i) for i in table.index)
    rows = [(p, s, layouts[p]) for p, s in keep if p in layouts and set(layouts[p][0]) <= known]
    sel.skipped["no layout"] += len(keep) - len(rows)
    if not rows:
        return sel
    files = FileTable.from_lists([p for p, _, _ in rows], [s for _, s, _ in rows],
                                 [lay[0] for _, _, lay in rows],
                                 stripe_size=[lay[1] for _, _, lay in rows])
    plan = plan_migration(table, files, PlanTargets(budget_fraction=cfg.budget.ost_share,
                                                    fill_tolerance=cfg.fill_tolerance,
                                                    weight_load=0.0))
    draining = set(sel.evacuating)
    for i, f in enumerate(plan.files.tolist()):
        old = [int(o) for o in files.ost_index[files.ost_ptr[f]:files.ost_ptr[f + 1]]]
        why = (f"evacuate OST {min(draining & set(old))}" if draining & set(old)
               else "fill balance")
        sel.moves.append(PlannedMove(file=files.ids[f], size=float(files.size_bytes[f]),
                                     from_osts=old, to_osts=[int(o) for o in plan.osts_of(i)],
                                     stripe_size=int(files.stripe_size[f]), why=why))
    return sel


def _recently_modified(path: str, now_wall_s: float, quiet_s: float) -> bool:
    try:
        return now_wall_s - os.stat(path).st_mtime < quiet_s
    except OSError:
        return True             # gone or unreadable now: not a candidate this pass
