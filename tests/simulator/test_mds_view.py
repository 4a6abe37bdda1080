"""The simulator hands the policies nothing that did not come through the mapper's state
store: every load field of the MDS view is the store's output, in every world."""
from __future__ import annotations

import numpy as np
import pytest

from lustre_alloc.mapper.policies.registry import make_policy
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.simulator.cluster import MIB, SimCluster
from lustre_alloc.simulator.engine import Simulation
from lustre_alloc.simulator.network.model import make_network
from lustre_alloc.simulator.scenario import load_scenario

OST_BYTES = 1 << 40


def _simulation() -> Simulation:
    n = 4
    cluster = SimCluster(oss_names=["oss0", "oss1"], ost_index=np.arange(n),
                         ost_oss=np.array([0, 0, 1, 1]),
                         capacity_bytes=np.full(n, float(OST_BYTES)),
                         used_bytes=np.zeros(n), bandwidth_bytes_s=np.full(n, 100.0 * MIB))
    sc = load_scenario("paper-32ost")           # a static world: no events, no background
    return Simulation(sc, cluster, make_policy("round_robin"), [],
                      make_network(sc.network, **sc.network_params))


def test_view_load_fields_are_the_stores_in_a_static_world():
    sim = _simulation()
    sim.oss_bytes_s[:] = [200.0 * MIB, 0.0]
    sim.oss_in_bytes_s[:] = [150.0 * MIB, 0.0]
    sim.mds.readings.step(np.zeros(4), np.array([5.0 * MIB, 0.0, 0.0, 0.0]),
                          np.array([1, 0, 0, 0]), np.full(4, 100.0 * MIB), np.full(4, 100.0 * MIB),
                          None)
    sim._refresh_stats(5.0)
    store = sim.mds.store.snapshot
    ruled = store.ost_by_index()
    for ost in sim.view.osts:
        assert ost.write_latency_s == ruled[ost.index].write_latency_s
        assert ost.write_bytes_per_s == ruled[ost.index].write_bytes_per_s
    assert sim.view.osts[0].write_latency_s is not None          # RPCs ran on OST 0 only
    assert all(o.write_latency_s is None for o in sim.view.osts[1:])
    assert sim.view.osts[0].write_bytes_per_s == pytest.approx(1.0 * MIB)   # 5 MiB over 5 s
    for name, oss in sim.view.osses.items():
        mine = store.osses[name]
        assert (oss.cpu_percent, oss.mem_percent, oss.lnet_load) == \
            (mine.cpu_percent, mine.mem_percent, mine.lnet_load)
    assert sim.view.osses["oss0"].lnet_load > 0 == sim.view.osses["oss1"].lnet_load


def test_a_sample_the_store_never_received_never_reaches_the_view(monkeypatch):
    sim = _simulation()
    monkeypatch.setattr(StateStore, "apply", lambda *a, **k: None)    # the samples are lost
    sim._refresh_stats(5.0)
    assert all(o.write_latency_s is None and o.write_bytes_per_s is None for o in sim.view.osts)
    assert all(s.cpu_percent == 0.0 and s.lnet_load == 0.0 for s in sim.view.osses.values())
