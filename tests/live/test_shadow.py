"""Shadow mode end to end on the live stack: emulated OSSes, real collectors,
broker and mapper processes, a program creating real files under the shim. Every create gets
Lustre's layout (the emulated MDS's QOS allocator), the mapper's choice and Lustre's are both
recorded, the report compares them, and the mapper books no placement."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from lustre_alloc.mapper.service import ctl
from tests.support import wait_for

pytestmark = pytest.mark.timeout(180)

FILES = 24


def _report(sock: str, capsys) -> dict:
    assert ctl.main(["--socket", sock, "--json", "shadow-report", "--window", "600"]) == 0
    return json.loads(capsys.readouterr().out)["report"]


def test_shadow_pilot_end_to_end(live, tmp_path, capsys):
    sock = f"ipc://{tmp_path}/control"
    lv = live(policy="mcmf", scope={"shadow": True}, mapper_settings={"control_endpoint": sock})
    # the writer lives 1 s past its last create: the emulated MDS places a default create
    # up to a pump period later, and a process's exit waits at most 0.2 s for its reports
    writer = lv.writer("ior.shadow", FILES, 0.05, nbytes=1 << 16, linger_s=1.0,
                       LUSTRE_ALLOC_STRIPE_COUNT="2")
    result = lv.writer_result("ior.shadow", writer)
    assert result["returncode"] == 0 and result.get("errors", 0) == 0
    # the shim reports once the emulated MDS placed
    rep = wait_for(lambda: (r := _report(sock, capsys))["reported"] == FILES and r, 30,
                   "every shadow decision reported", poll_s=0.2)
    records = lv.records()
    assert len(records) == FILES
    # every create went to Lustre's allocator, told so by the mapper's shadow reply
    assert {(r["result"], r["reason"], r["policy"]) for r in records} == \
        {("default", "mapper_shadow", "mcmf")}
    # the emulated MDS placed each file; the shim read each layout back and reported it
    lustre = Counter(i for f in lv.feed.files.values() for i in f.osts)
    assert sum(lustre.values()) == 2 * FILES
    assert (rep["decisions"], rep["reported"], rep["unreported"]) == (FILES, FILES, 0)
    assert {b["ost"]: b["stripes"] for b in rep["lustre"]["busiest"]} == \
        dict(lustre.most_common(len(rep["lustre"]["busiest"])))
    assert rep["mapper"]["expected_s"]["mean"] is not None
    assert rep["lustre"]["expected_s"]["mean"] is not None
    # zero placements booked: no stripe handed out, no reply applied
    m = lv.stack.metrics()
    assert sum(v for k, v in m.items() if k.startswith("lustre_alloc_mapper_ost_stripes_total")) == 0
    assert m['lustre_alloc_mapper_requests_total{result="ok"}'] == 0
    assert m['lustre_alloc_mapper_requests_total{result="shadow"}'] == FILES
    assert m['lustre_alloc_mapper_shadow_reports_total{result="ok"}'] == FILES
    # explain names a shadow decision and its price
    path = records[0]["path"]
    assert ctl.main(["--socket", sock, "--json", "explain", "--path", path]) == 0
    d = json.loads(capsys.readouterr().out)["decision"]
    assert d["mode"] == "shadow" and len(d["osts"]) == 2 and d["shadow_token"] > 0
    assert ctl.main(["--socket", sock, "status"]) == 0
    text = capsys.readouterr().out
    assert "mode shadow" in text and f"{FILES} decisions, {FILES} reported" in text
