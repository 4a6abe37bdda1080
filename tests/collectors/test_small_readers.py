"""One-number files, LNet stats, lnetctl, health_check and host load readers."""
from __future__ import annotations

import pytest

from lustre_alloc.common.errors import (HealthCheckError, LnetctlError, LnetStatsError, SingleValueError)
from lustre_alloc.collectors.readers.health_check import parse_health_check
from lustre_alloc.collectors.readers.host_load import HostLoadReader
from lustre_alloc.collectors.readers.kbytes import parse_single_value
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param
from lustre_alloc.collectors.readers.lnet_stats import FIELDS, parse_lnet_stats
from lustre_alloc.collectors.readers.lnetctl import parse_lnetctl_stats

from .conftest import CONSTRUCTED, DDN, HPE, HPE_PROC


@pytest.mark.parametrize("ost,free,total,avail", [
    ("lustrefs-OST0000", 47029440512, 47168367616, 47025124352),
    ("lustrefs-OST0004", 31445595136, 31445606400, 31445593088),
])
def test_reads_2_10_kbytes_files(ost, free, total, avail):
    d = HPE_PROC / "obdfilter" / ost
    assert parse_single_value((d / "kbytesfree").read_text()) == free
    assert parse_single_value((d / "kbytestotal").read_text()) == total
    assert parse_single_value((d / "kbytesavail").read_text()) == avail


def test_reads_2_10_filesfree():
    assert parse_single_value((HPE_PROC / "obdfilter/lustrefs-OST0000/filesfree").read_text()) == 45927188


@pytest.mark.parametrize("text", ["", "abc", "-1", "1 2", "../../osd-zfs/x/kbytesfree", "1.5"])
def test_garbled_single_value_raises(text):
    with pytest.raises(SingleValueError):
        parse_single_value(text, "kbytesfree")


def test_reads_2_10_proc_sys_lnet_stats():
    values = parse_lnet_stats((HPE / "proc/sys/lnet/stats").read_text())
    assert list(values) == list(FIELDS)
    assert values["msgs_max"] == 28
    assert values["send_count"] == 101719323 and values["recv_count"] == 101719291
    assert values["send_length"] == 21201322992 and values["recv_length"] == 53029565353720


@pytest.mark.parametrize("text", ["", "1 2 3", "0 28 0 1 1 0 0 1 1 0 0 9", "0 28 0 1 1 0 0 1 1 0 x"])
def test_garbled_lnet_stats_raises(text):
    with pytest.raises(LnetStatsError):
        parse_lnet_stats(text)


def test_reads_2_12_plus_lnetctl_stats():
    values = parse_lnetctl_stats((DDN / "lnetctl_stats.txt").read_text())
    assert values["send_count"] == 1110532 and values["recv_count"] == 1110512
    assert values["drop_count"] == 11 and values["drop_length"] == 4832
    assert values["rst_alloc"] == 15 and values["network_timeout_count"] == 0
    assert len(values) == 24


def test_reads_2_17_lnetctl_stats_with_the_resend_counters():
    """2.17.0 liblnetconfig.c lustre_lnet_show_stats() adds failed_resends and
    successful_resends to 2.12's 24 counters (not in 2.16.0)."""
    values = parse_lnetctl_stats((CONSTRUCTED / "lnetctl_stats-2.17.txt").read_text())
    assert len(values) == 26 and values["failed_resends"] == 1
    assert values["send_count"] == 2210532 and values["drop_length"] == 2416


def test_reads_2_10_lnetctl_stats_with_eleven_keys():
    text = "statistics:\n" + "".join(f"    {name}: {i}\n" for i, name in enumerate(FIELDS))
    assert parse_lnetctl_stats(text) == {name: i for i, name in enumerate(FIELDS)}


@pytest.mark.parametrize("text", ["", "stats:\n  a: 1\n", "statistics:\n"])
def test_garbled_lnetctl_raises(text):
    with pytest.raises(LnetctlError):
        parse_lnetctl_stats(text)


def test_reads_healthy_2_10_sysfs_health_check():
    health = parse_health_check((HPE / "sys/fs/lustre/health_check").read_text())
    assert health.healthy and health.unhealthy_targets == []


def test_reads_unhealthy_devices_from_lctl_dump():
    dump = parse_get_param((DDN / "valid/valid_unhealthy_host.txt").read_text())
    health = parse_health_check(dump.values["health_check"])
    assert not health.healthy
    assert health.unhealthy_targets == ["lustre-OST0012", "lustre-OST0014", "lustre-OST0016"]


def test_unknown_health_status_raises():
    with pytest.raises(HealthCheckError):
        parse_health_check("maybe\n")
    assert parse_health_check("NOT HEALTHY\n").healthy is False


def test_host_load_is_within_percent_bounds():
    load = HostLoadReader().read()
    assert 0.0 <= load.cpu_percent <= 100.0 and 0.0 < load.mem_percent <= 100.0
    assert load.load1 >= 0.0
