"""One statistics path: the simulator keeps what an OST's brw_stats and obdfilter
stats would hold, advanced only by RPCs that ran, and reduces it with the collectors' own
code. The same traffic through the live emulator (real files, the real collector) gives the
same sample up to the histograms' bucket resolution, and an idle OST's sample carries no
interval I/O time on either side."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.readers.host_load import HostLoad
from lustre_alloc.collectors.reduce import log2_bucket
from lustre_alloc.collectors.sources import FileSource
from lustre_alloc.livestack.emulator import EmulatedCluster
from lustre_alloc.mapper.speed.rates import OstRateTracker
from lustre_alloc.mapper.policies.registry import make_policy
from lustre_alloc.simulator.cluster import MIB, SimCluster
from lustre_alloc.simulator.engine import Simulation
from lustre_alloc.simulator.mds_view import MdsView
from lustre_alloc.simulator.network.model import make_network
from lustre_alloc.simulator.ost_readings import OstReadings, log2_bucket_index
from lustre_alloc.simulator.scenario import load_scenario

BW = 400.0 * MIB


class FixedLoad:
    def read(self):
        return HostLoad(10.0, 20.0, 0.5, 0.5, 0.5)


def _cluster() -> SimCluster:
    return SimCluster(oss_names=["oss0"], ost_index=np.arange(2), ost_oss=np.array([0, 0]),
                      capacity_bytes=np.full(2, float(1 << 40)), used_bytes=np.zeros(2),
                      bandwidth_bytes_s=np.full(2, BW))


def interval_values(sim: Simulation) -> dict[int, dict]:
    """Each OST's sample values over the whole run so far (from its first reading)."""
    values = {}
    for p in (0, 1):
        v, u = {}, {}
        sim.mds._prev.pop(p)
        sim.mds._reduce(p, 5.0, 5.0, v, u)
        values[p] = v
    return values


def _simulation() -> Simulation:
    sc = load_scenario("paper-32ost")
    return Simulation(sc, _cluster(), make_policy("round_robin"), [],
                      make_network(sc.network, **sc.network_params))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1e7, allow_nan=False), min_size=1, max_size=30))
def test_vectorised_bucket_is_the_kernels_tally(values):
    idx = log2_bucket_index(np.array(values))
    assert [1 << int(i) for i in idx] == [log2_bucket(v) for v in values]


def test_live_emulator_and_simulator_give_the_same_sample(tmp_path):
    # Live: two files grow by 4 MiB each on OST 0 in one interval; OST 1 idles.
    emu = EmulatedCluster(_cluster(), tmp_path)
    collector = Collector("oss", FileSource(emu.oss_root("oss0")), host_load=FixedLoad())
    collector.collect()                                   # first reading: warming up
    for f in ("a", "b"):
        emu.charge([0], MIB, 0, 4 * MIB, "ior.1", f)
    emu.flush()
    live = {t["index"]: t["values"] for t in collector.collect()["targets"].values()}
    # Simulated: the same 8 MiB on OST 0, shared by the same two streams.
    sim = _simulation()
    sim.mds.readings.step(np.zeros(2), np.array([8.0 * MIB, 0.0]), np.array([2, 0]),
                          np.full(2, BW), np.full(2, BW), None)
    sim._refresh_stats(5.0)
    mine = {o.index: o for o in sim.mds.store.snapshot.osts}
    values = interval_values(sim)
    for key in ("write_ios", "write_io_time_ms_mean", "write_io_time_ms_p50",
                "write_io_time_ms_p99", "write_io_size_bytes_mean", "write_ios_in_flight_mean"):
        assert live[0][key] == values[0][key], key
    assert live[0]["write_ios"] == 8
    # two streams shared the OST: each RPC saw two in flight, and the store keeps it
    assert live[0]["write_ios_in_flight_mean"] == 2.0
    assert mine[0].write_in_flight == 2.0 and mine[1].write_in_flight is None
    # the idle OST: RPC counts 0 and no I/O time, live and simulated, and so in the store
    assert live[1]["write_ios"] == values[1]["write_ios"] == 0
    assert "write_io_time_ms_mean" not in live[1] and "write_io_time_ms_mean" not in values[1]
    assert mine[1].write_latency_s is None
    assert mine[0].write_latency_s == live[0]["write_io_time_ms_mean"] / 1000.0


def test_an_idle_ost_has_no_interval_io_time_in_a_run():
    """Through the engine's own steps: after traffic on OST 0 only, the mapper's store knows
    OST 0's RPC time and nothing of OST 1's; after an idle interval, of neither."""
    sim = _simulation()
    written = np.array([64.0 * MIB, 0.0])
    sim.mds.readings.step(np.zeros(2), written, np.array([1, 0]), np.full(2, BW),
                          np.full(2, BW), None)
    sim._refresh_stats(5.0)
    osts = {o.index: o for o in sim.mds.store.snapshot.osts}
    assert osts[0].write_latency_s is not None and osts[1].write_latency_s is None
    assert osts[0].write_bytes_per_s > 0 and not osts[1].write_bytes_per_s
    sim._refresh_stats(10.0)                              # nothing ran since
    osts = {o.index: o for o in sim.mds.store.snapshot.osts}
    assert osts[0].write_latency_s is None and osts[1].write_latency_s is None
    assert osts[0].write_bytes_per_s == 0.0


def test_a_look_at_several_samples_equals_the_simulators_one_sample_over_their_span():
    """Live, the collectors sample every 5 s and a round looks at creates; the simulator
    reduces once, at the create, over everything since its last sample. Three 5 s samples
    (a slow, shared OST 0, then idle) folded by the store and one 15 s sample of the same
    readings give the rate tracker the same estimate: live and simulated rounds know the
    same, and the slow interval is not lost behind the idle ones."""
    sim = _simulation()
    every = MdsView(sim.sc, sim.cl, sim.used, sim.present, sim.initial_osses,
                    sim.network.oss_link_bytes_s)
    every.readings = sim.mds.readings                     # one set of counters, two readers
    every.job_readings = sim.mds.job_readings
    sim.mds.readings.step(np.zeros(2), np.array([24.0 * MIB, 64.0 * MIB]), np.array([3, 1]),
                          np.full(2, BW), np.array([BW / 4, BW]), None)
    for t in (5.0, 10.0, 15.0):
        sim._refresh_stats(t, every)
    sim._refresh_stats(15.0)
    assert every.view.osts[0].write_latency_s is None      # the latest 5 s: idle
    looks = [OstRateTracker(smoothing=1.0) for _ in range(2)]
    looks[0].update(every.view.osts)
    looks[1].update(sim.mds.view.osts)
    assert np.allclose(looks[0].rates([0, 1]), looks[1].rates([0, 1]), rtol=1e-12)
    assert np.allclose(looks[0].latencies([0, 1]), looks[1].latencies([0, 1]), rtol=1e-12)
    rates = looks[0].rates([0, 1])
    assert rates[0] < rates[1] / 2


def _zfs_simulation() -> Simulation:
    sc = load_scenario("paper-32ost")
    cluster = _cluster()
    cluster.osd = "zfs"
    return Simulation(sc, cluster, make_policy("round_robin"), [],
                      make_network(sc.network, **sc.network_params))


def test_a_zfs_ost_times_no_write_in_brw_stats_and_its_ofd_does():
    """As osd-zfs (``osd_write_commit()``: ``record_end_io(osd, WRITE, 0, ...)``): brw_stats'
    write I/O time stays empty, the OFD's ``write [usecs]`` carries the RPCs' time, and the
    mapper takes a ZFS OST's speed from it as deployed (write_time.py's OFD path, the
    write-back fold): OST 0, four times slower, reads slower."""
    from lustre_alloc.collectors.readers.brw_stats import IO_TIME
    from lustre_alloc.mapper.state.write_time import OFD_STATS, write_time
    sim = _zfs_simulation()
    sim.mds.readings.step(np.zeros(2), np.full(2, 64.0 * MIB), np.array([1, 1]),
                          np.full(2, BW), np.array([BW / 4, BW]), None)
    assert not any(sim.mds.readings.brw_stats(0, 5.0).histograms[IO_TIME].write)
    ofd = sim.mds.readings.stats(0, 5.0).counters["write"]
    assert ofd.unit == "usecs" and ofd.samples == 64 and ofd.sum > 0
    sim._refresh_stats(5.0)
    values = interval_values(sim)
    assert "write_io_time_ms_mean" not in values[0]
    assert values[0]["write_service_time_us_mean"] == 4 * values[1]["write_service_time_us_mean"]
    assert write_time(values[0], 5.0).source == OFD_STATS
    tracker = OstRateTracker(smoothing=1.0, write_back_alike=None)
    tracker.update(sim.mds.view.osts)
    assert tracker.write_back([0, 1]).all()
    rates = tracker.rates([0, 1])
    assert rates[0] < rates[1] / 2


def test_an_ldiskfs_osts_ofd_write_time_is_there_and_brw_stats_still_rules():
    sim = _simulation()
    sim.mds.readings.step(np.zeros(2), np.full(2, 64.0 * MIB), np.array([1, 1]),
                          np.full(2, BW), np.full(2, BW), None)
    assert sim.mds.readings.stats(0, 5.0).counters["write"].samples == 64
    v, u = {}, {}
    sim.mds._reduce(0, 5.0, 5.0, v, u)
    from lustre_alloc.mapper.state.write_time import BRW_STATS, write_time
    assert write_time(v, 5.0).source == BRW_STATS
