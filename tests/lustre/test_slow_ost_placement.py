"""A slow OST on a real Lustre: after a warm-up that writes to every OST, the mapper ranks
the slowed OST slowest from what the collectors read, and the shim's next files keep off it.

Runs in a guest booted with a slowed OST (bench/lustre_vm_setups.toml, setup slow-vdev)::

    LUSTRE_VM_SLOW_OST=1:50 LUSTRE_VM_ZFS_DIRTY_MAX=16777216 bash scripts/lustre-vm.sh test

On ZFS the slowness is invisible to brw_stats (osd-zfs times no write); the OFD's write
and sync service times show it (lustre_alloc/mapper/state/write_time.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lustre_alloc.common.record_file import read_records
from lustre_alloc.livestack.real_lustre import RealLustreStack
from lustre_alloc.livestack.stack import read_metrics

from .conftest import FSNAME, MOUNT, N_OSTS, SHIM, rule, sh, wait_for
from .test_shim import first_osts, layout

SLOW = os.environ.get("LUSTRE_VM_SLOW_OST", "")
pytestmark = pytest.mark.skipif(
    not SLOW, reason="needs a slowed OST: boot with LUSTRE_VM_SLOW_OST=1:50 "
                     "LUSTRE_VM_ZFS_DIRTY_MAX=16777216 (bench/lustre_vm_setups.toml, slow-vdev)")
FILES = 20


def warm_up(root: Path, rounds: int = 4, mib: int = 4) -> None:
    """``rounds`` fsynced files of ``mib`` MiB on every OST in turn (``lfs setstripe -i``):
    what a job that has written to each OST leaves in the counters."""
    root.mkdir()
    for r in range(rounds):
        for i in range(N_OSTS):
            f = root / f"w{r}-{i}"
            sh("lfs", "setstripe", "-i", str(i), "-c", "1", str(f))
            sh("dd", "if=/dev/zero", f"of={f}", "bs=1M", f"count={mib}", "conv=fsync",
               "status=none")


def test_the_mapper_ranks_the_slowed_ost_slowest_and_keeps_new_files_off_it(tmp_path):
    slow = int(SLOW.split(":")[0])
    work = Path(MOUNT) / "slow-ost"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir()
    # the MDS CPU gate reads this one node's CPU (the writers'), and the round budget is
    # wall time on an emulated CPU: bench/lustre_vm_placement.py MAPPER says why
    stack = RealLustreStack(tmp_path / "stack", fsname=FSNAME,
                            mapper_settings={"mds_cpu_limit_percent": 100.0,
                                             "round_budget_s": 0.25})
    try:
        stack.start(ready_timeout_s=300, n_osts=N_OSTS)
        warm_up(work / "warm")
        # the last fsync is in what the mapper holds once each collector published twice more
        key = "lustre_alloc_mapper_samples_total"
        n0 = read_metrics(stack.metrics_port).get(key, 0.0)
        wait_for(lambda: read_metrics(stack.metrics_port).get(key, 0.0) >= n0 + 4, 60,
                 "two more samples from each collector")
        record = tmp_path / "record"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
        env.update(LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=stack.mapper,
                   LUSTRE_ALLOC_RECORD=str(record), LUSTRE_ALLOC_TIMEOUT_MS="5000")
        (work / "job").mkdir()
        code = (f"import os\nfor i in range({FILES}):\n"
                f"    with open('{work}/job/f%d' % i, 'wb') as f: f.write(b'x' * 65536)\n")
        assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
        status = json.loads(subprocess.run(
            [sys.executable, "-m", "lustre_alloc.mapper.service.ctl", "--json", "status"],
            capture_output=True, text=True, check=True).stdout)
    finally:
        stack.stop()
    fs = status["filesystems"][0]
    slow_estimates = {e["ost"]: e["ratio"] for e in fs.get("slow_estimates", [])}
    placed = Counter(o for i in range(FILES) for o in first_osts(layout(work / "job" / f"f{i}")))
    recs = read_records(record)
    subprocess.run(["rm", "-rf", str(work)], check=True)
    ok = slow in slow_estimates and min(slow_estimates, key=slow_estimates.get) == slow \
        and placed[slow] <= 1
    rule("a ZFS OST slowed at its vdev shows in the OFD's write and sync service times, not "
         "in brw_stats; the mapper ranks it slowest and places around it",
         "lustre_alloc/mapper/state/write_time.py write_time(); osd-zfs/osd_io.c "
         "osd_write_commit() record_end_io(osd, WRITE, 0, ...); ofd_dev.c ofd_sync_hdl()",
         "tests/mapper/test_write_time.py (collectors' values of a ZFS OST)",
         f"OST{slow} slowed: believed slow {slow_estimates or 'none'}; files per OST "
         f"{dict(sorted(placed.items()))} of {FILES} ({len(recs)} records)", ok)
    assert slow in slow_estimates, status
    assert min(slow_estimates, key=slow_estimates.get) == slow, slow_estimates
    assert placed[slow] <= 1, placed
