"""The collector: values from fixture trees and lctl dumps, unavailable sources with reasons,
recovery on the next good read, counter resets (never negative rates), brw_stats latency."""
from __future__ import annotations

from pathlib import Path

import pytest

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.readers.host_load import HostLoad
from lustre_alloc.collectors.sources import FileSource, LctlSource

from .conftest import DDN, HPE, HPE_PROC, fake_lctl

OST = "fs-OST0001"


class FakeLoad:
    def read(self) -> HostLoad:
        return HostLoad(12.5, 40.0, 1.0, 1.0, 1.0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stats_text(t: float, rsum: int, wsum: int, wsamples: int, statfs: int = 3) -> str:
    return (f"snapshot_time             {t:.9f} secs.nsecs\n"
            f"read_bytes                {rsum // 4096} samples [bytes] 4096 4096 {rsum}\n"
            f"write_bytes               {wsamples} samples [bytes] 4096 4194304 {wsum}\n"
            f"statfs                    {statfs} samples [reqs]\n")


def brw_text(t: float, write_ms: dict[int, int]) -> str:
    rows = "".join(f"{b}:\t\t         0   0   0   | {c:4d}   0   0\n" for b, c in write_ms.items())
    return (f"snapshot_time:         {t:.9f} (secs.nsecs)\n\n"
            "                           read      |     write\n"
            "I/O time (1/1000s)     ios   % cum % |  ios         % cum %\n" + rows)


JOBS = """job_stats:
- job_id:          {job}
  snapshot_time:   {t}
  read_bytes:      {{ samples:           0, unit: bytes, min:       0, max:       0, sum:               0 }}
  write_bytes:     {{ samples:       {n}, unit: bytes, min:    4096, max: 4194304, sum:    {wsum} }}
  punch:           {{ samples:           1, unit:  reqs }}
"""


class Tree:
    """A writable 2.10-style tree with one OST."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "proc/fs/lustre/obdfilter" / OST
        self.osd = root / "proc/fs/lustre/osd-ldiskfs" / OST
        self.dir.mkdir(parents=True)
        self.osd.mkdir(parents=True)
        (root / "proc/sys/lnet").mkdir(parents=True)
        self.write("kbytesfree", "1000\n")
        self.write("kbytestotal", "4000\n")
        self.write("kbytesavail", "900\n")

    def write(self, name: str, text: str) -> None:
        target = self.osd if name == "brw_stats" else self.root / "proc/sys/lnet" if name == "lnet" else self.dir
        (target / ("stats" if name == "lnet" else name)).write_text(text)


@pytest.fixture
def tree(tmp_path):
    return Tree(tmp_path)


def make(tree_root, clock):
    return Collector("oss", FileSource(tree_root), host_load=FakeLoad(), clock=clock)


def test_collects_every_2_10_ost_with_values_from_the_files(hpe_root):
    c = Collector("oss", FileSource(hpe_root), host_load=FakeLoad())
    first = c.collect()
    sample = c.collect()
    assert set(sample["targets"]) == {"lustrefs-OST0000", "lustrefs-OST0002", "lustrefs-OST0004",
                                      "lustrefs-OST0006"}
    ost0 = sample["targets"]["lustrefs-OST0000"]
    assert ost0["available"] and ost0["index"] == 0 and ost0["unavailable"] == {}
    assert ost0["values"]["kbytes_free"] == 47029440512
    assert ost0["values"]["kbytes_total"] == 47168367616
    assert ost0["values"]["files_free"] == 45927188
    assert ost0["values"]["write_bytes_per_s"] == 0.0  # same file read twice
    assert first["targets"]["lustrefs-OST0000"]["unavailable"]["stats_rates"] == "warming_up"
    server = sample["server"]["values"]
    assert server["lustre_version"] == "2.10.1" and server["healthy"] is True
    assert server["lnet_msgs_max"] == 28 and server["cpu_percent"] == 12.5


def test_mds_role_reads_2_10_mdt(hpe_root):
    c = Collector("mds", FileSource(hpe_root), host_load=FakeLoad())
    c.collect()
    mdt = c.collect()["targets"]["lustrefs-MDT0000"]
    assert mdt["available"] and mdt["kind"] == "mdt"
    assert mdt["values"]["md_ops_per_s"] == 0.0
    expected = int((HPE_PROC / "osd-zfs/lustrefs-MDT0000/kbytesfree").read_text())
    assert mdt["values"]["kbytes_free"] == expected


def test_rates_over_the_interval_use_snapshot_time(tree):
    clock = FakeClock()
    tree.write("stats", stats_text(100.0, 0, 0, 0))
    c = make(tree.root, clock)
    c.collect()
    clock.now += 5.0
    tree.write("stats", stats_text(105.0, 4096 * 50, 5_000_000_000, 1000, statfs=13))
    v = c.collect()["targets"][OST]["values"]
    assert v["write_bytes_per_s"] == pytest.approx(1e9)
    assert v["write_ops_per_s"] == pytest.approx(200.0)
    assert v["read_bytes_per_s"] == pytest.approx(4096 * 10)
    assert v["other_ops_per_s"] == pytest.approx(2.0)


def test_counter_reset_gives_no_rate_then_recovers(tree):
    clock = FakeClock()
    tree.write("stats", stats_text(100.0, 0, 10**9, 100))
    c = make(tree.root, clock)
    c.collect()
    clock.now += 5
    tree.write("stats", stats_text(105.0, 0, 10**6, 1))  # cleared: values went down
    ost = c.collect()["targets"][OST]
    assert ost["unavailable"]["stats_rates"].startswith("counter_reset")
    assert "write_bytes_per_s" not in ost["values"]
    assert ost["available"]  # space and health are still good
    clock.now += 5
    tree.write("stats", stats_text(110.0, 0, 10**6 + 5 * 1000, 2))
    ost = c.collect()["targets"][OST]
    assert ost["values"]["write_bytes_per_s"] == pytest.approx(1000.0)
    assert "stats_rates" not in ost["unavailable"]


def test_collector_marks_ost_unavailable_when_kbytesfree_missing(tree):
    tree.write("stats", stats_text(100.0, 0, 0, 0))
    c = make(tree.root, FakeClock())
    (tree.dir / "kbytesfree").unlink()
    ost = c.collect()["targets"][OST]
    assert ost["available"] is False
    assert ost["unavailable"]["kbytesfree"].startswith("missing")
    assert ost["values"]["kbytes_total"] == 4000
    tree.write("kbytesfree", "999\n")
    ost = c.collect()["targets"][OST]
    assert ost["available"] and ost["values"]["kbytes_free"] == 999


def test_garbled_stats_file_is_reported_and_collection_goes_on(tree):
    tree.write("stats", "snapsh\x00ot garbage\n")
    c = make(tree.root, FakeClock())
    sample = c.collect()
    ost = sample["targets"][OST]
    assert ost["available"] is False and ost["unavailable"]["stats"].startswith("garbled")
    tree.write("stats", stats_text(100.0, 0, 0, 0))
    assert c.collect()["targets"][OST]["available"]


def test_lnet_reset_is_detected(tree):
    clock = FakeClock()
    tree.write("stats", stats_text(100.0, 0, 0, 0))
    tree.write("lnet", "0 28 0 1000 1000 0 0 5000 5000 0 0\n")
    c = make(tree.root, clock)
    c.collect()
    clock.now += 2
    tree.write("lnet", "0 28 0 1010 1020 0 0 9000 5000 0 0\n")
    values = c.collect()["server"]["values"]
    assert values["lnet_send_msgs_per_s"] == pytest.approx(5.0)
    assert values["lnet_send_bytes_per_s"] == pytest.approx(2000.0)
    clock.now += 2
    tree.write("lnet", "0 28 0 3 3 0 0 10 10 0 0\n")
    server = c.collect()["server"]
    assert server["unavailable"]["lnet_rates"].startswith("counter_reset")
    assert all(v >= 0 for k, v in server["values"].items() if k.endswith("_per_s"))


def test_write_latency_summary_from_brw_stats_deltas(tree):
    clock = FakeClock()
    tree.write("stats", stats_text(100.0, 0, 0, 0))
    tree.write("brw_stats", brw_text(100.0, {1: 10, 2: 0, 4: 0, 8: 0}))
    c = make(tree.root, clock)
    c.collect()
    clock.now += 5
    # 100 new writes: 90 in (2,4] ms, 10 in (4,8] ms
    tree.write("brw_stats", brw_text(105.0, {1: 10, 2: 0, 4: 90, 8: 10}))
    v = c.collect()["targets"][OST]["values"]
    assert v["write_ios"] == 100
    assert v["write_io_time_ms_mean"] == pytest.approx((90 * 3 + 10 * 6) / 100)
    assert v["write_io_time_ms_p50"] == 4 and v["write_io_time_ms_p99"] == 8
    assert v["read_ios"] == 0 and "read_io_time_ms_mean" not in v


def test_job_rates_top_jobs_and_job_reset(tree):
    clock = FakeClock()
    tree.write("stats", stats_text(100.0, 0, 0, 0))
    tree.write("job_stats", JOBS.format(job="a", t=100, n=10, wsum=1000)
               + JOBS.format(job="b", t=100, n=10, wsum=1000).replace("job_stats:\n", ""))
    c = make(tree.root, clock)
    c.collect()
    clock.now += 10
    tree.write("job_stats", JOBS.format(job="a", t=110, n=20, wsum=1000 + 10_000)
               + JOBS.format(job="b", t=110, n=5, wsum=500).replace("job_stats:\n", "")
               + JOBS.format(job="c", t=110, n=1, wsum=100).replace("job_stats:\n", ""))
    ost = c.collect()["targets"][OST]
    assert [j["job_id"] for j in ost["jobs"]] == ["a", "c"]
    assert ost["jobs"][0]["write_bytes_per_s"] == pytest.approx(1000.0)
    assert ost["values"]["jobs_reset"] == 1 and ost["values"]["jobs_active"] == 2


def test_lctl_path_reads_2_14_dump(tmp_path):
    cmd = fake_lctl(tmp_path, DDN / "valid/valid.txt")
    c = Collector("oss", LctlSource("oss", cmd, []), host_load=FakeLoad())
    c.collect()
    sample = c.collect()
    assert set(sample["targets"]) == {"ai400-OST0000", "ai400-OST0001"}
    ost = sample["targets"]["ai400-OST0000"]
    assert ost["available"], ost["unavailable"]
    assert ost["values"]["kbytes_free"] == 3875693364
    assert ost["values"]["kbytes_avail"] == 3835411664
    assert sample["server"]["values"]["healthy"] is True
    assert sample["server"]["unavailable"]["lnet"].startswith("missing")


def test_lctl_path_mds_reads_md_stats(tmp_path):
    cmd = fake_lctl(tmp_path, DDN / "2.14.0_ddn144_mds.txt")
    c = Collector("mds", LctlSource("mds", cmd, []), host_load=FakeLoad())
    mdt = c.collect()["targets"]["fs-MDT0000"]
    assert mdt["available"] and mdt["values"]["kbytes_total"] == 2602832


def test_failing_lctl_marks_targets_unavailable_without_raising(tmp_path):
    c = Collector("oss", LctlSource("oss", [str(tmp_path / "no-such-lctl")], []),
                  host_load=FakeLoad())
    sample = c.collect()
    assert sample["targets"] == {}
    assert sample["server"]["unavailable"]["targets"].startswith("command")


def test_lnetctl_is_used_when_lnet_stats_is_absent(tmp_path):
    lctl = fake_lctl(tmp_path, DDN / "valid/valid.txt")
    lnetctl = fake_lctl(tmp_path, DDN / "lnetctl_stats.txt", name="lnetctl")
    c = Collector("oss", LctlSource("oss", lctl, lnetctl), host_load=FakeLoad())
    values = c.collect()["server"]["values"]
    assert values["lnet_msgs_max"] == 39
