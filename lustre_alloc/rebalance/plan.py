"""The migration planner: which files move to which OSTs, in what order, how long.

What is taken from Pufferscale (Cheriere, Dorier, Antoniu, Wild, Leyffer, Ross,
"Pufferscale: Rescaling HPC Data Services for High Energy Physics Applications",
CCGrid 2020):

* The three objectives, Section III-C: load balance (Eq. 2, the most loaded server),
  data balance (Eq. 4, the fullest server) and the duration of the operation, with the
  storage-bottleneck form of the duration of Section VIII-A (Eq. 21: an OST's time is
  the *sum* of what it reads and what it writes, since a disk cannot do both at full
  speed).
* The targets of Section V-B1: mean load (Eq. 8) and mean data (Eq. 9) over the servers
  that stay; decommissioned servers (``I^-``) must end empty (Eq. 7).
* Algorithm 1 ("fixing buckets"): on each server, buckets sorted by decreasing norm
  (Eq. 14; weighted Eq. 20) stay while the running size and load fit within the
  targets; the rest are to be allocated.
* Algorithm 2 ("allocation"): the remaining buckets, by decreasing norm, each go to
  the server minimising the penalty of Eq. 15 (the cube of each objective over its
  target; 0.5 weight on the duration term), the server it came from included.
* The weights of Section V-C (``W_L``, ``W_D``, ``W_T``) as parameters.

What differs, and why:

* Buckets are Lustre files, striped RAID0 over ``k`` OSTs: a file's bytes and access
  rate are spread evenly over its stripes, it moves as a whole (``lfs migrate``
  rewrites every object) and needs ``k`` distinct OSTs.
* OSTs are heterogeneous: data balance is *fill fraction* (used / size, as ``lfs df``
  shows it) and load balance is load per unit of the OST's measured bandwidth, so
  Eq. 8/9 become the total over the total capacity/bandwidth of the OSTs that stay.
* The file list may be partial (``lfs find --size +1G``): space the list does not
  cover stays where it is and counts toward its OST's fill.
* Algorithm 2 is run in batches so the planner is vectorised (1M files, 3600 OSTs in
  seconds, see ``bench/rebalance_plan.py``): each batch gives the next files (by
  decreasing norm) to the OSTs with the lowest penalty after one average file, one
  stripe per OST per batch, largest file to the lowest penalty (the LPT rule the paper
  cites [31]). A batch is half the receiving OSTs, so penalties are refreshed often.
* Fixing keeps files up to ``(1 + tolerance)`` times the targets, not exactly the
  targets: the caller states how close to the mean is good enough, and a drifted
  cluster then moves only its excess.
* The duration has a budget: each OST may spend ``budget_fraction`` of its measured
  bandwidth on migration (reads plus writes, Eq. 21); ``max_duration_s`` cuts the plan
  at that estimated time (the ``W_T`` trade-off made explicit).
* Never-usable targets: an OST is a destination only if the mapper's own usability
  rule (:func:`lustre_alloc.mapper.state.ost_health.unusable_reason`) accepts it; an OST flagged
  ``NOPRECREATE`` (``max_create_count=0``, Lustre's way to drain an OST) is treated as
  decommissioned (``I^-``): its listed files are all moved off. A file with an object
  on an inactive OST cannot be read and is not moved.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot, OstFlag
from lustre_alloc.mapper.state.ost_health import enospc_reserve_bytes, unusable_reason

KIB = 1024


class PlanInputError(ValueError):
    """Bad planner input: the message names the file, OST or field at fault."""


@dataclass
class MigrationOsts:
    """The OSTs as the planner sees them, all arrays of shape (N,), index order.

    Attributes:
        index: Lustre OST index.
        kbytes_total: size, KiB (``lfs df`` 1K-blocks).
        kbytes_used: used space, KiB.
        rate_bytes_s: measured bandwidth of the OST, bytes/s (the budget is a
            fraction of it).
        can_receive: may get new objects (the mapper's usability rule, not draining).
        can_read: its objects can be read (OST active).
        draining: to be emptied (``NOPRECREATE``): Pufferscale's decommissioned set.
    """
    index: np.ndarray
    kbytes_total: np.ndarray
    kbytes_used: np.ndarray
    rate_bytes_s: np.ndarray
    can_receive: np.ndarray
    can_read: np.ndarray
    draining: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.index)
        for name in ("kbytes_total", "kbytes_used", "rate_bytes_s", "can_receive",
                     "can_read", "draining"):
            if len(getattr(self, name)) != n:
                raise PlanInputError(f"OST table: {name} has {len(getattr(self, name))} "
                                     f"entries for {n} OSTs")
        if n == 0:
            raise PlanInputError("OST table: no OSTs")
        if len(np.unique(self.index)) != n:
            raise PlanInputError("OST table: duplicate OST index")
        bad = np.nonzero(~(self.rate_bytes_s > 0))[0]
        if len(bad):
            raise PlanInputError(f"OST {int(self.index[bad[0]])}: bandwidth must be > 0 "
                                 f"bytes/s, got {self.rate_bytes_s[bad[0]]}")
        bad = np.nonzero(~(self.kbytes_total > 0))[0]
        if len(bad):
            raise PlanInputError(f"OST {int(self.index[bad[0]])}: kbytes_total must be > 0")

    @property
    def count(self) -> int:
        return int(len(self.index))

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot,
                      rate_bytes_s: float | Mapping[int, float] | np.ndarray) -> "MigrationOsts":
        """From the mapper's :class:`ClusterSnapshot`.

        ``rate_bytes_s``: one bandwidth for every OST, a map OST index -> bytes/s, or an
        array in snapshot order. Raises :class:`PlanInputError` for an OST without one.
        """
        osts = snapshot.osts
        index = np.array([o.index for o in osts], dtype=np.int64)
        if isinstance(rate_bytes_s, Mapping):
            missing = [o.index for o in osts if o.index not in rate_bytes_s]
            if missing:
                raise PlanInputError(f"OST {missing[0]}: no measured bandwidth")
            rate = np.array([float(rate_bytes_s[o.index]) for o in osts])
        else:
            rate = np.broadcast_to(np.asarray(rate_bytes_s, dtype=float), (len(osts),)).copy()
        draining = np.array([bool(o.flags & OstFlag.NOPRECREATE) for o in osts])
        usable = np.array([unusable_reason(o) is None for o in osts])
        return cls(index=index,
                   kbytes_total=np.array([o.kbytes_total for o in osts], dtype=float),
                   kbytes_used=np.array([o.kbytes_used for o in osts], dtype=float),
                   rate_bytes_s=rate, can_receive=usable & ~draining,
                   can_read=np.array([o.active for o in osts]), draining=draining)


@dataclass
class FileTable:
    """The files that may move, CSR layout for their OSTs.

    Attributes:
        ids: path (what ``lfs migrate`` takes) or FID per file, shape (M,).
        size_bytes: file size, bytes, shape (M,).
        ost_ptr: shape (M+1,); file ``f``'s OSTs are ``ost_index[ost_ptr[f]:ost_ptr[f+1]]``
            in stripe order (its stripe count is the length).
        ost_index: Lustre OST indices, shape (nnz,).
        access_bytes_s: recent access rate (read + write), bytes/s, shape (M,); zeros
            when unknown (the load objective then plays no part).
        stripe_size: stripe size in bytes, 0 when unknown, shape (M,).
    """
    ids: Sequence[str]
    size_bytes: np.ndarray
    ost_ptr: np.ndarray
    ost_index: np.ndarray
    access_bytes_s: np.ndarray
    stripe_size: np.ndarray

    @property
    def count(self) -> int:
        return int(len(self.size_bytes))

    @classmethod
    def from_lists(cls, ids: Sequence[str], sizes: Sequence[float],
                   osts: Sequence[Sequence[int]], access_bytes_s: Sequence[float] | None = None,
                   stripe_size: Sequence[int] | None = None) -> "FileTable":
        """Build from Python lists (one OST list per file). Validates like :meth:`validate`."""
        m = len(ids)
        if len(sizes) != m or len(osts) != m:
            raise PlanInputError(f"file list: {m} ids, {len(sizes)} sizes, {len(osts)} OST lists")
        lens = np.fromiter((len(o) for o in osts), dtype=np.int64, count=m)
        ptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        flat = np.fromiter((i for o in osts for i in o), dtype=np.int64, count=int(ptr[-1]))
        acc = np.zeros(m) if access_bytes_s is None else np.asarray(access_bytes_s, dtype=float)
        ss = np.zeros(m, dtype=np.int64) if stripe_size is None else np.asarray(stripe_size,
                                                                                 dtype=np.int64)
        return cls(ids=list(ids), size_bytes=np.asarray(sizes, dtype=float), ost_ptr=ptr,
                   ost_index=flat, access_bytes_s=acc, stripe_size=ss)

    def validate(self, osts: MigrationOsts) -> np.ndarray:
        """Check shapes and values against ``osts``; return each entry's OST position.

        Raises:
            PlanInputError: naming the first file with no OST, a negative size or access
                rate, an OST twice, or an OST index the cluster does not have.
        """
        m = self.count
        for name in ("access_bytes_s", "stripe_size"):
            if len(getattr(self, name)) != m:
                raise PlanInputError(f"file list: {name} has {len(getattr(self, name))} "
                                     f"entries for {m} files")
        if len(self.ids) != m or len(self.ost_ptr) != m + 1:
            raise PlanInputError(f"file list: ids/ost_ptr do not match {m} files")
        k = np.diff(self.ost_ptr)
        for mask, what in ((k <= 0, "has no OST"), (~(self.size_bytes >= 0), "has a negative size"),
                           (~(self.access_bytes_s >= 0), "has a negative access rate")):
            bad = np.nonzero(mask)[0]
            if len(bad):
                raise PlanInputError(f"file {self.ids[bad[0]]}: {what}")
        order = np.argsort(osts.index)
        sorted_index = osts.index[order]
        at = np.searchsorted(sorted_index, self.ost_index)
        at_c = np.minimum(at, len(sorted_index) - 1)
        unknown = np.nonzero(sorted_index[at_c] != self.ost_index)[0]
        if len(unknown):
            f = int(np.searchsorted(self.ost_ptr, unknown[0], side="right") - 1)
            raise PlanInputError(f"file {self.ids[f]}: unknown OST {int(self.ost_index[unknown[0]])}"
                                 f" (the cluster state has {osts.count} OSTs)")
        pos = order[at_c]
        multi = np.nonzero(k > 1)[0]
        if len(multi):
            entry_file = np.repeat(np.arange(m), k)
            key = entry_file * osts.count + pos
            key_sorted = np.sort(key)
            dup = np.nonzero(key_sorted[1:] == key_sorted[:-1])[0]
            if len(dup):
                f = int(key_sorted[dup[0]] // osts.count)
                raise PlanInputError(f"file {self.ids[f]}: an OST appears twice in its layout")
        return pos


@dataclass(frozen=True)
class PlanTargets:
    """What the plan aims at and may spend.

    Attributes:
        budget_fraction: share of each OST's measured bandwidth the migration may use,
            reads plus writes (0 < f <= 1).
        fill_tolerance: files stay on an OST while its fill is within
            ``(1 + fill_tolerance)`` times the mean fill (max/mean target).
        load_tolerance: the same for load per unit of bandwidth.
        max_duration_s: cut the plan at this estimated duration, seconds (None: no cut).
        weight_load, weight_space, weight_duration: Pufferscale's ``W_L``, ``W_D``,
            ``W_T`` (Section V-C; Eq. 15 uses 0.5 on the duration term).
        min_file_bytes: never move smaller files (per-file overhead of ``lfs migrate``).
        move_largest: fixing keeps the *smallest* files and sheds the largest (few
            files moved; ``lfs migrate`` pays per file), instead of Algorithm 1's order
            (keep the largest, shed many small ones: finer balance).
    """
    budget_fraction: float
    fill_tolerance: float = 0.02
    load_tolerance: float = 0.10
    max_duration_s: float | None = None
    weight_load: float = 1.0
    weight_space: float = 1.0
    weight_duration: float = 0.5
    min_file_bytes: float = 0.0
    move_largest: bool = False

    def __post_init__(self) -> None:
        if not (0.0 < self.budget_fraction <= 1.0):
            raise PlanInputError(f"budget: must be a fraction in (0, 1] of each OST's "
                                 f"bandwidth, got {self.budget_fraction}")
        if self.fill_tolerance < 0 or self.load_tolerance < 0:
            raise PlanInputError("tolerances must be >= 0")
        if self.max_duration_s is not None and self.max_duration_s <= 0:
            raise PlanInputError(f"max duration must be > 0 s, got {self.max_duration_s}")
        if min(self.weight_load, self.weight_space) < 0 or self.weight_duration < 0:
            raise PlanInputError("weights must be >= 0")


@dataclass
class PlanSummary:
    """Before/after balance and cost of a plan. Fills and loads over in-service OSTs.

    ``fill_max_mean``: max fill / mean fill (fill = used / size); ``load_max_mean``:
    max / mean of load per unit bandwidth (1.0 when no access rates were given).
    Bytes are file bytes read from old OSTs and written to new ones; ``duration_s`` the
    estimated time at the budget (Eq. 21 per OST, queues served in plan order).
    """
    files_considered: int
    files_moved: int
    files_unplaced: int
    bytes_read: float
    bytes_written: float
    fill_max_mean_before: float
    fill_max_mean_after: float
    load_max_mean_before: float
    load_max_mean_after: float
    target_fill: float
    duration_s: float
    cut_by_duration: int = 0


@dataclass
class Plan:
    """An ordered migration plan.

    Attributes:
        files: rows of the input :class:`FileTable`, in execution order, shape (P,).
        new_ptr, new_osts: CSR of each move's new OST list (Lustre indices, stripe order).
        est_start_s, est_end_s: estimated start/end of each move at the budget, seconds.
        summary: :class:`PlanSummary`.
        ost_used_after_kbytes: projected used KiB per OST (table order), shape (N,).
    """
    files: np.ndarray
    new_ptr: np.ndarray
    new_osts: np.ndarray
    est_start_s: np.ndarray
    est_end_s: np.ndarray
    summary: PlanSummary
    ost_used_after_kbytes: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def osts_of(self, move: int) -> np.ndarray:
        """New OST indices of the ``move``-th move."""
        return self.new_osts[self.new_ptr[move]:self.new_ptr[move + 1]]


def _max_mean(values: np.ndarray) -> float:
    mean = float(values.mean()) if len(values) else 0.0
    return float(values.max()) / mean if mean > 0 else 1.0


def _group_cumsum(keys_sorted: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` restarting at each change of ``keys_sorted``."""
    cs = np.cumsum(values)
    if not len(cs):
        return cs
    start = np.ones(len(keys_sorted), dtype=bool)
    start[1:] = keys_sorted[1:] != keys_sorted[:-1]
    base = np.where(start, cs - values, 0.0)
    np.maximum.accumulate(base, out=base)  # cs is non-decreasing (values >= 0)
    return cs - base


def _csr_rows(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions into a CSR data array of ``rows``' entries, concatenated in row order."""
    lens = ptr[rows + 1] - ptr[rows]
    out_ptr = np.concatenate(([0], np.cumsum(lens)))
    return (np.arange(int(out_ptr[-1]), dtype=np.int64) - np.repeat(out_ptr[:-1], lens)
            + np.repeat(ptr[rows], lens))


def plan_migration(osts: MigrationOsts, files: FileTable, targets: PlanTargets) -> Plan:
    """Plan the moves that bring fill (and load) within the targets.

    Args:
        osts: the cluster (:class:`MigrationOsts`).
        files: the candidate files (:class:`FileTable`).
        targets: :class:`PlanTargets`.

    Returns:
        A :class:`Plan`; empty when nothing needs or can move.

    Raises:
        PlanInputError: inconsistent input (see :meth:`FileTable.validate`).
    """
    w = _Work.of(osts, files, targets)
    movable = _movable(w)
    # Take the movable files off their OSTs (they may come back: Algorithm 2's choice).
    moving_entry = movable[w.entry_file]
    off = np.bincount(w.pos[moving_entry], w.entry_bytes[moving_entry], minlength=w.n)
    w.used = w.used0 - off
    w.load = w.load0 - np.bincount(w.pos[moving_entry], w.entry_load[moving_entry], minlength=w.n)
    w.busy = off / w.rate
    cand = np.nonzero(movable)[0]
    cand = cand[np.argsort(-w.norm[cand], kind="stable")]
    placing = _Placing.of(w, cand)
    _place_batches(w, placing)
    _drain_the_rest(w, placing)
    # Files that found no destination stay where they are.
    back = cand[~placing.placed & ~placing.returned]
    if len(back):
        be = np.isin(w.entry_file, back)
        w.used += np.bincount(w.pos[be], w.entry_bytes[be], minlength=w.n)
        w.load += np.bincount(w.pos[be], w.entry_load[be], minlength=w.n)
    return _finish(osts, files, targets, w.pos, w.entry_file, w.entry_bytes, cand,
                   _moved_rows(w, placing), placing.cand_ptr, placing.new_slots, w.norm,
                   w.used0, w.load0, w.d_t, w.fill_before, w.loadn_before, w.rate,
                   int(len(cand) - placing.placed.sum()), int(w.m))


@dataclass
class _Work:
    """What :func:`plan_migration` works on: per OST position (n), per file (m) and per
    file x OST entry; bytes, bytes/s, fractions. ``used``, ``load`` and ``busy`` change as
    files are placed."""
    osts: MigrationOsts
    files: FileTable
    t: PlanTargets
    pos: np.ndarray
    n: int
    m: int
    cap: np.ndarray
    rate: np.ndarray
    keep: np.ndarray
    receivers: np.ndarray
    k: np.ndarray
    entry_file: np.ndarray
    entry_bytes: np.ndarray
    entry_load: np.ndarray
    unlisted: np.ndarray
    used0: np.ndarray
    load0: np.ndarray
    d_t: float
    l_t: float
    fill_before: np.ndarray
    loadn_before: np.ndarray
    norm: np.ndarray
    reserve: np.ndarray
    hard_cap: np.ndarray
    t_t: float
    used: np.ndarray = field(default_factory=lambda: np.zeros(0))
    load: np.ndarray = field(default_factory=lambda: np.zeros(0))
    busy: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def of(cls, osts: MigrationOsts, files: FileTable, t: PlanTargets) -> "_Work":
        """The targets and norms (Pufferscale Eq. 8, 9, 20, 22).

        Raises:
            PlanInputError: inconsistent input, or no OST can receive.
        """
        pos = files.validate(osts)
        n, m = osts.count, files.count
        cap = osts.kbytes_total * KIB
        used0 = osts.kbytes_used.astype(float) * KIB
        rate = osts.rate_bytes_s * t.budget_fraction         # migration bandwidth, bytes/s
        keep = ~osts.draining
        k = np.diff(files.ost_ptr)
        entry_file = np.repeat(np.arange(m), k)
        entry_bytes = (files.size_bytes / k)[entry_file]
        entry_load = (files.access_bytes_s / k)[entry_file]
        listed = np.bincount(pos, entry_bytes, minlength=n)
        unlisted = np.maximum(used0 - listed, 0.0)
        used0 = unlisted + listed
        load0 = np.bincount(pos, entry_load, minlength=n)
        # Targets (Eq. 8, 9): means over the OSTs that stay, per unit of size / bandwidth.
        # An OST that stays but cannot receive (full, read-only, inactive) keeps what it
        # has: it is left out of both sums so the target is what the receivers can reach.
        receivers = osts.can_receive & osts.can_read
        if not receivers.any():
            raise PlanInputError("no OST can receive objects (all unusable or draining)")
        fixed = keep & ~receivers
        d_t = (used0.sum() - used0[fixed].sum()) / cap[receivers].sum()
        total_load = load0.sum() if t.weight_load > 0 else 0.0    # W_L = 0: space only
        l_t = ((total_load - load0[fixed].sum()) / osts.rate_bytes_s[receivers].sum()
               if total_load > 0 else 0.0)
        # Algorithm 1 keeps the highest-norm files (Eq. 20) while within the targets.
        norm = np.hypot(t.weight_load * files.access_bytes_s / max(total_load, 1e-300),
                        t.weight_space * files.size_bytes / max(files.size_bytes.sum(), 1.0))
        # Never fill a destination past the fill target or into OSP's reserve (its high
        # ENOSPC watermark: the mapper's own rule, lustre_alloc.mapper.state.ost_health).
        reserve = enospc_reserve_bytes(osts.kbytes_total)
        hard_cap = np.where(receivers, np.minimum(d_t * (1.0 + t.fill_tolerance) * cap,
                                                  cap - reserve), -np.inf)
        # Duration target (Eq. 22 with each OST's own bandwidth): the time to read an
        # overfull OST's excess or write an underfull one's deficit at the budget.
        t_t = max(float((np.abs(used0 - d_t * cap) / rate)[keep | (used0 > 0)].max()), 1.0)
        return cls(osts, files, t, pos, n, m, cap, rate, keep, receivers, k, entry_file,
                   entry_bytes, entry_load, unlisted, used0, load0, d_t, l_t, used0 / cap,
                   load0 / osts.rate_bytes_s, norm, reserve, hard_cap, t_t)


def _movable(w: _Work) -> np.ndarray:
    """Files that leave an OST above its target (Algorithm 1), bool (m,): an OST within
    tolerance keeps everything (no churn for small drift); one above sheds down to the
    target itself. Unreadable, too small, empty or too wide files stay."""
    t, osts, files = w.t, w.osts, w.files
    keep, cap, pos = w.keep, w.cap, w.pos
    fill_ok = w.used0 <= w.d_t * (1.0 + t.fill_tolerance) * cap
    keep_bytes = np.where(keep, np.where(fill_ok, np.inf, w.d_t * cap - w.unlisted), 0.0)
    if w.l_t > 0:
        load_ok = w.load0 <= w.l_t * (1.0 + t.load_tolerance) * osts.rate_bytes_s
        keep_load = np.where(keep, np.where(load_ok, np.inf, w.l_t * osts.rate_bytes_s), 0.0)
    else:
        keep_load = np.where(keep, np.inf, 0.0)
    norm_e = w.norm[w.entry_file]
    order = np.lexsort((norm_e if t.move_largest else -norm_e, pos))
    pos_s = pos[order]
    excess_s = ((_group_cumsum(pos_s, w.entry_bytes[order]) > keep_bytes[pos_s] * (1 + 1e-12))
                | (_group_cumsum(pos_s, w.entry_load[order]) > keep_load[pos_s] * (1 + 1e-12)))
    # A file larger than its OST's target stays (Algorithm 1 would move it, but moving a
    # file bigger than the target only moves the peak) unless the OST is draining.
    first = np.ones(len(pos_s), dtype=bool)
    first[1:] = pos_s[1:] != pos_s[:-1]
    excess_s &= ~(first & keep[pos_s])
    excess = np.zeros(len(pos), dtype=bool)
    excess[order] = excess_s
    file_excess = np.bincount(w.entry_file, excess, minlength=w.m) > 0
    unreadable = np.bincount(w.entry_file, ~osts.can_read[pos], minlength=w.m) > 0
    return (file_excess & ~unreadable & (files.size_bytes >= t.min_file_bytes)
            & (files.size_bytes > 0) & (w.k <= int(osts.can_receive.sum())))


@dataclass
class _Placing:
    """The candidates (file rows, highest norm first) and where their stripes go:
    ``new_slots`` OST positions per candidate stripe (-1: none), ``cand_ptr`` its CSR
    pointer; ``placed`` and ``returned`` (refused, back on its OSTs) per candidate."""
    cand: np.ndarray
    ck: np.ndarray
    cum_k: np.ndarray
    cand_ptr: np.ndarray
    new_slots: np.ndarray
    placed: np.ndarray
    returned: np.ndarray

    @classmethod
    def of(cls, w: _Work, cand: np.ndarray) -> "_Placing":
        ck = w.k[cand]
        cum_k = np.cumsum(ck)
        return cls(cand, ck, cum_k, np.concatenate(([0], cum_k)),
                   np.full(int(ck.sum()), -1, dtype=np.int64),
                   np.zeros(len(cand), dtype=bool), np.zeros(len(cand), dtype=bool))


def _place_batches(w: _Work, pl: _Placing) -> None:
    """Algorithm 2: candidates in batches of about half the receivers' stripes, each
    stripe on the OST with the lowest penalty (Eq. 15) after an average stripe of the
    batch lands there."""
    t, files = w.t, w.files
    cand, ck, cum_k = pl.cand, pl.ck, pl.cum_k
    batch_stripes = max(1, int(w.receivers.sum()) // 2)
    start = 0
    while start < len(cand):
        lo = int(pl.cand_ptr[start])
        end = max(int(np.searchsorted(cum_k, lo + batch_stripes, side="right")), start + 1)
        b = slice(start, end)
        per_stripe = files.size_bytes[cand[b]] / ck[b]
        mean_b = float(per_stripe.mean())
        # Eq. 15 after one average stripe of this batch lands on each OST.
        pen = t.weight_space * ((w.used + mean_b) / (w.d_t * w.cap)) ** 3 \
            + t.weight_duration * ((w.busy + mean_b / w.rate) / w.t_t) ** 3
        if w.l_t > 0:
            mean_l = float((files.access_bytes_s[cand[b]] / ck[b]).mean())
            pen += t.weight_load * ((w.load + mean_l) / (w.l_t * w.osts.rate_bytes_s)) ** 3
        ok = w.receivers & (w.used + mean_b <= w.hard_cap)
        if not ok.any():
            # No OST can take this batch within the target (files larger than the
            # headroom): any OST with room that stays below the fullest source.
            src_max = float(((w.used + np.bincount(w.pos[_csr_rows(files.ost_ptr, cand[b])],
                                                   np.repeat(per_stripe, ck[b]), minlength=w.n))
                             / w.cap).max())
            ok = (w.receivers & (w.used + mean_b <= w.cap - w.reserve)
                  & ((w.used + mean_b) / w.cap < src_max))
        n_ok = int(ok.sum())
        if n_ok == 0:
            break
        need = int(ck[b].sum())
        if need > n_ok:               # fewer OSTs left than stripes: shrink the batch
            end = start + max(1, int(np.searchsorted(cum_k[b] - lo, n_ok, side="right")))
            need = int(ck[start:end].sum())
            if need > n_ok:           # a single file wider than the usable OSTs
                start = end
                continue
        _place_batch(w, pl, start, end, lo, need, np.where(ok, pen, np.inf))
        start = end


def _place_batch(w: _Work, pl: _Placing, start: int, end: int, lo: int, need: int,
                 pen: np.ndarray) -> None:
    """Place candidates ``start:end`` (``need`` stripes from stripe ``lo``) on the
    ``need`` OSTs of lowest penalty, or send each refused file back to its OSTs."""
    files, n = w.files, w.n
    cand, ck = pl.cand, pl.ck
    b = slice(start, end)
    per_stripe = files.size_bytes[cand[b]] / ck[b]
    per_load = files.access_bytes_s[cand[b]] / ck[b]
    slots = np.argpartition(pen, need - 1)[:need] if need < n else np.arange(n)
    slots = slots[np.argsort(pen[slots], kind="stable")]
    sb = np.repeat(per_stripe, ck[b])
    sl = np.repeat(per_load, ck[b])
    fid = np.repeat(np.arange(end - start), ck[b])
    # A stripe may land where the fill stays within the target, or anywhere it ends
    # lower than its file's fullest old OST would be with the file back (the move
    # still lowers the maximum). Else the file stays (Algorithm 2 may choose the
    # bucket's own server).
    old_pos = w.pos[_csr_rows(files.ost_ptr, cand[b])]
    # (All of this batch's files back on their OSTs: they are judged together.)
    back_used = w.used + np.bincount(old_pos, sb, minlength=n)
    back_fill = np.zeros(end - start)
    np.maximum.at(back_fill, fid, back_used[old_pos] / w.cap[old_pos])
    after = w.used[slots] + sb
    fits = (after <= w.cap[slots] - w.reserve[slots]) & (
        (after <= w.hard_cap[slots]) | (after / w.cap[slots] < back_fill[fid] - 1e-12))
    file_ok = np.bincount(fid, ~fits, minlength=end - start) == 0
    stripe_ok = file_ok[fid]
    s_ok = slots[stripe_ok]
    np.add.at(w.used, s_ok, sb[stripe_ok])
    np.add.at(w.load, s_ok, sl[stripe_ok])
    np.add.at(w.busy, s_ok, sb[stripe_ok] / w.rate[s_ok])
    pl.new_slots[lo:lo + need] = np.where(stripe_ok, slots, -1)
    pl.placed[start:end] = file_ok
    # Refused files go back to their OSTs now, so later batches see them.
    back_e = ~file_ok[fid]
    np.add.at(w.used, old_pos[back_e], sb[back_e])
    np.add.at(w.load, old_pos[back_e], sl[back_e])
    pl.returned[start:end] = ~file_ok


def _drain_the_rest(w: _Work, pl: _Placing) -> None:
    """Files leaving a draining OST must go somewhere: those the fill target refused go,
    one by one, to the least-filled receivers that still have room (Eq. 7)."""
    files, pos, cand, ck = w.files, w.pos, pl.cand, pl.ck
    drained = np.bincount(w.entry_file, w.osts.draining[pos], minlength=w.m) > 0
    for c in np.nonzero(~pl.placed & drained[cand])[0]:
        if pl.returned[c]:
            ob = _csr_rows(files.ost_ptr, cand[c:c + 1])
            w.used[pos[ob]] -= files.size_bytes[cand[c]] / ck[c]
            w.load[pos[ob]] -= files.access_bytes_s[cand[c]] / ck[c]
            pl.returned[c] = False
        kk = int(ck[c])
        sz = files.size_bytes[cand[c]] / kk
        room = w.receivers & (w.used + sz <= w.cap - w.reserve)
        if room.sum() < kk:
            continue
        fillv = np.where(room, w.used / w.cap, np.inf)
        dest = np.argsort(fillv, kind="stable")[:kk]
        w.used[dest] += sz
        w.load[dest] += files.access_bytes_s[cand[c]] / kk
        pl.new_slots[pl.cand_ptr[c]:pl.cand_ptr[c + 1]] = dest
        pl.placed[c] = True


def _moved_rows(w: _Work, pl: _Placing) -> np.ndarray:
    """Candidate rows that move: placed, and not onto the OST set they already have."""
    files, pos, cand, ck = w.files, w.pos, pl.cand, pl.ck
    moved_rows = []
    pc = np.nonzero(pl.placed)[0]
    k1 = pc[ck[pc] == 1]
    if len(k1):
        dest = pl.new_slots[pl.cand_ptr[k1]]
        moved_rows.append(k1[dest != pos[files.ost_ptr[cand[k1]]]])
    for c in pc[ck[pc] > 1]:
        f = cand[c]
        old = np.sort(pos[files.ost_ptr[f]:files.ost_ptr[f + 1]])
        if not np.array_equal(old, np.sort(pl.new_slots[pl.cand_ptr[c]:pl.cand_ptr[c + 1]])):
            moved_rows.append(np.array([c]))
    return np.sort(np.concatenate(moved_rows)) if moved_rows else np.zeros(0, dtype=np.int64)


def _finish(osts: MigrationOsts, files: FileTable, t: PlanTargets, pos: np.ndarray,
            entry_file: np.ndarray, entry_bytes: np.ndarray, cand: np.ndarray,
            mrows: np.ndarray, cand_ptr: np.ndarray, new_slots: np.ndarray, norm: np.ndarray,
            used0: np.ndarray, load0: np.ndarray, d_t: float, fill_before: np.ndarray,
            loadn_before: np.ndarray, rate: np.ndarray, unplaced: int, considered: int) -> Plan:
    """Order the moves, estimate times, cut at ``max_duration_s``, summarise."""
    n = osts.count
    keep = ~osts.draining
    mv = cand[mrows]                                     # file rows that move
    k = np.diff(files.ost_ptr)
    # Order: round-robin over the first old OST (so every source OST works from the
    # start), then decreasing norm (Pufferscale's order within a server).
    first_old = pos[files.ost_ptr[mv]]
    by_src = np.lexsort((-norm[mv], first_old))
    rank = np.empty(len(mv), dtype=np.int64)
    rank[by_src] = (_group_cumsum(first_old[by_src], np.ones(len(mv))) - 1).astype(np.int64)
    seq = np.lexsort((-norm[mv], rank))
    mv, mrows = mv[seq], mrows[seq]
    km = k[mv]
    stripe = files.size_bytes[mv] / km
    ptr = np.concatenate(([0], np.cumsum(km)))
    # Each move's entries: reads on its old OSTs, writes on its new ones (Eq. 21).
    old_pos = pos[_csr_rows(files.ost_ptr, mv)]
    new_pos = new_slots[_csr_rows(cand_ptr, mrows)]
    entry_move = np.repeat(np.arange(len(mv)), km)
    e_time = np.repeat(stripe, km)
    # Per-OST queues served in plan order: a move ends when its last OST has done it.
    ent_ost = np.concatenate([old_pos, new_pos])
    ent_move = np.concatenate([entry_move, entry_move])
    ent_t = np.concatenate([e_time, e_time]) / rate[ent_ost] if len(ent_ost) else np.zeros(0)
    o = np.lexsort((ent_move, ent_ost))
    done = np.empty(len(o))
    done[o] = _group_cumsum(ent_ost[o], ent_t[o])
    est_end = np.zeros(len(mv))
    np.maximum.at(est_end, ent_move, done)
    own = np.zeros(len(mv))
    np.maximum.at(own, ent_move, ent_t)
    est_start = np.maximum(est_end - own, 0.0)
    cut = 0
    keep_mv = np.ones(len(mv), dtype=bool)
    if t.max_duration_s is not None:
        keep_mv = est_end <= t.max_duration_s
        cut = int((~keep_mv).sum())
    ent_keep = keep_mv[entry_move]
    final = np.argsort(est_start[keep_mv], kind="stable")
    sel = np.nonzero(keep_mv)[0][final]
    used = used0.copy()
    load = load0.copy()
    acc = files.access_bytes_s[mv] / km
    e_acc = np.repeat(acc, km)
    used -= np.bincount(old_pos[ent_keep], e_time[ent_keep], minlength=n)
    used += np.bincount(new_pos[ent_keep], e_time[ent_keep], minlength=n)
    load -= np.bincount(old_pos[ent_keep], e_acc[ent_keep], minlength=n)
    load += np.bincount(new_pos[ent_keep], e_acc[ent_keep], minlength=n)
    cap = osts.kbytes_total * KIB
    new_lists_ptr = np.concatenate(([0], np.cumsum(km[sel])))
    new_osts = new_pos[_csr_rows(ptr, sel)]
    moved_bytes = float(files.size_bytes[mv[sel]].sum())
    summary = PlanSummary(
        files_considered=considered, files_moved=int(len(sel)), files_unplaced=unplaced,
        bytes_read=moved_bytes, bytes_written=moved_bytes,
        fill_max_mean_before=_max_mean(fill_before[keep]),
        fill_max_mean_after=_max_mean((used / cap)[keep]),
        load_max_mean_before=_max_mean(loadn_before[keep]),
        load_max_mean_after=_max_mean((load / osts.rate_bytes_s)[keep]),
        target_fill=float(d_t), duration_s=float(est_end[sel].max()) if len(sel) else 0.0,
        cut_by_duration=cut)
    return Plan(files=mv[sel], new_ptr=new_lists_ptr, new_osts=osts.index[new_osts],
                est_start_s=est_start[sel], est_end_s=est_end[sel], summary=summary,
                ost_used_after_kbytes=used / KIB)
