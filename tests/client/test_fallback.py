"""The mapper is an optimisation, never a dependency: stopped, slow or
garbage-speaking mappers cost at most LUSTRE_ALLOC_TIMEOUT_MS per create and
every file is still created (plainly), with the reason recorded."""
from __future__ import annotations

import json
import re

import pytest

from .conftest import assert_valid_layout

TIMEOUT_MS = 50
# a create may exceed the mapper timeout by the file system and the
# scheduling of a 2-core machine, never by another timeout
SLACK_MS = 40


def _max_us(stdout: str) -> float:
    return max(float(m) for m in re.findall(r"max_us=([0-9.]+)", stdout))


def test_mapper_stopped_every_create_succeeds_within_timeout(shim_run_factory, dead_endpoint,
                                                            create_files):
    run = shim_run_factory(dead_endpoint)
    p = run.run([create_files, "-n", "5", run.data], LUSTRE_ALLOC_RETRY_MS="0",
                LUSTRE_ALLOC_TIMEOUT_MS=str(TIMEOUT_MS))
    assert "created=5" in p.stdout
    assert _max_us(p.stdout) < (TIMEOUT_MS + SLACK_MS) * 1000
    recs = run.records()
    assert len(recs) == 5
    for r in recs:
        assert r["result"] == "default" and r["osts"] == ""
        assert r["reason"] == "mapper_unreachable"
        assert float(r["mapper_us"]) < (TIMEOUT_MS + SLACK_MS) * 1000


def test_mapper_stopped_back_off_makes_later_creates_cheap(shim_run_factory, dead_endpoint,
                                                           create_files):
    run = shim_run_factory(dead_endpoint)
    p = run.run([create_files, "-t", "4", "-n", "100", run.data])
    assert "created=400" in p.stdout
    reasons = [r["reason"] for r in run.records()]
    assert len(reasons) == 400
    assert set(reasons) <= {"mapper_unreachable", "mapper_backoff"}
    # at most one waiting create per thread before the back-off starts
    assert reasons.count("mapper_unreachable") <= 4
    assert _max_us(p.stdout) < (TIMEOUT_MS + SLACK_MS) * 1000


def test_slow_mapper_times_out_and_file_is_created_plainly(shim_run_factory, standin,
                                                           create_files):
    m = standin("slow", delay_ms=400)
    run = shim_run_factory(m.endpoint)
    p = run.run([create_files, "-n", "3", run.data], LUSTRE_ALLOC_RETRY_MS="0")
    assert "created=3" in p.stdout
    assert _max_us(p.stdout) < (TIMEOUT_MS + SLACK_MS) * 1000
    recs = run.records()
    assert [r["reason"] for r in recs] == ["mapper_timeout"] * 3
    assert all(r["result"] == "default" for r in recs)


def test_socket_is_usable_after_a_timeout_and_late_reply_is_dropped(shim_run_factory, standin,
                                                                    create_files):
    m = standin("slow_first", delay_ms=250)
    run = shim_run_factory(m.endpoint)
    # one thread: the second and later creates reuse the socket that timed out;
    # the stand-in answers the first request late, then the queued ones
    p = run.run([create_files, "-n", "6", run.data], LUSTRE_ALLOC_RETRY_MS="0",
                LUSTRE_ALLOC_TIMEOUT_MS="100")
    assert "created=6" in p.stdout
    recs = run.records()
    assert recs[0]["reason"] == "mapper_timeout"
    later = recs[1:]
    # whatever was in flight, no create takes a layout meant for another one
    ok = [r for r in later if r["result"] == "layout"]
    assert len(ok) >= 2
    for r in ok:
        assert_valid_layout(r)
    assert {r["reason"] for r in later if r["result"] != "layout"} <= {"mapper_timeout"}


@pytest.mark.parametrize("mode,reason", [
    ("garbage", "mapper_garbage:undecodable"),
    ("not_map", "mapper_garbage:not_a_map"),
    ("no_version", "mapper_garbage:version"),
    ("dup_osts", "mapper_garbage:osts_duplicate"),
    ("bad_size", "mapper_garbage:stripe_size"),
    ("frames", "mapper_garbage:frames"),
    ("error", "mapper_error:28"),
    ("wrong_id", "mapper_timeout"),
])
def test_bad_replies_fall_back_to_plain_create(shim_run_factory, standin, create_files, mode,
                                               reason):
    m = standin(mode)
    run = shim_run_factory(m.endpoint)
    # a bad reply must be recognised as such, not outrun by the timeout on a
    # loaded machine; wrong_id is the one case that must time out
    timeout_ms = TIMEOUT_MS if mode == "wrong_id" else 2000
    p = run.run([create_files, "-n", "2", run.data], LUSTRE_ALLOC_RETRY_MS="0",
                LUSTRE_ALLOC_STRIPE_COUNT="2", LUSTRE_ALLOC_TIMEOUT_MS=str(timeout_ms))
    assert "created=2" in p.stdout
    assert _max_us(p.stdout) < (timeout_ms + SLACK_MS) * 1000
    recs = run.records()
    assert [r["reason"] for r in recs] == [reason, reason]
    assert all(r["result"] == "default" and r["osts"] == "" for r in recs)
    assert sorted(p.name for p in run.data.iterdir()) == ["fmain_0_0", "fmain_0_1"]


def test_request_carries_protocol_fields(shim_run_factory, standin, create_files, tmp_path):
    log = tmp_path / "requests.jsonl"
    m = standin("normal", log=log)
    run = shim_run_factory(m.endpoint)
    run.run([create_files, "-n", "2", run.data], LUSTRE_ALLOC_STRIPE_COUNT="2",
            LUSTRE_ALLOC_STRIPE_SIZE="2M", LUSTRE_ALLOC_EXPECTED_BYTES="1G",
            LUSTRE_ALLOC_POOL="flash", LUSTRE_ALLOC_JOBID="ior.7",
            LUSTRE_ALLOC_TIMEOUT_MS="2000")
    reqs = [json.loads(line) for line in log.read_text().splitlines()]
    allocs = [q for q in reqs if q["op"] == "alloc"]
    assert len(allocs) == 2
    for q in allocs:
        assert q["v"] == 1 and q["job"] == "ior.7" and q["pool"] == "flash"
        assert q["stripe_count"] == 2 and q["stripe_size"] == 2 << 20
        assert q["expected_bytes"] == 1 << 30
        assert q["path"].startswith(str(run.data))
    assert allocs[0]["id"] != allocs[1]["id"]
    for r in run.records():
        assert_valid_layout(r, count=2)
