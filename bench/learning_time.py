"""Learning time: how long a policy takes to steer new stripes away from OSTs that slowed
down without any flag, and to bring them back after they recover.

The world's unflagged ``degrade`` events (``flagged = false``: nothing in Lustre says the
OSTs are slow; only their own RPC times show it) give the slow OSTs ``A``, the onset and
the recovery. Every create the policy answers is recorded (simulated time, OST indices);
the share of new stripes that land on ``A`` is counted in bins of ``--bin`` seconds.
Against two references computed from the same run:

* ``fair``: ``A``'s share of the usable OSTs, what Lustre's round-robin gives it;
* ``capable``: ``A``'s share of the bandwidth while slow, ``sum f_j / (N - |A| + sum f_j)``
  for slowdown fractions ``f_j`` (capacity-proportional placement, MemEFS's rule);

a policy has **adapted** at the first bin after the onset whose share is at most the
midpoint of the two, and has **returned** at the first bin after the recovery whose share
is at least that midpoint again. Reported: time to adapt and to return (from the onset and
recovery to the bin's end, s; ``never`` when no bin qualifies before the end of the event
or of the run), and the mean share before, during and after. The share ``A`` keeps while
slow is what the policy spends finding out whether the OSTs recovered.

    python bench/learning_time.py                    # failover-half, 3 seeds
    python bench/learning_time.py straggler-ost --variant mcmf --variant oracle
    python bench/learning_time.py --variant 'relax=mcmf:{"rate_relax_s": 1800}'

The simulator runs the mapper's own policies under the honest statistics path
(:mod:`lustre_alloc.simulator.ost_readings`): the policy sees the slow OSTs only through their RPCs.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_POLICIES = ("round_robin", "mcmf", "oracle")
DEFAULT_BIN_S = 300.0
"""Bin width, s: 60 statistics samples of 5 s; short enough to time a reaction to a
failover, long enough to hold some creates in the bundled worlds."""


@dataclass
class SlowSpell:
    """The unflagged slowdown a run is measured against."""
    osts: tuple[int, ...]
    onset_s: float
    recovery_s: float
    fair_share: float
    capable_share: float


@dataclass
class Learning:
    """One (variant, seed) run. Times in seconds (None: never); shares are fractions of
    the stripes placed."""
    policy: str
    seed: int
    adapt_s: float | None
    return_s: float | None
    share_before: float | None
    share_during: float | None
    share_after: float | None
    stripes: int


def slow_spell(scenario, ost_count: int) -> SlowSpell:
    """The first unflagged ``degrade`` event of ``scenario`` on named OSTs.

    Raises:
        ValueError: the world has none (naming it).
    """
    for e in scenario.events:
        if e.kind == "degrade" and not e.flagged and e.osts:
            fair = len(e.osts) / ost_count
            slow = len(e.osts) * e.fraction
            capable = slow / (ost_count - len(e.osts) + slow)
            return SlowSpell(tuple(e.osts), e.at_s, e.end_s, fair, capable)
    raise ValueError(f"{scenario.name}: no unflagged degrade event on named OSTs to time")


def record_creates(sim) -> list[tuple[float, tuple[int, ...]]]:
    """Wrap ``sim``'s create path so every placement answered is recorded as
    ``(simulated time s, OST indices)``; returns the (growing) list."""
    log: list[tuple[float, tuple[int, ...]]] = []
    place = sim.creates.place

    def recorded(view, rec, app):
        placed = place(view, rec, app)
        if placed is not None:
            log.append((float(view.time_s), tuple(i for part in placed for i in part)))
        return placed

    sim.creates.place = recorded
    return log


def shares(log, spell: SlowSpell, bin_s: float, end_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bin of ``bin_s`` from 0 to ``end_s``: start times, stripes placed, stripes on
    the slow OSTs."""
    edges = np.arange(0.0, end_s + bin_s, bin_s)
    total = np.zeros(len(edges) - 1)
    slow = np.zeros(len(edges) - 1)
    members = set(spell.osts)
    for t, osts in log:
        b = min(int(t // bin_s), len(total) - 1)
        total[b] += len(osts)
        slow[b] += sum(1 for i in osts if i in members)
    return edges[:-1], total, slow


def measure(log, spell: SlowSpell, bin_s: float, end_s: float) -> dict:
    """Time to adapt and to return, and the mean shares (:class:`Learning` fields)."""
    starts, total, slow = shares(log, spell, bin_s, end_s)
    mid = (spell.fair_share + spell.capable_share) / 2
    share = np.divide(slow, total, out=np.full(len(total), np.nan), where=total > 0)

    def first(after: float, until: float, ok) -> float | None:
        for s, v in zip(starts, share):
            if s >= after and s + bin_s <= until + 1e-9 and np.isfinite(v) and ok(v):
                return float(s + bin_s - after)
        return None

    def mean_share(lo: float, hi: float) -> float | None:
        m = (starts >= lo) & (starts + bin_s <= hi + 1e-9)
        return float(slow[m].sum() / total[m].sum()) if total[m].sum() else None

    recovery = min(spell.recovery_s, end_s)
    return {"adapt_s": first(spell.onset_s, recovery, lambda v: v <= mid),
            "return_s": (first(spell.recovery_s, end_s, lambda v: v >= mid)
                         if spell.recovery_s < end_s else None),
            "share_before": mean_share(0.0, spell.onset_s),
            "share_during": mean_share(spell.onset_s, recovery),
            "share_after": mean_share(spell.recovery_s, end_s) if spell.recovery_s < end_s else None,
            "stripes": int(total.sum())}


def run_one(world: str, policy: str, seed_offset: int, bin_s: float,
            duration_s: float | None = None, params: dict | None = None,
            label: str | None = None) -> tuple[Learning, SlowSpell]:
    """One run of ``policy`` (with ``params`` over the world's ``[policy_params]``) on
    ``world`` (a bundled name or TOML path)."""
    import placement_eval
    from lustre_alloc.simulator.runner import build_simulation, prepare, scenario_policy
    sc = placement_eval._with_params(
        placement_eval._scenario(world, duration_s).with_seed_offset(seed_offset), policy,
        params or {})
    cluster = prepare(sc)
    spell = slow_spell(sc, cluster.ost_count)
    sim = build_simulation(sc, cluster, scenario_policy(sc, policy))
    log = record_creates(sim)
    sim.run()
    got = measure(log, spell, bin_s, sc.duration_s)
    return Learning(label or policy, sc.seed, **got), spell


def _fmt_s(v: float | None) -> str:
    return "never" if v is None else f"{v:.0f}"


def _fmt_share(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def table(rows: list[Learning], spell: SlowSpell) -> list[str]:
    """Markdown: one row per (policy, seed)."""
    out = [f"slow OSTs {list(spell.osts)} from {spell.onset_s:.0f} s to "
           f"{_fmt_s(spell.recovery_s if math.isfinite(spell.recovery_s) else None)} s; "
           f"fair share {100 * spell.fair_share:.1f}%, capacity-proportional "
           f"{100 * spell.capable_share:.1f}%", "",
           "| policy | seed | adapted after s | returned after s | share before | while slow "
           "| after | stripes |", "|" + "---|" * 8]
    for r in rows:
        out.append(f"| {r.policy} | {r.seed} | {_fmt_s(r.adapt_s)} | {_fmt_s(r.return_s)} "
                   f"| {_fmt_share(r.share_before)} | {_fmt_share(r.share_during)} "
                   f"| {_fmt_share(r.share_after)} | {r.stripes} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("world", nargs="?", default="failover-half")
    ap.add_argument("--variant", action="append", default=None,
                    help="label=policy:{json params} or a policy; repeatable "
                         f"(default: {', '.join(DEFAULT_POLICIES)})")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--bin", type=float, default=DEFAULT_BIN_S, help="bin width, s")
    ap.add_argument("--duration", type=float, default=None, help="cut the run short, s")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.bin <= 0:
        ap.error("--seeds must be >= 1 and --bin > 0")
    from placement_eval import parse_variant
    rows, spell = [], None
    for label, policy, params in map(parse_variant, args.variant or DEFAULT_POLICIES):
        for k in range(args.seeds):
            row, spell = run_one(args.world, policy, k, args.bin, args.duration, params, label)
            rows.append(row)
    print("\n".join(table(rows, spell)))
    if args.json:
        args.json.write_text(json.dumps({"spell": asdict(spell), "rows": [asdict(r) for r in rows]},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
