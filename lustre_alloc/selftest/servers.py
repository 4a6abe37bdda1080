"""The selftest's server checks: this server's statistics read through the collectors' own
code (:class:`lustre_alloc.collectors.collector.Collector`), and, with ``--steer OST``, one steering
action set and restored through the steering agent's (:class:`lustre_alloc.collectors.steer_agent.SteerAgent`).

The steering check acts through the agent so it is the agent's rules that are checked:
an OST already flagged by someone else is refused and left alone (reported SKIP, not
taken over); ``create_count`` comes back with ``max_create_count`` (rule 12 of
docs/reference/lustre-semantics.md); the agent journals into
:func:`~lustre_alloc.collectors.steer_agent.selftest_journal_of` the collector's journal, so a selftest
killed half way is settled by the next selftest or the collector's next start, and every
value is restored even when a check fails half way.
"""
from __future__ import annotations

import time
from typing import Sequence

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.lustre_params import (FileParams, LctlParams, ParamAccess, ParamError,
                                      degraded_param, max_create_count_param, osp_devices_of)
from lustre_alloc.collectors.sources import FileSource, StatsSource
from lustre_alloc.collectors.steer_agent import KIND_OF_ROLE, SteerAgent, selftest_journal_of
from lustre_alloc.common.errors import SourceUnavailable
from lustre_alloc.selftest.rows import FAIL, PASS, SKIP, Row

KIND_NAME = {"oss": "OST", "mds": "MDT"}
RATE_GAP_S = 0.5
"""Between the two readings of each source, s (the rates of the second are checked)."""
SHOWN = 3
"""Failing targets named in a row (the rest counted)."""
STEER_LEASE_S = 120.0
"""The selftest's lease, s: long enough for its checks; a selftest killed meanwhile leaves
the value in its journal, restored by the next selftest (once the lease ran out) or the
collector's next start."""


def stats_rows(sources: dict[str, StatsSource]) -> list[Row]:
    """One row per role (``oss``, ``mds``: the collectors' source for it): its targets'
    statistics read and parsed as the collector does.

    A role with no target here is SKIP (a client, or an OSS for the ``mds`` role); a target
    with any source the collector could not read or parse is FAIL, naming it and why.
    """
    rows = []
    for role, source in sources.items():
        collector = Collector(role, source)
        collector.collect()             # rates need two readings: the first one warms up
        time.sleep(RATE_GAP_S)
        body = collector.collect()
        targets = body["targets"]
        server_missing = body["server"].get("unavailable", {})
        check = f"{role} statistics"
        if not targets:
            why = server_missing.get("targets", f"no {KIND_NAME[role]} on this server")
            rows.append(Row(check, SKIP, why))
            continue
        bad = {name: t["unavailable"] for name, t in sorted(targets.items())
               if t.get("unavailable")}
        if bad:
            shown = "; ".join(f"{name}: " + ", ".join(f"{k} {v}" for k, v in why.items())
                              for name, why in list(bad.items())[:SHOWN])
            more = f" (+{len(bad) - SHOWN} more)" if len(bad) > SHOWN else ""
            rows.append(Row(check, FAIL, f"{len(bad)} of {len(targets)} "
                                         f"{KIND_NAME[role]}s unreadable: {shown}{more}"))
        else:
            rows.append(Row(check, PASS, f"{len(targets)} {KIND_NAME[role]}s read and parsed "
                                         f"({source.description})"))
    return rows


def params_for(source: StatsSource, root: str, lctl_command: Sequence[str]) -> ParamAccess:
    """The parameter access the collector's agent would use with ``source``."""
    return FileParams(root) if isinstance(source, FileSource) else LctlParams(lctl_command)


def steer_rows(ost: str, role: str, source: StatsSource, params: ParamAccess,
               journal: str) -> list[Row]:
    """Set ``degraded`` (``oss``) or drain (``mds``: ``max_create_count = 0`` on each OSP of
    ``ost``) through the agent, read it back, restore it, read it back. The agent journals
    into ``selftest_journal_of(journal)`` (``journal``: the collector's)."""
    kind = KIND_OF_ROLE[role]
    check = f"steer {kind} {ost}"
    try:
        names = _params_of(ost, role, source)
    except (SourceUnavailable, ParamError) as exc:
        return [Row(check, FAIL, f"cannot list this server's targets: {exc}")]
    if not names:
        where = "OSTs" if role == "oss" else "OSP devices"
        return [Row(check, FAIL, f"{ost} is not among this server's {where}")]
    try:
        found = {n: params.get(n) for n in names}
    except ParamError as exc:
        return [Row(check, FAIL, str(exc))]
    try:
        agent = SteerAgent(role, lambda: _targets(role, source), params,
                           journal=selftest_journal_of(journal))
    except OSError as exc:
        return [Row(check, FAIL, f"cannot use the journal {selftest_journal_of(journal)}: "
                                 f"{exc}")]
    try:
        return _steer_and_restore(agent, ost, kind, names, found, params, check)
    finally:
        agent.release_all("selftest done")


def _steer_and_restore(agent: SteerAgent, ost: str, kind: str, names: list[str],
                       found: dict[str, str], params: ParamAccess, check: str) -> list[Row]:
    # through handle(), as the controller's requests arrive: a refusal is an answer
    applied = agent.handle({"op": "steer", "ost": ost, "kind": kind,
                            "lease_s": STEER_LEASE_S, "reason": "lustre-alloc selftest"})
    if not applied.get("ok"):
        return [Row(check, SKIP, f"the agent refused: {applied.get('error')}")]
    want = "1" if kind == "degraded" else "0"
    now = {n: params.get(n) for n in names}
    rows = [Row(f"{check}: set", PASS if all(v == want for v in now.values()) else FAIL,
                ", ".join(f"{n} {found[n]} -> {v}" for n, v in now.items()))]
    companions = {}
    if kind == "drain":
        companions = {c: params.get(c) for c in (n.replace(".max_create_count", ".create_count")
                                                 for n in names)}
    released = agent.handle({"op": "release", "ost": ost, "kind": kind})
    if not released.get("ok"):
        return rows + [Row(f"{check}: restored", FAIL, str(released.get("error")))]
    back = {n: params.get(n) for n in names}
    ok = back == found
    detail = ", ".join(f"{n} {back[n]}" for n in names)
    if kind == "drain":
        counts = {c: params.get(c) for c in companions}
        detail += "; " + ", ".join(f"{c} {v}" for c, v in counts.items())
        ok = ok and all(v != "0" for v in counts.values())
    rows.append(Row(f"{check}: restored", PASS if ok else FAIL, detail))
    return rows


def _targets(role: str, source: StatsSource) -> list[str]:
    if role == "oss":
        return source.targets("ost")
    return list(source.read_family("osp", "max_create_count"))


def _params_of(ost: str, role: str, source: StatsSource) -> list[str]:
    if role == "oss":
        return [degraded_param(ost)] if ost in source.targets("ost") else []
    return [max_create_count_param(d) for d in osp_devices_of(ost, _targets(role, source))]

