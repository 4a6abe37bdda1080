import numpy as np
import pytest

from lustre_alloc.simulator.models import MdsModel, OssModel, raid0_bytes_per_ost, transfer_rates

MIB = 1 << 20


def test_raid0_places_whole_stripes_round_robin_over_the_layout():
    # 5 MiB + 10 bytes over 4 stripes of 1 MiB: chunks 0..4 go to stripes 0,1,2,3,0 and
    # the 10-byte tail (chunk 5) to stripe 1.
    per = raid0_bytes_per_ost(5 * MIB + 10, MIB, 4)
    assert per.tolist() == [2 * MIB, MIB + 10, MIB, MIB]
    assert per.sum() == 5 * MIB + 10


def test_raid0_small_file_lives_on_the_first_stripe_only():
    assert raid0_bytes_per_ost(100, MIB, 4).tolist() == [100, 0, 0, 0]


def test_concurrent_transfers_share_an_ost_equally():
    # two single-stripe transfers on OST 0 (bw 100), one on OST 1 (bw 100)
    rates = transfer_rates(np.array([0, 1, 2]), np.array([0, 0, 1]), np.ones(3), 3,
                           np.array([100.0, 100.0]), np.full(3, np.inf))
    assert rates.tolist() == [50.0, 50.0, 100.0]


def test_striped_transfer_runs_at_its_slowest_ost():
    # transfer 0 stripes evenly over OSTs 0 and 1; OST 0 is shared with transfer 1.
    # OST0 share 50 -> 50/0.5 = 100; OST1 share 100 -> 200; so transfer 0 gets 100.
    rates = transfer_rates(np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([0.5, 0.5, 1.0]), 2,
                           np.array([100.0, 100.0]), np.full(2, np.inf))
    assert rates.tolist() == [100.0, 50.0]


def test_network_cap_limits_transfer_rate():
    rates = transfer_rates(np.array([0]), np.array([0]), np.ones(1), 1, np.array([100.0]),
                           np.array([30.0]))
    assert rates.tolist() == [30.0]


def test_oss_cpu_grows_with_throughput_and_saturates_at_100():
    m = OssModel(cpu_idle_percent=2, cpu_saturation_mib_s=1000, cpu_saturation_ops_s=1e9)
    cpu = m.cpu_percent(np.array([0.0, 500 * MIB, 5000 * MIB]), np.zeros(3))
    assert cpu.tolist() == pytest.approx([2.0, 52.0, 100.0])


def test_mds_cpu_counts_creates():
    m = MdsModel(cpu_idle_percent=5, create_capacity_s=1000, meta_capacity_s=1e9)
    assert m.cpu_percent(100, 0) == pytest.approx(15.0)
