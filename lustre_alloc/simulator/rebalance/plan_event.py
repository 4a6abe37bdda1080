"""Rebalancing in the simulator: ``[[event]] kind = "rebalance"`` and migrations as traffic.

An event plans a migration with the mapper's planner (:mod:`lustre_alloc.rebalance.plan`,
the same code ``lustre-alloc-rebalance`` runs) or with the naive admin procedure, then
executes it as real traffic:

* a migration reads the file's objects on its old OSTs and writes new objects on its
  new OSTs: two transfers that share OST bandwidth with the jobs' transfers under the
  scenario's network model; the new objects' bytes count as used space as they land,
  the old ones are freed when both transfers are done (``lfs migrate`` swaps layouts
  at the end);
* each migration transfer is capped so that no OST gives it more than
  ``budget_fraction`` of its bandwidth, and an OST takes part in at most one migration
  at a time (source or destination), so migration traffic never exceeds the budget on
  any OST (Pufferscale Eq. 21: reads and writes add up on a disk);
* like a blocking ``lfs migrate`` (which holds a group lock on the file), a job's write
  to a file being migrated waits until the migration ends; its I/O time includes the
  wait. Reads go to the old objects meanwhile. A file deleted or purged during its
  migration cancels it (its new objects are freed).

Triggers: ``at_s`` (once), or ``every_s`` from ``start_s`` (periodic); either may add
``when_max_mean_above``: plan only when OST max/mean used space exceeds it.

Planners: ``pufferscale`` (ours), or ``largest_first``: what admins do today,
``lfs find --ost <fuller OSTs> --size ... | lfs_migrate -y``: the largest files with an
object on an OST above the mean (by more than ``fill_tolerance``), until the bytes
taken equal the excess above the mean; each new layout is chosen when its migration
starts by Lustre's own allocator (``lustre_qos``), and ``lfs_migrate`` runs them one
file at a time (``max_streams = 1`` by default for this planner).

Units: seconds, bytes, bytes/s. Scenario errors name file, key and reason.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lustre_alloc.mapper.policies.placement import AllocationError, CreateRequest
from lustre_alloc.mapper.policies.registry import build_policy
from lustre_alloc.rebalance.budget import MigrationBudget
from lustre_alloc.rebalance.selection import PlannedMove
from lustre_alloc.rebalance.plan import FileTable, MigrationOsts, PlanTargets, plan_migration
from lustre_alloc.simulator.rebalance.service_event import Evacuation, MigrateEvent
from lustre_alloc.simulator.inflight import SimFile, SimTransfer
from lustre_alloc.simulator.metrics import max_mean_ratio


REBALANCE_JOB = "lustre-alloc:rebalance"
"""Job id of migration transfers (kept out of the applications' statistics)."""
PLANNERS = ("pufferscale", "largest_first")
MIB = 1 << 20


@dataclass(frozen=True)
class RebalanceEvent:
    """One ``[[event]] kind = "rebalance"`` table. Times in seconds."""
    budget_fraction: float
    at_s: float | None = None
    every_s: float | None = None
    start_s: float = 0.0
    when_max_mean_above: float | None = None
    planner: str = "pufferscale"
    fill_tolerance: float = 0.02
    load_tolerance: float = 0.10
    max_duration_s: float | None = None
    min_file_bytes: float = 0.0
    max_streams: int | None = None
    weight_load: float = 1.0
    move_largest: bool = False


def parse_rebalance_event(table: Any) -> RebalanceEvent:
    """Build from a scenario ``_Table`` (its ``err`` names file and key).

    Raises:
        ScenarioError: a missing or out-of-range key, neither or both of at_s/every_s.
    """
    table.used.add("kind")
    budget = table.get("budget_fraction", float, minimum=0.0, maximum=1.0)
    if budget <= 0:
        raise table.err("budget_fraction", "must be > 0 (a fraction of each OST's bandwidth)")
    at_s = table.get("at_s", float, None, minimum=0.0)
    every_s = table.get("every_s", float, None, minimum=1.0)
    if (at_s is None) == (every_s is None):
        raise table.err("at_s|every_s", "exactly one of these keys is needed")
    planner = table.get("planner", str, "pufferscale")
    if planner not in PLANNERS:
        raise table.err("planner", f"unknown planner {planner!r} (known: {', '.join(PLANNERS)})")
    default_streams = 1 if planner == "largest_first" else None
    ev = RebalanceEvent(
        budget_fraction=budget, at_s=at_s, every_s=every_s,
        start_s=table.get("start_s", float, 0.0, minimum=0.0),
        when_max_mean_above=table.get("when_max_mean_above", float, None, minimum=1.0),
        planner=planner,
        fill_tolerance=table.get("fill_tolerance", float, 0.02, minimum=0.0),
        load_tolerance=table.get("load_tolerance", float, 0.10, minimum=0.0),
        max_duration_s=table.get("max_duration_s", float, None, minimum=1.0),
        min_file_bytes=table.get("min_file_bytes", float, 0.0, minimum=0.0),
        max_streams=table.get("max_streams", int, default_streams, minimum=1),
        weight_load=table.get("weight_load", float, 1.0, minimum=0.0),
        move_largest=table.get("move_largest", bool, False))
    table.finish()
    return ev


@dataclass
class _Move:
    key: str
    file: SimFile
    new_osts: np.ndarray | None  # positions; None: the allocator chooses at start
    ev: RebalanceEvent | None
    evac: Evacuation | None = None          # an evacuation's move: its budget admits it
    planned: PlannedMove | None = None
    osses: frozenset | None = None          # the OSSes it touches (cached for the walk)


@dataclass
class _Migration:
    move: _Move
    old_osts: np.ndarray
    new_osts: np.ndarray
    volatile: SimFile            # holds the new objects' landed bytes
    transfers: list = field(default_factory=list)
    pending: int = 2
    started_s: float = 0.0


def _closed(budget: MigrationBudget, loads: dict, used: float) -> bool:
    """No move of this budget can start now: paused, data in flight at its ceiling, or
    every OSS at its moves (so the queue need not be walked move by move)."""
    if budget.paused(loads) or budget.full(used):
        return True
    osses = {load.oss for load in loads.values()}
    return all(budget.per_oss.get(o, 0) >= budget.params.max_per_oss for o in osses)


def _free_osses(budget: MigrationBudget, loads: dict) -> set:
    """The OSSes that may take one more move of this budget."""
    return {load.oss for load in loads.values()
            if budget.per_oss.get(load.oss, 0) < budget.params.max_per_oss}


class Rebalancer:
    """The rebalance events of one run, driven by :class:`lustre_alloc.simulator.engine.Simulation`."""

    def __init__(self, sim: Any, events: tuple):  # sim: engine.Simulation (not imported: a cycle)
        self.sim = sim
        self.events = tuple(ev for ev in events if isinstance(ev, RebalanceEvent))
        self.evacuations = [Evacuation(sim, ev) for ev in events if isinstance(ev, MigrateEvent)]
        self.next_s = [ev.at_s if ev.at_s is not None else ev.start_s for ev in self.events]
        n = sim.cl.ost_count
        self.busy = np.zeros(n, dtype=np.int64)        # migrations touching each OST
        self.queue: list[_Move] = []
        self.active: dict[str, _Migration] = {}
        self.finished: list[tuple[float, float, tuple[int, ...]]] = []
        """Each migration done: (bytes, seconds from start to swap, old OST indices)."""
        self.held: dict[str, list] = {}
        self.streams = 0
        self.window_start_s = 0.0
        self.log: list[dict] = []
        self._qos = None
        self._finished: list = []
        self._changed = False
        self._recheck_s = -math.inf

    # -- engine hooks ----------------------------------------------------------------
    def next_wake_s(self) -> float:
        """When the engine must step next for a rebalance event (inf: never)."""
        wakes = self.next_s + [e.next_wake_s() for e in self.evacuations]
        if self.queue:               # queued moves start at the service's next loop
            wakes += [e.next_start_s for e in self.evacuations]
        return min(wakes, default=math.inf)

    def migrating(self, key: str) -> bool:
        return key in self.active

    def hold(self, key: str, rec, now: float) -> None:
        """A job's write to a file being migrated waits for the migration's end."""
        self.held.setdefault(key, []).append((rec, now))
        self.sim.counters["rebalance_writes_held"] += 1

    def tick(self, now: float) -> None:
        """Swap finished migrations; plan the due events; start queued moves whose
        OSTs are free."""
        finished, self._finished = self._finished, []
        for mig, t in finished:
            self._finish(mig, t)
        for i, ev in enumerate(self.events):
            if now >= self.next_s[i]:
                self._plan(ev, now)
                self.next_s[i] = now + ev.every_s if ev.every_s is not None else math.inf
        for evac in self.evacuations:
            self._evacuate(evac, now)
        self._start_queued(now)

    def transfer_done(self, tr, finish_s: float) -> None:
        """One of a migration's two transfers finished (called inside the engine's
        transfer loop: the layout swap waits for the next :meth:`tick`)."""
        mig = self.active.get(tr.rebalance_key)
        if mig is None:
            return
        if tr.write:
            mig.volatile.landed[tr.stripe_pos] += tr.per_ost
        mig.pending -= 1
        if mig.pending == 0:
            self._finished.append((mig, finish_s))

    def break_lease(self, key: str) -> None:
        """A writer opens the file: an evacuation's ``lfs migrate --non-block`` loses its
        lease and stops, the file keeps its old layout (``lfs.c`` ``check_lease()``), and the
        write goes ahead; the next pass plans the file again. A blocking migration (a
        rebalance event's) is left to :meth:`hold` the write instead."""
        mig = self.active.get(key)
        if mig is not None and mig.move.evac is not None:
            self._cancel(key)
            self.sim.counters["evacuation_lease_broken"] += 1

    def on_delete(self, key: str) -> None:
        """The file is going away: cancel its migration and free its new objects."""
        if key not in self.active:
            self.queue = [m for m in self.queue if m.key != key]
            return
        self._cancel(key)
        self.sim.counters["rebalance_cancelled"] += 1
        held = self.held.pop(key, [])
        self.sim.counters["rebalance_writes_dropped_with_file"] += len(held)

    def _cancel(self, key: str) -> None:
        """Stop ``key``'s migration: its transfers end, its new objects are freed."""
        mig = self.active.pop(key)
        sim = self.sim
        live = {id(t) for t in mig.transfers}
        for tr, done in sim.book.cancel(lambda t: id(t) in live):
            if tr.write:
                mig.volatile.landed[tr.stripe_pos] += tr.per_ost * done
        np.subtract.at(sim.used, mig.new_osts, mig.volatile.landed)
        np.maximum(sim.used, 0.0, out=sim.used)
        self._release(mig)

    # -- planning --------------------------------------------------------------------
    def _candidates(self, now: float) -> list[tuple[str, Any]]:
        queued = {m.key for m in self.queue}
        return [(k, f) for k, f in self.sim.files.items()
                if f.transfers == 0 and k not in self.active and k not in queued
                and f.landed.sum() > 0]

    def _plan(self, ev: RebalanceEvent, now: float) -> None:
        sim = self.sim
        ratio = float(max_mean_ratio(sim.used[sim.present]))
        entry = {"time_s": now, "planner": ev.planner, "ost_max_mean": round(ratio, 4),
                 "moves": 0, "bytes": 0.0, "plan_ms": 0.0}
        self.log.append(entry)
        if ev.when_max_mean_above is not None and ratio <= ev.when_max_mean_above:
            return
        if any(m.evac is None for m in self.queue) or any(
                m.move.evac is None for m in self.active.values()):   # the last plan runs
            entry["skipped"] = "previous plan running"
            return
        cands = self._candidates(now)
        if not cands:
            return
        t0 = time.perf_counter()
        window = max(now - self.window_start_s, 1.0)
        self.window_start_s = now
        if ev.planner == "pufferscale":
            moves = self._plan_pufferscale(ev, cands, window)
        else:
            moves = self._plan_largest_first(ev, cands)
        for _, f in cands:
            f.recent_bytes = 0.0
        entry["plan_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        entry["moves"] = len(moves)
        entry["bytes"] = float(sum(m.file.landed.sum() for m in moves))
        self.queue.extend(moves)
        self._changed = True
        sim.counters["rebalance_plans"] += 1
        sim.counters["rebalance_moves_planned"] += len(moves)

    def _evacuate(self, evac: Evacuation, now: float) -> None:
        """An evacuation pass: its queued moves are replaced by the pass's plan (an OST that
        recovered drops out of it: nothing is moved back)."""
        if now < evac.next_s:
            return
        moves = evac.plan(now, set(self.active))
        self.queue = [m for m in self.queue if m.evac is not evac]
        sim = self.sim
        for pm in moves:
            f = sim.files.get(pm.file)
            if f is None:
                continue
            new = np.array([sim.pos_of_index[o] for o in pm.to_osts], dtype=np.int64)
            self.queue.append(_Move(pm.file, f, new, None, evac, pm))
        self._changed = True
        sim.counters["evacuation_passes"] += 1

    def _ost_table(self) -> MigrationOsts:
        """The OSTs the MDS knows (its view: flags from the mapper's state rules)."""
        sim = self.sim
        p = sim.mds.view_p
        table = MigrationOsts.from_snapshot(sim.view, sim.cl.bandwidth_bytes_s[p])
        table.kbytes_total = sim.capacity[p] / 1024
        table.kbytes_used = sim.used[p] / 1024
        return table

    def _plan_pufferscale(self, ev: RebalanceEvent, cands, window_s: float) -> list[_Move]:
        sim = self.sim
        ix = sim.cl.ost_index
        files = FileTable.from_lists(
            [k for k, _ in cands], [float(f.landed.sum()) for _, f in cands],
            [ix[f.osts] for _, f in cands],
            access_bytes_s=[f.recent_bytes / window_s for _, f in cands],
            stripe_size=[f.stripe_size for _, f in cands])
        targets = PlanTargets(budget_fraction=ev.budget_fraction, fill_tolerance=ev.fill_tolerance,
                              load_tolerance=ev.load_tolerance, max_duration_s=ev.max_duration_s,
                              min_file_bytes=ev.min_file_bytes, weight_load=ev.weight_load,
                              move_largest=ev.move_largest)
        plan = plan_migration(self._ost_table(), files, targets)
        moves = []
        for i, row in enumerate(plan.files):
            key, f = cands[int(row)]
            new = np.array([sim.pos_of_index[int(o)] for o in plan.osts_of(i)], dtype=np.int64)
            moves.append(_Move(key, f, new, ev))
        return moves

    def _plan_largest_first(self, ev: RebalanceEvent, cands) -> list[_Move]:
        sim = self.sim
        fill = sim.used / sim.capacity
        mean = sim.used[sim.present].sum() / sim.capacity[sim.present].sum()
        over = sim.present & (fill > mean * (1.0 + ev.fill_tolerance))
        excess = float(((fill - mean) * sim.capacity)[over].sum())
        picked = [(k, f) for k, f in cands if over[f.osts].any()
                  and f.landed.sum() >= ev.min_file_bytes]
        picked.sort(key=lambda kf: -kf[1].landed.sum())
        moves, total = [], 0.0
        for k, f in picked:
            if total >= excess:
                break
            moves.append(_Move(k, f, None, ev))
            total += float(f.landed.sum())
        return moves

    # -- execution -------------------------------------------------------------------
    def _start_queued(self, now: float) -> None:
        # Walk the queue only when something may have changed (a plan, a migration's
        # end) or once a minute (a job's transfer on a queued file may have ended).
        if not self.queue or (now < self._recheck_s and not self._changed and not any(
                now >= e.next_start_s for e in self.evacuations)):
            return
        self._changed = False
        self._recheck_s = now + 60.0
        sim = self.sim
        keep = []
        used = float(sim.used.sum())
        loads = {id(e): e.loads(now) for e in self.evacuations}
        closed = {}
        for e in self.evacuations:        # the service starts moves once a loop
            closed[id(e)] = now < e.next_start_s or _closed(e.budget, loads[id(e)], used)
            if now >= e.next_start_s:
                e.next_start_s = now + e.ev.interval_s
        free = {id(e): _free_osses(e.budget, loads[id(e)]) for e in self.evacuations}
        for j, mv in enumerate(self.queue):
            if sim.files.get(mv.key) is not mv.file:      # deleted since planned
                continue
            if mv.evac is not None:                       # the migration service's budget
                k, budget = id(mv.evac), mv.evac.budget
                if mv.osses is None:
                    mv.osses = frozenset(loads[k][o].oss for o in mv.planned.from_osts
                                         + mv.planned.to_osts if o in loads[k])
                # an OSS at its moves refuses it: checked first, as a set (cheap)
                if closed[k] or not mv.osses <= free[k] or mv.file.transfers or \
                        budget.refusal(mv.planned, loads[k], used):
                    keep.append(mv)
                    continue
                limit_bs = budget.bandwidth_limit(mv.planned, loads[k])   # 0: no -W
                budget.start(mv.planned, loads[k])
                self._launch(mv, mv.new_osts, now, limit_bs or math.inf)
                closed[k] = _closed(budget, loads[k], used)
                free[k] = _free_osses(budget, loads[k])
                continue
            limit = mv.ev.max_streams
            if (limit is not None and self.streams >= limit) or (self.busy > 0).all():
                keep.extend(self.queue[j:])
                break
            f = mv.file
            if f.transfers or (self.busy[f.osts] > 0).any() or \
                    (mv.new_osts is not None and (self.busy[mv.new_osts] > 0).any()):
                keep.append(mv)                           # try again later
                continue
            new = mv.new_osts if mv.new_osts is not None else self._allocate(f, now)
            if new is None:
                sim.counters["rebalance_allocation_failed"] += 1
                continue
            if (self.busy[new] > 0).any():
                keep.append(mv)
                continue
            self._launch(mv, new, now)
        self.queue = [m for m in keep if m.key not in self.active]

    def _allocate(self, f, now: float) -> np.ndarray | None:
        """The naive path: Lustre's allocator picks the new layout (lfs_migrate)."""
        sim = self.sim
        if self._qos is None:
            # the site's LOD settings, if the scenario gives them for this allocator
            self._qos = build_policy("lustre_qos", sim.sc.policy_params, seed=sim.sc.seed, gate=False)
        sim.refresh_statfs(now)
        sim.view.time_s = now
        req = CreateRequest(jobid="lfs_migrate", stripe_count=len(f.osts),
                            stripe_size=f.stripe_size, expected_bytes=int(f.landed.sum()))
        try:
            placement = self._qos.allocate(sim.view, req)
        except AllocationError:
            return None
        return np.array([sim.pos_of_index[i] for i in placement.osts], dtype=np.int64)

    def _launch(self, mv: _Move, new: np.ndarray, now: float,
                limit_bytes_s: float | None = None) -> None:
        """Start ``mv``'s read and write; each capped at ``limit_bytes_s`` (an evacuation's
        per-move rate: ``-W``, or infinite without it), else so that no OST gives it more
        than the event's budget."""
        sim = self.sim
        f = mv.file
        total = float(f.landed.sum())
        old = f.osts.copy()
        bw = sim.cl.bandwidth_bytes_s
        budget = mv.ev.budget_fraction if mv.ev is not None else 1.0
        vol = SimFile(job=REBALANCE_JOB, osts=new, stripe_size=f.stripe_size, size=f.size,
                    landed=np.zeros(len(new)))
        nz = np.nonzero(f.landed)[0]
        rd_per = f.landed[nz].astype(float)
        wr_per = f.landed.astype(float)     # same RAID0 pattern, same stripe count
        wz = np.nonzero(wr_per)[0]
        ops = max(1, int(total // MIB))
        # Rate cap: no OST gives this transfer more than budget x its bandwidth.
        rd_cap = float(np.min(budget * bw[old[nz]] / (rd_per / total)))
        wr_cap = float(np.min(budget * bw[new[wz]] / (wr_per[wz] / total)))
        rd = SimTransfer(False, REBALANCE_JOB, None, old[nz], rd_per, total, total, ops, now)
        wr = SimTransfer(True, REBALANCE_JOB, vol, new[wz], wr_per[wz], total, total, ops, now,
                       stripe_pos=wz)
        if limit_bytes_s is not None:
            rd_cap = wr_cap = limit_bytes_s
        rd.cap_bytes_s, wr.cap_bytes_s = rd_cap, wr_cap
        rd.rebalance_key = wr.rebalance_key = mv.key
        mig = _Migration(mv, old, new, vol, [rd, wr], started_s=now)
        self.active[mv.key] = mig
        np.add.at(self.busy, old, 1)
        np.add.at(self.busy, new, 1)
        self.streams += 1
        sim.add_transfer(rd)
        sim.add_transfer(wr)
        sim.counters["evacuation_moves_started" if mv.evac is not None
                     else "rebalance_moves_started"] += 1

    def _release(self, mig: _Migration) -> None:
        np.subtract.at(self.busy, mig.old_osts, 1)
        np.subtract.at(self.busy, mig.new_osts, 1)
        if mig.move.evac is not None:
            mig.move.evac.budget.end(mig.move.key)
        self.streams -= 1
        self._changed = True

    def _finish(self, mig: _Migration, now: float) -> None:
        sim = self.sim
        key = mig.move.key
        self.active.pop(key, None)
        f = mig.move.file
        np.subtract.at(sim.used, mig.old_osts, f.landed)
        np.maximum(sim.used, 0.0, out=sim.used)
        f.osts = mig.new_osts
        f.landed = mig.volatile.landed
        self._release(mig)
        self._changed = True
        what = "evacuation" if mig.move.evac is not None else "rebalance"
        sim.counters[f"{what}_moves_done"] += 1
        sim.counters[f"{what}_bytes_moved"] += float(f.landed.sum())
        self.finished.append((float(f.landed.sum()), now - mig.started_s,
                              tuple(int(i) for i in sim.cl.ost_index[mig.old_osts])))
        for rec, t0 in self.held.pop(key, []):
            sim.start_record(rec, t0)
