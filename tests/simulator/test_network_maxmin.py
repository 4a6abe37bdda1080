"""Max-min fair sharing (progressive filling) and the flow-level LNet model, hand-computed."""
import numpy as np
import pytest

from lustre_alloc.simulator.network.calibration import Calibration
from lustre_alloc.simulator.network.maxmin import max_min_levels
from lustre_alloc.simulator.network.topology import ClientMap, LnetSpec, NetworkSpecError
from lustre_alloc.simulator.network.model import MaxMinNetwork, Storage, TransferSet, make_network

GBPS = 1e9 / 8


def solve(flows_resources, capacity, flow_count, flow_cap=None):
    f, r, c = zip(*flows_resources)
    return max_min_levels(np.array(f), np.array(r), np.array(c, dtype=float), flow_count,
                          np.array(capacity, dtype=float), flow_cap)


def test_one_link_is_split_equally():
    x = solve([(0, 0, 1), (1, 0, 1), (2, 0, 1)], [9.0], 3)
    assert x == pytest.approx([3, 3, 3])


def test_bottleneck_elsewhere_leaves_the_rest_to_the_others():
    # link0 (10) carries f0, f1; link1 (4) carries f1, f2: link1 saturates at 2, then
    # f0 takes what f1 leaves on link0: 8.
    x = solve([(0, 0, 1), (1, 0, 1), (1, 1, 1), (2, 1, 1)], [10.0, 4.0], 3)
    assert x == pytest.approx([8, 2, 2])


def test_parking_lot():
    # Three links of 1 in a row; the long flow crosses all, each short flow one link.
    x = solve([(0, 0, 1), (0, 1, 1), (0, 2, 1), (1, 0, 1), (2, 1, 1), (3, 2, 1)], [1, 1, 1], 4)
    assert x == pytest.approx([0.5, 0.5, 0.5, 0.5])


def test_coefficients_weigh_a_flows_use_of_a_resource():
    # f0 puts 2 units on the link per unit of level: 2x + x = 6 -> x = 2.
    x = solve([(0, 0, 2), (1, 0, 1)], [6.0], 2)
    assert x == pytest.approx([2, 2])


def test_flow_cap_freezes_a_flow_and_frees_capacity():
    x = solve([(0, 0, 1), (1, 0, 1)], [10.0], 2, flow_cap=np.array([1.0, np.inf]))
    assert x == pytest.approx([1, 9])


def test_flow_without_resources_is_unbounded():
    x = max_min_levels(np.array([0]), np.array([0]), np.array([1.0]), 2, np.array([5.0]))
    assert x[0] == pytest.approx(5) and np.isinf(x[1])


def test_allocation_is_feasible_and_every_flow_has_a_saturated_bottleneck():
    rng = np.random.default_rng(3)
    F, R = 40, 12
    ef = np.repeat(np.arange(F), 3)
    er = rng.integers(0, R, size=3 * F)
    ec = rng.uniform(0.1, 1.0, size=3 * F)
    cap = rng.uniform(1, 10, size=R)
    x = max_min_levels(ef, er, ec, F, cap)
    load = np.bincount(er, ec * x[ef], minlength=R)
    assert (load <= cap * (1 + 1e-9)).all()
    saturated = load >= cap * (1 - 1e-9)
    for f in range(F):
        mine = er[ef == f]
        # Max-min: f crosses a saturated resource on which no flow has a larger level.
        ok = [r for r in mine if saturated[r] and x[ef[er == r]].max() <= x[f] * (1 + 1e-9)]
        assert ok, f"flow {f} has no bottleneck"


UNIT = Calibration(tables={(1500, t): (np.array([1.0, 64.0]), np.array([1.0, 1.0]))
                           for t in ("client", "router", "oss")}, meta={})


def flow_model(**kw):
    return MaxMinNetwork(LnetSpec(**kw), UNIT)


def storage(ost_oss, bw_gbps):
    ost_oss = np.asarray(ost_oss)
    return Storage(ost_oss=ost_oss, oss_count=int(ost_oss.max()) + 1,
                   ost_bandwidth_bytes_s=np.full(len(ost_oss), bw_gbps * GBPS))


def tset(entries, write, client):
    f, o, fr = (np.array(v) for v in zip(*entries))
    return TransferSet(f, o, fr.astype(float), len(write), np.array(write), np.array(client))


def test_striped_transfer_shares_per_connection_like_tcp():
    # A (client 0) striped over OSS0 and OSS1, B (client 1) on OSS0 only, disks fast:
    # OSS0's downlink is shared by A's and B's connections, 5 Gbit/s each; A's second
    # connection carries as much on OSS1, so A moves 10 Gbit/s, B 5.
    st = storage([0, 1], 100)
    ts = tset([(0, 0, 0.5), (0, 1, 0.5), (1, 0, 1.0)], [True, True], [0, 1])
    rates = flow_model(client_nodes=2).rates(ts, st)
    assert rates / GBPS == pytest.approx([10, 5])


def test_writes_and_reads_use_opposite_link_directions():
    # A write and a read through the same client and OSS: full duplex, 10 each.
    st = storage([0], 100)
    ts = tset([(0, 0, 1.0), (1, 0, 1.0)], [True, False], [0, 0])
    assert flow_model(client_nodes=1).rates(ts, st) / GBPS == pytest.approx([10, 10])


def test_io_time_is_the_slower_of_disk_share_and_network_path():
    # Two writes from two clients on one OST of 4 Gbit/s: the disk (2 each) limits;
    # a third write on another OST of that OSS gets the OSS link's rest: 10 - 4 = 6.
    st = storage([0, 0], 4)
    st = Storage(st.ost_oss, 1, np.array([4 * GBPS, 100 * GBPS]))
    ts = tset([(0, 0, 1.0), (1, 0, 1.0), (2, 1, 1.0)], [True, True, True], [0, 1, 2])
    rates = flow_model(client_nodes=3).rates(ts, st)
    assert rates / GBPS == pytest.approx([2, 2, 6])


def test_lnet_router_link_is_shared_by_the_clients_behind_it():
    # Two routers of 4 Gbit/s; clients 0, 2 behind router 0, client 1 behind router 1.
    st = storage([0, 1, 2], 100)
    ts = tset([(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0)], [True] * 3, [0, 2, 1])
    rates = flow_model(client_nodes=3, routers=2, router_link_gbit_s=4).rates(ts, st)
    assert rates / GBPS == pytest.approx([2, 2, 4])


def test_link_capacity_follows_the_calibrated_efficiency():
    cal = Calibration(tables={(1500, "oss"): (np.array([1.0, 4.0]), np.array([0.9, 0.8]))}, meta={})
    model = MaxMinNetwork(LnetSpec(client_nodes=4), cal)
    st = storage([0], 100)
    ts = tset([(i, 0, 1.0) for i in range(4)], [True] * 4, [0, 1, 2, 3])
    assert model.rates(ts, st).sum() / GBPS == pytest.approx(10 * 0.8)


def test_client_map_rotates_a_jobs_transfers_over_its_nodes():
    cm = ClientMap(LnetSpec(client_nodes=16, nodes_per_job=4))
    nodes = [cm.assign("ior.1") for _ in range(8)]
    assert len(set(nodes)) == 4 and nodes[:4] == nodes[4:]
    assert cm.assign("ior.1#3") in nodes   # replays of an application share its nodes


def test_unknown_network_parameter_is_an_error_naming_it():
    with pytest.raises(ValueError, match="link_gbits"):
        make_network("flow", link_gbits=3)
    with pytest.raises(NetworkSpecError, match="routers"):
        LnetSpec.from_params({"routers": -1})
