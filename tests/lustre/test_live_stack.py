"""The whole stack on a real Lustre 2.17.0 server: the broker, a collector per role reading
Lustre through ``lctl`` (the OSS's four OSTs, the MDS's MDT and OSP devices), the mapper
subscribed to the broker, and files created under the shim with the mapper's layouts."""
from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lustre_alloc.common.record_file import read_records
from lustre_alloc.livestack.real_lustre import RealLustreStack

from .conftest import FSNAME, MOUNT, N_OSTS, SHIM, rule
from .test_shim import first_osts, layout


@pytest.fixture
def stack(tmp_path):
    """Broker, OSS and MDS collectors (lctl), mapper (mcmf); torn down after. Its gates are
    opened as tests/lustre/test_slow_ost_placement.py opens them (the MDS CPU gate reads
    the writers' CPU on this one node, the round budget and staleness are wall time on an
    emulated CPU): with the defaults every one of the 40 files went to the fallback
    (``lustre_qos``) on three configurations of four, so the test saw no decision of the
    mapper's."""
    s = RealLustreStack(tmp_path / "stack", fsname=FSNAME,
                        mapper_settings={"mds_cpu_limit_percent": 100.0,
                                         "round_budget_s": 5.0, "stale_after_s": 30.0},
                        # the guest's OSTs are alike: by default the mapper would leave the
                        # creates to Lustre's allocator (tests/lustre/test_shim.py), and
                        # this test is about its own decisions
                        policy_params={"mcmf": {"alike_to_lustre": False}})
    try:
        s.start(ready_timeout_s=300, n_osts=N_OSTS)
        yield s
    finally:
        s.stop()


def test_the_mapper_learns_every_ost_from_the_collectors_and_places_files(stack, tmp_path):
    learned_s = stack.ready_s
    work = Path(MOUNT) / "live-stack"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir()
    record = tmp_path / "record"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.update(LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=stack.mapper,
               LUSTRE_ALLOC_RECORD=str(record), LUSTRE_ALLOC_TIMEOUT_MS="5000")
    code = (f"import os\nfor i in range(40):\n"
            f"    with open('{work}/f%d' % i, 'wb') as f: f.write(b'x' * 65536)\n")
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
    recs = read_records(record)
    placed = [r for r in recs if r["result"] == "layout" and r["policy"]]
    mine = sum(1 for r in placed if r["policy"] == "mcmf")    # the mapper's own decisions
    osts = {o for i in range(40) for o in first_osts(layout(work / f"f{i}"))}
    rule("the collectors read a 2.17.0 OSS and MDS through lctl and the mapper learns every "
         "OST through the broker", "lustre_alloc/collectors/, lustre_alloc/mapper/state",
         "livestack's emulated servers (files)",
         f"{N_OSTS} OSTs usable after {learned_s:.0f} s; {len(placed)} of {len(recs)} files "
         f"placed by {sorted({r['policy'] for r in placed})}, on OSTs {sorted(osts)}",
         len(placed) == 40 and mine >= 20)
    assert len(recs) == 40 and len(placed) == 40, recs[:3]
    assert mine >= 20, Counter((r["policy"], r.get("reason", "")) for r in recs)
    for r in placed:
        assert r["osts"] == r["asked"], r
    assert len(osts) == N_OSTS           # every OST used
