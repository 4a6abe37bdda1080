"""Which files the migration service moves, and where: the mapper's evidence, ``lfs``'s file
lists and the rebalance planner (:func:`lustre_alloc.rebalance.plan.plan_migration`, the same
code as ``lustre-alloc-rebalance plan``).

* **Evacuation**: an OST the mapper has steered (:mod:`lustre_alloc.mapper.steer`) for slowness for at
  least ``evacuate_after_s`` (from the steering's ``slow_since_s``) is evacuated
  (:class:`EvacuationSet`): it is the planner's decommissioned set (Pufferscale's
  ``I^-``: every listed file with an object there moves off). An OST not steered for
  ``evacuate_after_s`` (it recovered) leaves the set; its files stay wherever they are by
  then, and nothing is moved back.
* **Fill balance** (``balance_fill``): OSTs fuller than ``(1 + fill_tolerance)`` times the
  mean shed files to the others, as the planner decides.

Targets are the OSTs the mapper would place on now (``receives``: its usability rule, not
steered), and among them only those of every pool the file's layout names (a listed OST
outside the pool makes LOD drop the pool: :mod:`lustre_alloc.rebalance.keep`). Each file's layout
is read from the file itself when planned, whatever listed it, so a file already moved
since it was listed (a Robinhood database lags the file system) is not moved again. Files
are skipped (counted, by reason) when smaller than ``min_file_bytes``, modified within
``quiet_s``, given up by the journal, gone or without a readable layout, no longer on a
source OST, in a layout no move can keep (:func:`lustre_alloc.rebalance.keep.unmovable`: FLR, SEL,
...), or in a pool whose OSTs cannot be listed.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from lustre_alloc.common import lustre_layout as ll
from lustre_alloc.rebalance import keep as keeper
from lustre_alloc.rebalance.budget import Move
from lustre_alloc.rebalance.config import MigrateConfig
from lustre_alloc.rebalance.journal import MoveState
from lustre_alloc.rebalance.lfs import FileListError, Lfs
from lustre_alloc.rebalance.plan import FileTable, MigrationOsts, PlanTargets, plan_migration

MIB = 1 << 20


@dataclass
class PlannedMove(Move):
    """A move: the file's layout when planned (``from_osts`` are its
    :func:`lustre_alloc.rebalance.keep.objects`), its stripe size, and why it is made."""
    stripe_size: int = 0
    why: str = ""
    layout: ll.Layout | None = None

    def options(self) -> list[str]:
        """``lfs migrate``'s layout options: the layout with ``from_osts[k]`` replaced by
        ``to_osts[k]`` (:func:`lustre_alloc.rebalance.keep.migrate_options`). Raises ValueError."""
        if self.layout is None:
            raise ValueError(f"{self.file}: a move without its layout")
        return keeper.migrate_options(self.layout, keeper.remap(self.from_osts, self.to_osts))


@dataclass
class Selection:
    """One planning pass: the moves in order, the OSTs evacuated, what was skipped, and per
    source OST the files listed on it (``listed``) and those left there after the pass's
    moves, by reason (``left``: skipped, out of scope, or unplanned)."""
    moves: list[PlannedMove] = field(default_factory=list)
    evacuating: list[int] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    fill_max_mean: float = 1.0
    listed: dict[int, int] = field(default_factory=dict)
    left: dict[int, Counter] = field(default_factory=dict)


def steered_for(view_osts: Sequence[Mapping[str, Any]], now_s: float) -> dict[int, float]:
    """OST -> seconds the mapper has steered it for slowness at ``now_s`` (its clock),
    counted from ``slow_since_s`` (:class:`lustre_alloc.mapper.steer.controller.SteerAction`: a probe that
    returned the OST and found it still slow within ``action_lease_s`` does not restart the count)."""
    out = {}
    for o in view_osts:
        s = o.get("steered")
        if s:
            out[int(o["ost"])] = now_s - float(s.get("slow_since_s", s["since_s"]))
    return out


class EvacuationSet:
    """The OSTs being evacuated, with hysteresis so the steering's probes do not stop and
    restart an evacuation: an OST enters once steered for ``after_s``; it leaves (it
    recovered: nothing is moved back) once it has not been steered for ``after_s``.

    A steered OST gets no new objects, so its samples soon carry no evidence and the
    steering returns it to probe its speed (:mod:`lustre_alloc.mapper.steer.controller`); on a
    file system written in hourly bursts the probe can last longer than the steering's
    strike window, and the OST is steered again as a new action."""

    def __init__(self, after_s: float):
        self.after_s = after_s
        self.members: set[int] = set()
        self.last_steered_s: dict[int, float] = {}

    def update(self, view_osts: Sequence[Mapping[str, Any]], now_s: float) -> list[int]:
        steered = steered_for(view_osts, now_s)
        for ost, held_s in steered.items():
            self.last_steered_s[ost] = now_s
            if held_s >= self.after_s:
                self.members.add(ost)
        for ost in list(self.members):
            if ost not in steered and now_s - self.last_steered_s.get(ost, now_s) >= self.after_s:
                self.members.discard(ost)
        return sorted(self.members)


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


class FileSource(Protocol):
    """Where the files come from: ``lfs`` on a live file system (:class:`LfsFiles`), the
    file table in the simulator (:mod:`lustre_alloc.simulator.rebalance.service_event`)."""

    def files_on_ost(self, ost: int) -> list[tuple[str, int]]:
        """``(path, size bytes)`` of the regular files with an object on ``ost``."""

    def layouts(self, paths: list[str]) -> dict[str, ll.Layout]:
        """``{path: layout}`` read now; a file gone or unreadable is left out."""

    def pool_osts(self, pool: str) -> set[int]:
        """The OSTs of ``pool``; raises :class:`lustre_alloc.rebalance.lfs.FileListError`."""

    def recently_modified(self, path: str, quiet_s: float) -> bool:
        """Written within the last ``quiet_s`` seconds (or gone: not a candidate now)."""


@dataclass
class LfsFiles:
    """The live file source: ``lfs find`` under ``mount``, layouts and mtimes from the files,
    pools from ``lfs pool_list``."""
    lfs: Lfs
    mount: str
    workdir: Path
    clock: Any
    fsname: str = ""

    def files_on_ost(self, ost: int) -> list[tuple[str, int]]:
        return self.lfs.files_on_ost(self.mount, ost, self.workdir)

    def layouts(self, paths: list[str]) -> dict[str, ll.Layout]:
        return self.lfs.layouts(paths)

    def pool_osts(self, pool: str) -> set[int]:
        return self.lfs.pool_osts(self.fsname, pool, self.workdir)

    def recently_modified(self, path: str, quiet_s: float) -> bool:
        return written_within(path, self.clock(), quiet_s)


def written_within(path: str, now_s: float, quiet_s: float) -> bool:
    """``path`` was modified within ``quiet_s`` of ``now_s`` (its mtime), or cannot be
    stat-ed now (gone: not a candidate this pass)."""
    try:
        return now_s - os.stat(path).st_mtime < quiet_s
    except OSError:
        return True


@dataclass(frozen=True)
class SelectRules:
    """The ``[migrate]`` keys selection reads (:class:`lustre_alloc.rebalance.config.MigrateConfig`);
    the scope (``pools``, ``paths``, ``exclude``): :func:`in_scope`."""
    ost_rate_bytes_s: float
    ost_share: float
    evacuate_after_s: float
    quiet_s: float
    min_file_bytes: float
    fill_tolerance: float
    balance_fill: bool
    pools: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, cfg: MigrateConfig) -> "SelectRules":
        return cls(cfg.ost_rate_mib_s * MIB, cfg.budget.ost_share, cfg.evacuate_after_s,
                   cfg.quiet_s, cfg.min_file_bytes, cfg.fill_tolerance, cfg.balance_fill,
                   tuple(cfg.pools), tuple(cfg.paths), tuple(cfg.exclude))


def in_scope(rules: SelectRules, path: str) -> bool:
    """``path`` is under one of ``paths`` (all when empty) and matches none of the
    ``exclude`` patterns (:func:`fnmatch.fnmatchcase` on the whole path)."""
    if rules.paths and not any(path == p or path.startswith(p.rstrip("/") + "/")
                               for p in rules.paths):
        return False
    return not any(fnmatch.fnmatchcase(path, pat) for pat in rules.exclude)


def select(rules: SelectRules, view: Mapping[str, Any], evacuating: list[int],
           source: FileSource, journal: Mapping[str, MoveState]) -> Selection:
    """Plan the next moves off ``evacuating`` (:class:`EvacuationSet` and an admin's drains)
    and, with ``balance_fill``, off over-full OSTs (see the module doc), files in scope only
    (:func:`in_scope`, ``pools``). Raises :class:`lustre_alloc.rebalance.lfs.FileListError` from a
    live source."""
    osts = view["osts"]
    sel = Selection(evacuating=list(evacuating))
    table = migration_osts(osts, rules.ost_rate_bytes_s, set(sel.evacuating))
    fill = table.kbytes_used / table.kbytes_total
    sel.fill_max_mean = float(fill.max() / fill.mean()) if fill.mean() > 0 else 1.0
    sources = list(sel.evacuating)
    if rules.balance_fill:
        sources += [o for o in _over_full(table, rules.fill_tolerance) if o not in sources]
    if not sources or not table.can_receive.any():
        return sel
    listed: dict[str, int] = {}
    on: dict[str, list[int]] = {}
    for ost in sources:
        files = source.files_on_ost(ost)
        sel.listed[ost] = len(files)
        for path, size in files:
            listed[path] = size
            on.setdefault(path, []).append(ost)
    keep: list[tuple[str, int]] = []

    def skip(path: str, why: str) -> None:
        sel.skipped[why] += 1
        for o in on.get(path, ()):
            sel.left.setdefault(o, Counter())[why] += 1
    for path, size in listed.items():
        state = journal.get(path)
        if not in_scope(rules, path):
            skip(path, "out of scope")
        elif state is not None and state.event == "given_up":
            skip(path, "given up")
        elif size < rules.min_file_bytes:
            skip(path, "small")
        elif source.recently_modified(path, rules.quiet_s):
            skip(path, "recently modified")
        else:
            keep.append((path, size))
    layouts = source.layouts([p for p, _ in keep]) if keep else {}
    known = set(int(i) for i in table.index)
    pool_cache: dict[str, set[int]] = {}

    def pool_osts(name: str) -> set[int]:
        if name not in pool_cache:
            pool_cache[name] = source.pool_osts(name)
        return pool_cache[name]

    groups: dict[frozenset[int] | None, list[tuple[str, int, ll.Layout]]] = {}
    for path, size in keep:
        lay = layouts.get(path)
        if lay is None:
            sel.skipped["gone or no layout"] += 1
            continue
        why_not = keeper.unmovable(lay)
        objs = keeper.objects(lay)
        if why_not is not None:
            skip(path, why_not)
        elif not set(objs) & set(sources):
            sel.skipped["moved since listed"] += 1
        elif not set(objs) <= known:
            skip(path, "OST unknown to the mapper")
        elif rules.pools and not keeper.pools(lay) & set(rules.pools):
            skip(path, "out of scope")
        else:
            try:
                allowed = keeper.allowed_targets(lay, pool_osts)
            except FileListError:
                skip(path, "pool not listable")
                continue
            groups.setdefault(None if allowed is None else frozenset(allowed), []).append(
                (path, size, lay))
    for allowed, rows in groups.items():
        sel.moves += _plan_group(rules, table, rows, allowed, set(sel.evacuating))
    planned = {m.file for m in sel.moves}
    for rows in groups.values():
        for path, _, _ in rows:
            if path not in planned:          # the planner kept it (its target reached)
                for o in on.get(path, ()):
                    sel.left.setdefault(o, Counter())["not planned"] += 1
    return sel


def _plan_group(rules: SelectRules, table: MigrationOsts,
                rows: list[tuple[str, int, ll.Layout]], allowed: frozenset[int] | None,
                draining: set[int]) -> list[PlannedMove]:
    """The planner's moves for files that may go to ``allowed`` OSTs only (None: any)."""
    if allowed is not None:
        table = dataclasses.replace(table, can_receive=table.can_receive & np.isin(
            table.index, list(allowed)))
        if not table.can_receive.any():
            return []
    files = FileTable.from_lists([p for p, _, _ in rows], [s for _, s, _ in rows],
                                 [keeper.objects(lay) for _, _, lay in rows],
                                 stripe_size=[keeper.stripe_size(lay) for _, _, lay in rows])
    plan = plan_migration(table, files, PlanTargets(budget_fraction=rules.ost_share,
                                                    fill_tolerance=rules.fill_tolerance,
                                                    weight_load=0.0))
    moves = []
    for i, f in enumerate(plan.files.tolist()):
        old = [int(o) for o in files.ost_index[files.ost_ptr[f]:files.ost_ptr[f + 1]]]
        why = (f"evacuate OST {min(draining & set(old))}" if draining & set(old)
               else "fill balance")
        moves.append(PlannedMove(file=files.ids[f], size=float(files.size_bytes[f]),
                                 from_osts=old, to_osts=[int(o) for o in plan.osts_of(i)],
                                 stripe_size=int(files.stripe_size[f]), why=why,
                                 layout=rows[f][2]))
    return moves
