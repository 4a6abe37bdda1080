"""A simulated create asks the mapper what the shim asks for the same create:
the simulator's request (:meth:`lustre_alloc.simulator.create_path.CreatePath.request`) equals, field by
field, the request the real shim sends, captured by the stand-in mapper."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from lustre_alloc.simulator.create_path import CreatePath
from lustre_alloc.traces.format import TraceRecord

MIB = 1 << 20


@pytest.mark.parametrize("hint, env", [("none", {}),
                                       (1 << 30, {"LUSTRE_ALLOC_EXPECTED_BYTES": "1G"})])
def test_simulated_create_request_equals_the_shims(shim_run_factory, standin, create_files,
                                                   tmp_path, hint, env):
    log = tmp_path / "requests.jsonl"
    m = standin("normal", log=log)
    run = shim_run_factory(m.endpoint)
    run.run([create_files, "-n", "1", run.data], LUSTRE_ALLOC_STRIPE_COUNT="2",
            LUSTRE_ALLOC_STRIPE_SIZE="1M", LUSTRE_ALLOC_JOBID="ior.7",
            LUSTRE_ALLOC_TIMEOUT_MS="2000", **env)
    sent = [q for q in map(json.loads, log.read_text().splitlines()) if q["op"] == "alloc"][0]
    # the same create in a trace: the job's first write of 64 MiB to a new file
    rec = TraceRecord(0.0, "write", "ior.7", "ior.7/f0", 64 * MIB, 2, MIB, None, 64)
    path = CreatePath(None, None, frozenset(), Counter(),
                      {} if hint == "none" else {"ior.7": hint})
    req = path.request(rec)
    assert (req.jobid, req.stripe_count, req.stripe_size, req.expected_bytes, req.pool) == \
        (sent["job"], sent["stripe_count"], sent["stripe_size"], sent["expected_bytes"],
         sent.get("pool"))
    assert req.expected_bytes == (0 if hint == "none" else 1 << 30)   # never the true size
