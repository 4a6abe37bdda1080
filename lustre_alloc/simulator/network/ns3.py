"""Packet-level LNet model with ns-3 (PyPI ``ns3`` 3.44, bindings through cppyy).

Paul et al. 2017, Section IV-A1: "all the network components in the simulator are
modeled using NS-3". Each call builds the topology of :mod:`lustre_alloc.simulator.network.topology`
(only the nodes the transfers use, plus the core switch and the MDS) from point-to-point
links, runs one TCP connection per (transfer, OSS) for a warm-up and a measurement
window, and reads each connection's goodput at its receiver's ``PacketSink``.

The core "switch" is an ns-3 node forwarding IP (global routing); its egress queues
use ns-3's default queue discipline on an address-assigned device (FqCoDel), i.e. a
switch with per-flow fair queueing. TCP segments are ``mtu - 52`` bytes (IPv4 and TCP
headers with timestamps) and socket buffers are 4 MiB so that no connection is
window-limited at 10 Gbit/s and microsecond delays.

Disk bandwidth joins in :class:`Ns3Network`: OST shares are max-min over the OSTs with
each transfer capped by its measured network rate, and a transfer's sending
applications are rate-limited to its disk share (an OST cannot absorb faster), so
disk-bound transfers leave the links to the others; the two are iterated
``iterations`` times.

The bindings print "cling" warnings on stderr when they load; :func:`import_ns3`
silences them at the file-descriptor level.
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np


from lustre_alloc.simulator.network.maxmin import max_min_levels
from lustre_alloc.simulator.network.topology import ClientMap, LnetSpec, NetworkSpecError, subflows
from lustre_alloc.simulator.network.transfers import Storage, TransferSet

_NS = None


@contextlib.contextmanager
def _quiet_stderr():
    """Send file descriptor 2 to /dev/null for the duration (C++ writes bypass sys.stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def import_ns3():
    """The ``ns`` namespace of the ns-3 bindings (imported once, ~8 s, quietly)."""
    global _NS
    if _NS is None:
        with _quiet_stderr():
            from ns import ns
            ns.PacketSink  # first template instantiations also warn
        _NS = ns
    return _NS


@dataclass(frozen=True)
class Connection:
    """One TCP connection of the packet model.

    Attributes:
        client: client node index.
        oss: OSS index.
        write: True: client -> OSS; False: OSS -> client.
        limit_bytes_s: application rate limit (``inf``: a greedy bulk sender).
    """
    client: int
    oss: int
    write: bool
    limit_bytes_s: float = float("inf")


def _rate(bytes_s: float) -> str:
    return f"{bytes_s * 8:.0f}bps"


def measure(spec: LnetSpec, connections: Sequence[Connection], *, warmup_ms: float = 5.0,
            window_ms: float = 30.0) -> np.ndarray:
    """Goodput of each connection, bytes/s, over ``window_ms`` after ``warmup_ms``.

    The defaults (5 ms, 30 ms) are what TCP with FqCoDel queues needs to settle at
    10 Gbit/s: with a 10 ms window a connection crossing two shared links still had
    13% less than its max-min share, with 30 ms 1.5%, with 50 ms none.

    Builds the star topology (clients [-> LNet routers] -> core <- OSSes, core <- MDS)
    with only the clients/OSSes the connections use. Shape (len(connections),).
    """
    ns = import_ns3()
    with _quiet_stderr():
        return _measure(ns, spec, connections, warmup_ms, window_ms)


def _measure(ns, spec: LnetSpec, conns: Sequence[Connection], warmup_ms: float,
             window_ms: float) -> np.ndarray:
    if not conns:
        return np.zeros(0)
    mss = spec.mtu_bytes - 52
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(mss))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(4 << 20))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(4 << 20))
    clients = sorted({c.client for c in conns})
    osses = sorted({c.oss for c in conns})
    routers = sorted({c % spec.routers for c in clients}) if spec.routers else []
    core = ns.NodeContainer()
    core.Create(1)
    mds = ns.NodeContainer()
    mds.Create(1)
    cnodes, onodes, rnodes = {}, {}, {}
    everything = ns.NodeContainer()
    everything.Add(core)
    everything.Add(mds)
    for group, keys in ((cnodes, clients), (onodes, osses), (rnodes, routers)):
        for k in keys:
            n = ns.NodeContainer()
            n.Create(1)
            group[k] = n
            everything.Add(n)
    ns.InternetStackHelper().Install(everything)
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    delay = ns.StringValue(f"{spec.link_delay_us:g}us")

    def link(a, b, link_type: str):
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.StringValue(_rate(spec.link_bytes_s(link_type))))
        p2p.SetDeviceAttribute("Mtu", ns.UintegerValue(spec.mtu_bytes))
        p2p.SetChannelAttribute("Delay", delay)
        pair = ns.NodeContainer()
        pair.Add(a)
        pair.Add(b)
        ifs = addr.Assign(p2p.Install(pair))
        addr.NewNetwork()
        return ifs

    client_ip, oss_ip = {}, {}
    for r, n in rnodes.items():
        link(n.Get(0), core.Get(0), "router")
    for c, n in cnodes.items():
        up = rnodes[c % spec.routers] if spec.routers else core
        client_ip[c] = link(n.Get(0), up.Get(0), "client").GetAddress(0)
    for s, n in onodes.items():
        oss_ip[s] = link(n.Get(0), core.Get(0), "oss").GetAddress(0)
    link(mds.Get(0), core.Get(0), "mds")
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    sinks = []
    for i, c in enumerate(conns):
        port = 20000 + i
        src, dst = (cnodes[c.client], onodes[c.oss]) if c.write else (onodes[c.oss], cnodes[c.client])
        dst_ip = oss_ip[c.oss] if c.write else client_ip[c.client]
        sink = ns.PacketSinkHelper("ns3::TcpSocketFactory",
                                   ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
        apps = sink.Install(dst.Get(0))
        apps.Start(ns.Seconds(0.0))
        sinks.append(apps.Get(0).GetObject[ns.PacketSink]())
        remote = ns.InetSocketAddress(dst_ip, port).ConvertTo()
        if np.isfinite(c.limit_bytes_s):
            app = ns.OnOffHelper("ns3::TcpSocketFactory", remote)
            app.SetAttribute("OnTime", ns.StringValue("ns3::ConstantRandomVariable[Constant=1000]"))
            app.SetAttribute("OffTime", ns.StringValue("ns3::ConstantRandomVariable[Constant=0]"))
            app.SetAttribute("DataRate", ns.StringValue(_rate(max(c.limit_bytes_s, 1000.0))))
            app.SetAttribute("PacketSize", ns.UintegerValue(mss))
        else:
            app = ns.BulkSendHelper("ns3::TcpSocketFactory", remote)
            app.SetAttribute("MaxBytes", ns.UintegerValue(0))
            app.SetAttribute("SendSize", ns.UintegerValue(mss))
        sapps = app.Install(src.Get(0))
        # Staggered starts (10 us apart): connections opening in the same nanosecond
        # synchronise their slow starts.
        sapps.Start(ns.Seconds(1e-5 * i))
    ns.Simulator.Stop(ns.Seconds(warmup_ms / 1e3))
    ns.Simulator.Run()
    rx0 = np.array([s.GetTotalRx() for s in sinks], dtype=float)
    ns.Simulator.Stop(ns.Seconds(window_ms / 1e3))
    ns.Simulator.Run()
    rx1 = np.array([s.GetTotalRx() for s in sinks], dtype=float)
    ns.Simulator.Destroy()
    return (rx1 - rx0) / (window_ms / 1e3)


class Ns3Network:
    """The ``ns3`` network model: packet-level windows, joint with OST disk shares.

    Per call (each change of the transfer set): (1) disk levels max-min over the OSTs;
    (2) ns-3 runs every (transfer, OSS) connection rate-limited to the transfer's disk
    share times its byte fraction; a connection reaching at least ``saturation`` of its
    limit is not network-bound; a transfer's network rate is the minimum over its
    connections of goodput / fraction; (3) disk levels again with those network rates
    as caps; repeat (2)-(3) ``iterations`` times. Results are cached per transfer set.
    """
    saturation = 0.97

    def __init__(self, spec: LnetSpec | None = None, *, window_ms: float = 30.0,
                 warmup_ms: float = 5.0, iterations: int = 2):
        self.name = "ns3"
        self.spec = spec or LnetSpec()
        self.window_ms = window_ms
        self.warmup_ms = warmup_ms
        self.iterations = iterations
        self._clients = ClientMap(self.spec)
        self._cache: dict[tuple, np.ndarray] = {}
        self.windows_run = 0

    @classmethod
    def from_params(cls, params: dict[str, float]) -> "Ns3Network":
        """From ``[network]`` keys: :class:`LnetSpec`'s plus ``window_ms``, ``warmup_ms``,
        ``iterations``. Raises ValueError naming a bad key (ns-3 is not imported)."""
        p = dict(params)
        kw = {k: p.pop(k) for k in ("window_ms", "warmup_ms", "iterations") if k in p}
        try:
            spec = LnetSpec.from_params(p)
        except NetworkSpecError as e:
            raise ValueError(str(e)) from None
        for k in ("window_ms", "warmup_ms"):
            if k in kw and kw[k] <= 0:
                raise ValueError(f"{k}: must be > 0, got {kw[k]}")
        if "iterations" in kw:
            kw["iterations"] = int(kw["iterations"])
            if kw["iterations"] < 1:
                raise ValueError(f"iterations: must be >= 1, got {kw['iterations']}")
        return cls(spec, **kw)

    def client_of(self, job: str) -> int:
        return self._clients.assign(job)

    @property
    def oss_link_bytes_s(self) -> float:
        return self.spec.link_bytes_s("oss")

    def rates(self, ts: TransferSet, storage: Storage) -> np.ndarray:
        if ts.flow_count == 0:
            return np.zeros(0)
        sub = subflows(ts.entry_flow, ts.entry_ost, ts.entry_frac, ts.flow_count,
                       storage.ost_oss, storage.oss_count)
        key = (tuple(np.round(ts.entry_frac, 9)), tuple(ts.entry_flow), tuple(ts.entry_ost),
               tuple(ts.flow_write), tuple(ts.flow_client))
        hit = self._cache.get(key)
        if hit is not None:
            return hit.copy()
        w = sub.weight
        disk_coef = ts.entry_frac * w[ts.entry_flow]
        net_cap = np.full(ts.flow_count, np.inf)
        for _ in range(self.iterations):
            disk = max_min_levels(ts.entry_flow, ts.entry_ost, disk_coef, ts.flow_count,
                                  storage.ost_bandwidth_bytes_s, net_cap / w) * w
            conns = [Connection(int(ts.flow_client[f]), int(o), bool(ts.flow_write[f]),
                                float(disk[f] * c))
                     for f, o, c in zip(sub.flow, sub.oss, sub.coef)]
            good = measure(self.spec, conns, warmup_ms=self.warmup_ms, window_ms=self.window_ms)
            self.windows_run += 1
            limit = np.array([c.limit_bytes_s for c in conns])
            bound = good < self.saturation * limit
            per = np.where(bound, good / sub.coef, np.inf)
            net_cap = np.full(ts.flow_count, np.inf)
            np.minimum.at(net_cap, sub.flow, per)
        rates = np.minimum(disk, net_cap)
        self._cache[key] = rates
        return rates.copy()
