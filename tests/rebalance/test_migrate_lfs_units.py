"""``lfs migrate -W`` is MiB/s (lfs.c v2_16_0: ``llapi_parse_size()`` with ``bandwidth_unit =
ONE_MB``; on Lustre 2.17.0 ``-W 10`` moved 20 MiB in 2.37 s): the service's argument and the
stand-in lfs's reading of it."""
from __future__ import annotations

import pytest

from lustre_alloc.livestack.lfs import LfsFailure, parse_bandwidth
from lustre_alloc.rebalance.lfs import Lfs, bandwidth_arg

MIB = 1 << 20


def test_the_service_passes_whole_kib_per_second_rounded_down_at_least_one():
    assert bandwidth_arg(10 * MIB) == "10240k"
    assert bandwidth_arg(10 * MIB + 1023) == "10240k"    # the cap holds
    assert bandwidth_arg(300_000) == "292k"              # below 1 MiB/s: still exact to 1 KiB
    assert bandwidth_arg(100) == "1k"
    assert parse_bandwidth(bandwidth_arg(300_000)) == 292 * 1024
    argv = Lfs(bandwidth_option=True).migrate_argv("/mnt/f", ["-c", "1", "-o", "2"], 40 * MIB)
    assert argv[argv.index("-W") + 1] == "40960k"
    assert "-W" not in Lfs().migrate_argv("/mnt/f", ["-c", "1", "-o", "2"], 40 * MIB)  # < 2.16


@pytest.mark.parametrize("text,bytes_s", [("10", 10 * MIB), ("10M", 10 * MIB),
                                          ("512k", 512 << 10), ("1G", 1 << 30),
                                          ("8b", 4096), ("4096c", 4096), ("1.5", 1.5 * MIB)])
def test_the_stand_in_lfs_reads_w_as_lfs_does(text, bytes_s):
    assert parse_bandwidth(text) == bytes_s


def test_a_bad_bandwidth_is_einval():
    with pytest.raises(LfsFailure):
        parse_bandwidth("fast")
