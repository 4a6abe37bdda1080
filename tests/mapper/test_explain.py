"""Explaining decisions: what the rate cost model says OST lists cost, the last
decision per jobid and path, the shadow report's arithmetic."""
from __future__ import annotations

import math

import pytest

from lustre_alloc.mapper.explain.last_decisions import DecisionIndex, DecisionRecord, explain
from lustre_alloc.mapper.explain.pricing import ChoicePricer
from lustre_alloc.mapper.policies.placement import CreateRequest, Placement
from lustre_alloc.mapper.shadow.ledger import ShadowLedger
from lustre_alloc.mapper.shadow.report import format_report, summarize
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster

MIB = 1 << 20


def cluster_with_a_slow_ost(slow: int = 3, slow_rpc_s: float = 0.5):
    snap = make_uniform_cluster(2, 4, 1 << 30)
    for o in snap.osts:
        o.write_latency_s = 0.01       # brw_stats mean write RPC time of a 1 MiB RPC
    snap.osts[slow].write_latency_s = slow_rpc_s
    return snap


def test_a_list_costs_its_slowest_stripe_and_the_slow_ost_is_never_cheapest():
    snap = cluster_with_a_slow_ost()
    p = ChoicePricer()
    fast, slow = p.price(snap, [0, 1], MIB), p.price(snap, [3, 1], MIB)
    assert fast.expected_s == pytest.approx(0.01) and slow.expected_s == pytest.approx(0.5)
    assert slow.stripe_s == pytest.approx((0.5, 0.01))
    assert p.price(snap, [0], 8 * MIB).expected_s == pytest.approx(0.08)   # bytes scale it
    cheapest = p.cheapest(snap, None, MIB, 7)
    assert len(cheapest) == 7 and 3 not in [i for i, _ in cheapest]
    unknown = p.price(snap, [0, 99], MIB)
    assert math.isnan(unknown.expected_s) and math.isnan(unknown.stripe_s[1])
    assert p.cheapest(snap, "no-such-pool", MIB, 3) == []


def _record(path: str, jobid: str, osts=(0, 3), t: float = 0.0, fs: str = "scratch",
            mode: str = "place", token: int = 0) -> DecisionRecord:
    req = CreateRequest(jobid=jobid, stripe_count=len(osts), expected_bytes=2 * MIB, path=path)
    return DecisionRecord.of(fs, mode, req, Placement(tuple(osts), "mcmf"), 4, token, now_s=t)


def test_the_index_keeps_the_last_decision_per_path_and_jobid_bounded():
    idx = DecisionIndex(max_records=2)
    idx.add(_record("/l/a", "j1", t=1))
    idx.add(_record("/l/b", "j1", osts=(1, 2), t=2))
    idx.add(_record("/l/c", "j2", t=3))
    assert idx.find(path="/l/a") is None                  # evicted (2 kept)
    assert idx.find(path="/l/b").osts == (1, 2)
    assert idx.find(jobid="j1").path == "/l/b"            # the newest of that jobid
    assert idx.find(jobid="j1", fsname="other") is None
    assert idx.find() is None


def test_explain_prices_the_choice_beside_the_cheapest_alternatives():
    snap = cluster_with_a_slow_ost()
    out = explain(_record("/l/a", "j1", osts=(0, 3)), ChoicePricer(), snap, k=2)
    priced = out["priced"]
    assert out["osts"] == [0, 3] and priced["bytes_per_stripe"] == MIB
    assert priced["chosen_expected_s"] == pytest.approx(0.5)
    assert [a["expected_s"] for a in priced["cheapest"]] == pytest.approx([0.01, 0.01])


def test_the_shadow_report_compares_load_and_expected_time():
    snap = cluster_with_a_slow_ost()
    pricer = ChoicePricer()
    ledger = ShadowLedger(max_entries=3, clock=lambda: 10.0)
    for n, (mine, lustres) in enumerate((((0, 1), (0, 1)), ((2, 4), (3, 4)), ((5, 6), (3, 5)))):
        tok = ledger.next_token()
        ledger.decided(_record(f"/l/{n}", "j", osts=mine, t=10.0, mode="shadow", token=tok))
        assert ledger.report(tok, lustres, MIB,
                             lambda fs, osts, b: pricer.price(snap, osts, b)) == "ok"
    ledger.decided(_record("/l/x", "j", t=10.0, mode="shadow", token=ledger.next_token()))
    assert ledger.counts["evicted_unreported"] == 0 and len(ledger.entries) == 3
    rep = summarize(ledger.window(0.0), 60.0)
    assert (rep["decisions"], rep["reported"]) == (3, 2)  # the first evicted, one unreported
    assert rep["same_osts"] == 0.0 and rep["shared_stripes"] == 0.5
    assert rep["mapper_expected_sooner"] == 1.0           # Lustre used the slow OST 3 twice
    assert (rep["expected_same"], rep["mapper_expected_later"]) == (0.0, 0.0)
    assert rep["lustre"]["expected_s"]["mean"] == pytest.approx(0.5)
    assert rep["lustre"]["busiest"][0] == {"ost": 3, "stripes": 2}
    assert rep["lustre"]["stripes_max_over_mean"] == pytest.approx(2 / (4 / 5))
    text = format_report("scratch", rep)
    assert "OST0003:2" in text and "decisions 3" in text


def test_the_shadow_headline_counts_equal_prices_as_the_same_not_as_not_sooner():
    """On OSTs the model prices alike both lists cost the same: the headline says so
    (it once said "sooner: 0.0%" beside a table in the mapper's favour)."""
    from lustre_alloc.mapper.shadow.ledger import ShadowLedger
    from lustre_alloc.mapper.shadow.report import format_report, summarize
    snap = make_uniform_cluster(2, 4, 1 << 30)
    pricer = ChoicePricer()
    ledger = ShadowLedger()
    for n in range(4):
        tok = ledger.next_token()
        ledger.decided(_record(f"/l/{n}", "j", osts=(n, n + 4), t=10.0, mode="shadow",
                               token=tok))
        ledger.report(tok, (0, 1), MIB, lambda fs, osts, b: pricer.price(snap, osts, b))
    rep = summarize(ledger.window(0.0), 60.0)
    assert (rep["mapper_expected_sooner"], rep["expected_same"],
            rep["mapper_expected_later"]) == (0.0, 1.0, 0.0)
    assert "sooner: 0.0%, at the same time: 100.0%, later: 0.0%" in format_report("fs", rep)
