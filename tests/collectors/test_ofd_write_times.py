"""The OFD's service times an OSS collector publishes (obdfilter ``stats``, 2.14+): the
write and sync times the mapper's speed rests on where brw_stats times no write (ZFS)."""
from __future__ import annotations

from pathlib import Path

import pytest

from lustre_alloc.collectors.collector import reduce_stats
from lustre_alloc.collectors.readers.stats_file import parse_stats

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "lustre" / "lustre-2.17.0-vm"


def _ost0000() -> str:
    """OST0000's ``stats`` from the guest's capture (Lustre 2.17.0, osd-zfs)."""
    text = (FIXTURE / "obdfilter.stats.txt").read_text()
    block = text.split("obdfilter.lustre-OST0001.stats=")[0]
    return block.split("=", 1)[1]


def test_sync_and_write_service_times_over_an_interval():
    cur = parse_stats(_ost0000(), "OST0000")
    before = _ost0000().replace("1795882560.306594962", "1795882550.306594962")
    before = before.replace("write_bytes               48 samples [bytes] 1048576 1048576 50331648",
                            "write_bytes               8 samples [bytes] 1048576 1048576 8388608")
    before = before.replace("write                     48 samples [usecs] 1012 22232 104506",
                            "write                     8 samples [usecs] 1012 22232 4506")
    before = before.replace("sync                      6 samples [usecs] 101464 129421 703867",
                            "sync                      2 samples [usecs] 101464 129421 203867")
    prev = parse_stats(before, "OST0000")
    values, unavailable = {}, {}
    reduce_stats("ost", "stats", prev, cur, 10.0, values, unavailable)
    assert not unavailable
    assert values["write_ops_per_s"] == pytest.approx(4.0)          # 40 RPCs over 10 s
    assert values["write_service_time_us_mean"] == pytest.approx(100_000 / 40)
    assert values["sync_ops_per_s"] == pytest.approx(0.4)
    assert values["sync_service_time_us_mean"] == pytest.approx(500_000 / 4)


def test_no_sync_in_the_interval_publishes_no_sync_time():
    cur = parse_stats(_ost0000(), "OST0000")
    prev = parse_stats(_ost0000().replace("1795882560.306594962", "1795882555.306594962"))
    values, unavailable = {}, {}
    reduce_stats("ost", "stats", prev, cur, 5.0, values, unavailable)
    assert "sync_ops_per_s" not in values and "sync_service_time_us_mean" not in values
