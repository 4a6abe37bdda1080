"""The packet-level ns-3 model, and the flow-level model validated against it.

ns-3's bindings take ~8 s to import: one module-scoped fixture imports them once.
"""
import numpy as np
import pytest

from lustre_alloc.simulator.network.calibration import load_calibration
from lustre_alloc.simulator.network.ns3 import Connection, Ns3Network, import_ns3, measure
from lustre_alloc.simulator.network.topology import LnetSpec
from lustre_alloc.simulator.network.model import MaxMinNetwork, Storage, TransferSet
from lustre_alloc.simulator.runner import prepare, run_policy
from lustre_alloc.simulator.scenario import load_scenario

from .conftest import rec, small

GBPS = 1e9 / 8
MIB = 1 << 20
PAYLOAD = (1500 - 52) / (1500 + 2)   # TCP/IPv4+timestamps in a PPP frame


@pytest.fixture(scope="module")
def ns():
    return import_ns3()


@pytest.mark.parametrize("gbit", [10.0, 2.5])
def test_one_tcp_flow_reaches_the_configured_link_rate(ns, gbit):
    spec = LnetSpec(client_nodes=1, client_link_gbit_s=gbit, oss_link_gbit_s=gbit)
    good = measure(spec, [Connection(0, 0, True)])
    assert good[0] == pytest.approx(gbit * GBPS * PAYLOAD, rel=0.02)


def test_rate_limited_sender_gets_its_rate_and_leaves_the_rest(ns):
    good = measure(LnetSpec(client_nodes=2), [Connection(0, 0, True, 0.5 * GBPS),
                                              Connection(1, 0, True)])
    assert good[0] == pytest.approx(0.5 * GBPS, rel=0.02)
    assert good.sum() == pytest.approx(10 * GBPS * PAYLOAD, rel=0.02)


def _tset(entries, write, client):
    f, o, fr = (np.array(v) for v in zip(*entries))
    return TransferSet(f, o, fr.astype(float), len(write), np.array(write), np.array(client))


# (description, spec kwargs, OST->OSS, OST GiB/s, entries (flow, OST, fraction), write, client)
CASES = [
    ("two clients into one OSS, one also to a second OSS", {"client_nodes": 2},
     [0, 1], 10.0, [(0, 0, 1.0), (1, 0, 1.0), (2, 1, 1.0)], [True, True, True], [0, 1, 0]),
    ("striped write over two OSSes against a single-stripe write", {"client_nodes": 2},
     [0, 1], 10.0, [(0, 0, 0.5), (0, 1, 0.5), (1, 0, 1.0)], [True, True], [0, 1]),
    ("reads and writes, one slow OST", {"client_nodes": 3},
     [0, 1, 1], 0.25, [(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0), (3, 1, 1.0)],
     [True, False, True, True], [0, 1, 2, 2]),
    ("three clients behind a 4 Gbit/s LNet router", {"client_nodes": 3, "routers": 2,
                                                     "router_link_gbit_s": 4.0},
     [0, 1, 2], 10.0, [(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0)], [True, True, True], [0, 2, 1]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_flow_model_is_within_10_percent_of_ns3(ns, case):
    _, kw, ost_oss, bw_gib, entries, write, client = case
    ost_oss = np.array(ost_oss)
    st = Storage(ost_oss, int(ost_oss.max()) + 1, np.full(len(ost_oss), bw_gib * (1 << 30)))
    ts = _tset(entries, write, client)
    spec = LnetSpec(**kw)
    flow = MaxMinNetwork(spec, load_calibration()).rates(ts, st)
    packet = Ns3Network(spec).rates(ts, st)
    assert flow == pytest.approx(packet, rel=0.10)


NS3_SCENARIO = small(bw=400) + """
[network]
model = "{model}"
client_nodes = 2
nodes_per_job = 1
iterations = 1
"""


def test_simulation_with_ns3_network_agrees_with_flow_model(ns, make_scenario):
    # Two jobs write 1 GiB files to the 4 OSTs (2 OSSes) of the small cluster, the second
    # starting while the first runs: OSS links (10 Gbit/s) and 400 MiB/s disks share.
    records = [rec(0, "write", "a", "a1", 1024 * MIB, sc=2), rec(0, "write", "b", "b1", 1024 * MIB),
               rec(1, "write", "b", "b2", 1024 * MIB, sc=2), rec(2, "read", "a", "a1", 1024 * MIB)]
    results = {}
    for model in ("ns3", "flow"):
        body = NS3_SCENARIO.replace("{model}", model)
        if model == "flow":
            body = body.replace("iterations = 1\n", "")
        sc = load_scenario(make_scenario(body, records))
        results[model] = run_policy(sc, prepare(sc), "round_robin")
    for app in ("a", "b"):
        assert results["flow"].apps[app].mean_bandwidth_bytes_s == pytest.approx(
            results["ns3"].apps[app].mean_bandwidth_bytes_s, rel=0.10)
