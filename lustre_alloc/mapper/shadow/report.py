"""The shadow report: the mapper's choices beside Lustre's over a window.

For the decisions in the window whose layout the shim reported:

* agreement: the share of files where both chose the same OST set, and the mean share of
  the mapper's stripes that Lustre also put on the same OSTs;
* per-OST load under each: stripes and announced bytes per OST, and their max/mean over the
  OSTs either used (1.0 = perfectly even; Lustre's balance metric);
* what the mapper's cost model says each choice will cost: the expected completion time of
  each file's slowest stripe (:mod:`lustre_alloc.mapper.explain.pricing`), mean / p50 / p99, and the
  shares of files where the mapper's list was expected to finish sooner, at the same time
  (within :data:`SAME_TIME_REL` of each other: on OSTs the model prices alike, e.g. before any
  sample shows a difference) or later.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

import numpy as np

from lustre_alloc.mapper.shadow.ledger import ShadowEntry

TOP_OSTS = 5
"""Busiest OSTs listed under each choice."""
SAME_TIME_REL = 1e-6
"""Two expected times within this fraction of each other count as the same."""


def _load(lists: list[tuple[tuple[int, ...], float]]) -> dict[str, Any]:
    stripes: Counter[int] = Counter()
    nbytes: Counter[int] = Counter()
    for osts, bps in lists:
        for i in osts:
            stripes[i] += 1
            nbytes[i] += bps
    return {"stripes": stripes, "bytes": nbytes}


def _max_over_mean(counts: Counter[int], osts: set[int]) -> float | None:
    if not osts:
        return None
    values = np.array([counts.get(i, 0) for i in osts], dtype=float)
    mean = values.mean()
    return float(values.max() / mean) if mean > 0 else None


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p99": None}
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
            "p99": float(np.percentile(a, 99))}


def summarize(entries: Sequence[ShadowEntry], window_s: float) -> dict[str, Any]:
    """The report of ``entries`` (one window), JSON-ready (module docstring)."""
    reported = [e for e in entries if e.lustre_osts is not None]
    same = shared = 0.0
    mapper_s: list[float] = []
    lustre_s: list[float] = []
    cheaper = later = 0
    for e in reported:
        mine, theirs = set(e.decision.osts), set(e.lustre_osts or ())
        same += mine == theirs
        shared += len(mine & theirs) / max(len(mine), 1)
        m = e.mapper_price.expected_s if e.mapper_price else math.nan
        lu = e.lustre_price.expected_s if e.lustre_price else math.nan
        if math.isfinite(m) and math.isfinite(lu):
            mapper_s.append(m)
            lustre_s.append(lu)
            if abs(m - lu) <= SAME_TIME_REL * max(abs(m), abs(lu)):
                continue
            cheaper += m < lu
            later += m > lu
    mapper_load = _load([(e.decision.osts, e.decision.bytes_per_stripe) for e in reported])
    lustre_load = _load([(e.lustre_osts or (), e.decision.bytes_per_stripe) for e in reported])
    used = set(mapper_load["stripes"]) | set(lustre_load["stripes"])
    n = len(reported)

    def side(load: dict[str, Any], secs: list[float]) -> dict[str, Any]:
        return {"osts_used": len(load["stripes"]),
                "stripes_max_over_mean": _max_over_mean(load["stripes"], used),
                "bytes_max_over_mean": _max_over_mean(load["bytes"], used),
                "busiest": [{"ost": i, "stripes": c}
                            for i, c in load["stripes"].most_common(TOP_OSTS)],
                "expected_s": _stats(secs)}

    return {
        "window_s": window_s,
        "decisions": len(entries),
        "reported": n,
        "unreported": len(entries) - n,
        "same_osts": same / n if n else None,
        "shared_stripes": shared / n if n else None,
        "priced": len(mapper_s),
        "mapper_expected_sooner": cheaper / len(mapper_s) if mapper_s else None,
        "expected_same": ((len(mapper_s) - cheaper - later) / len(mapper_s)
                          if mapper_s else None),
        "mapper_expected_later": later / len(mapper_s) if mapper_s else None,
        "mapper": side(mapper_load, mapper_s),
        "lustre": side(lustre_load, lustre_s),
    }


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def format_report(fsname: str, summary: dict[str, Any]) -> str:
    """``summary`` as text for a person."""
    s = summary
    lines = [f"shadow report, file system {fsname or '(default)'}, last {s['window_s']:g} s",
             f"  decisions {s['decisions']}, reported by the shim {s['reported']}, "
             f"unreported {s['unreported']}",
             f"  same OST set: {_fmt(s['same_osts'], '.1%')}; mapper stripes on Lustre's OSTs: "
             f"{_fmt(s['shared_stripes'], '.1%')}",
             f"  of {s['priced']} priced files, the mapper's list expected to finish sooner: "
             f"{_fmt(s['mapper_expected_sooner'], '.1%')}, at the same time: "
             f"{_fmt(s.get('expected_same'), '.1%')}, later: "
             f"{_fmt(s.get('mapper_expected_later'), '.1%')}",
             f"  {'':8}{'OSTs used':>10}{'stripes max/mean':>18}{'bytes max/mean':>16}"
             f"{'expected s mean':>17}{'p50':>8}{'p99':>8}"]
    for name in ("mapper", "lustre"):
        side = s[name]
        e = side["expected_s"]
        lines.append(f"  {name:8}{side['osts_used']:>10}{_fmt(side['stripes_max_over_mean']):>18}"
                     f"{_fmt(side['bytes_max_over_mean']):>16}{_fmt(e['mean']):>17}"
                     f"{_fmt(e['p50']):>8}{_fmt(e['p99']):>8}")
    for name in ("mapper", "lustre"):
        busiest = ", ".join(f"OST{b['ost']:04x}:{b['stripes']}" for b in s[name]["busiest"])
        lines.append(f"  busiest under {name}: {busiest or '-'}")
    return "\n".join(lines)
