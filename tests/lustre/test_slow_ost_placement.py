"""A slow OST on a real Lustre: after a warm-up that writes to every OST, the mapper ranks
the slowed OST slowest from what the collectors read, and the shim's next files keep off it.

The OST is slowed as bench/lustre_vm_setups.toml's slow-vdev slows it, by the test itself
(guest-run.sh keeps one OST's vdev behind dm-delay at 0 ms) or at boot
(``LUSTRE_VM_SLOW_OST=1:50 LUSTRE_VM_ZFS_DIRTY_MAX=16777216``). On ZFS the slowness is invisible to brw_stats (osd-zfs times no write); the OFD's write
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

from .conftest import FSNAME, MOUNT, N_OSTS, OSD, SHIM, rule, sh, wait_for
from .test_shim import first_osts, layout

DELAYED = os.environ.get("LUSTRE_VM_DELAYED_OST", "1:slow-ost1:")
"""``index:dm device:table without its delay`` of the OST guest-run.sh put behind dm-delay."""
DIRTY_MAX = Path("/sys/module/zfs/parameters/zfs_dirty_data_max")
SLOW_MS, SLOW_DIRTY_MAX = 50, 16 << 20
"""The slow-vdev setup of bench/lustre_vm_setups.toml: 50 ms per I/O, a 16 MiB dirty limit."""


def dm_delay(device: str, table: str, ms: int) -> None:
    """Load ``ms`` of delay into the dm-delay ``device`` (no udev in the guest)."""
    for step in (["suspend"], ["load", "--table", f"{table} {ms}"], ["resume"]):
        sh("dmsetup", step[0], "--noudevsync", device, *step[1:])


@pytest.fixture
def slowed_ost():
    """OST index slowed as slow-vdev slows it: the guest's setting when it was booted so
    (``LUSTRE_VM_SLOW_OST``), else done here (the ext4 under its vdev remounted ``sync``,
    50 ms on its dm-delay device, ZFS's dirty limit 16 MiB) and undone after."""
    index, device, table = DELAYED.split(":", 2)
    if os.environ.get("LUSTRE_VM_SLOW_OST"):
        yield int(index)
        return
    if OSD == "ldiskfs":
        # the OST is the delayed device itself: every block I/O it submits waits
        dm_delay(device, table, SLOW_MS)
        try:
            yield int(index)
        finally:
            dm_delay(device, table, 0)
        return
    dirty = DIRTY_MAX.read_text().strip()
    sh("mount", "-o", "remount,sync", "/data/slow")
    dm_delay(device, table, SLOW_MS)
    DIRTY_MAX.write_text(str(SLOW_DIRTY_MAX))
    try:
        yield int(index)
    finally:
        DIRTY_MAX.write_text(dirty)
        dm_delay(device, table, 0)
        sh("mount", "-o", "remount,async", "/data/slow")


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


def test_the_mapper_ranks_the_slowed_ost_slowest_and_keeps_new_files_off_it(tmp_path,
                                                                            slowed_ost):
    slow = slowed_ost
    work = Path(MOUNT) / "slow-ost"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir()
    # the MDS CPU gate reads this one node's CPU (the writers'), and the round budget is
    # wall time on an emulated CPU (bench/lustre_vm_placement.py MAPPER says why); this
    # test asks which OSTs the mapper picks, not how fast: with other guests and a build on
    # the host, the bench's 0.25 s budget handed 13 of 20 creates to the fallback. With two
    # other guests and a simulation on the host all 20 went to the fallback, on ZFS and on
    # ldiskfs (the reason was not recorded then; the assertion now says it): the staleness
    # gate, twice the collectors' 2 s interval by default, is the one late emulated
    # collectors trip, so it waits 30 s here
    stack = RealLustreStack(tmp_path / "stack", fsname=FSNAME,
                            mapper_settings={"mds_cpu_limit_percent": 100.0,
                                             "round_budget_s": 5.0, "stale_after_s": 30.0})
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
    recs = read_records(record)
    # the mapper's own decisions: on this emulated node the gates (round budget, MDS CPU)
    # hand some creates to the fallback, Lustre's allocator's rules, which know nothing of
    # a slow OST (seen with three guests on the host: 3 of 20 on OST1, all the fallback's)
    by_mapper = {r["path"] for r in recs if r["policy"] == "mcmf"}
    placed = Counter(o for i in range(FILES) if str(work / "job" / f"f{i}") in by_mapper
                     for o in first_osts(layout(work / "job" / f"f{i}")))
    subprocess.run(["rm", "-rf", str(work)], check=True)
    ok = slow in slow_estimates and min(slow_estimates, key=slow_estimates.get) == slow \
        and placed[slow] <= 1 and sum(placed.values()) >= FILES // 2
    rule(f"an {OSD} OST slowed at its device: the mapper ranks it slowest and places "
         "around it" + (" (ZFS: the OFD's write and sync service times show it, brw_stats "
                        "not)" if OSD == "zfs" else " (ldiskfs: brw_stats' I/O time shows it)"),
         "lustre_alloc/mapper/state/write_time.py write_time(); " + (
             "osd-zfs/osd_io.c osd_write_commit() record_end_io(osd, WRITE, 0, ...); "
             "ofd_dev.c ofd_sync_hdl()" if OSD == "zfs" else
             "osd-ldiskfs/osd_io.c osd_bio_fini() dr_elapsed, osd_fini_iobuf()"),
         "tests/mapper/test_write_time.py (collectors' values of a ZFS OST)",
         f"OST{slow} slowed: believed slow {slow_estimates or 'none'}; files per OST "
         f"{dict(sorted(placed.items()))} of the {sum(placed.values())} the mapper placed "
         f"({len(recs)} records of {FILES} files)", ok)
    assert slow in slow_estimates, status
    assert min(slow_estimates, key=slow_estimates.get) == slow, slow_estimates
    assert placed[slow] <= 1, placed
    assert sum(placed.values()) >= FILES // 2, Counter(
        (r["policy"], r.get("reason", "")) for r in recs)
