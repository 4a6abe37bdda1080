"""The simulator, the live stack's emulated MDS and the mapper service apply the same
Lustre rules to the same state (each rule defined once).

The same fills are driven through the three paths a rule can take:

* simulator: :meth:`lustre_alloc.simulator.mds_view.MdsView.refresh_statfs` (the MDS's statfs view);
* live stack: :meth:`lustre_alloc.livestack.emulator.EmulatedCluster.snapshot` (the emulated MDS);
* service: :meth:`lustre_alloc.mapper.state.state_store.StateStore.apply` (the collectors' samples).

For every step the OSTs' statfs flags (ENOSPC watermark with hysteresis, ENOINO), their
usability, the stale servers and the pool members must be identical.
"""
from __future__ import annotations

import numpy as np

from lustre_alloc.livestack.emulator import EmulatedCluster
from lustre_alloc.mapper.policies.gate import GatedPolicy
from lustre_alloc.mapper.policies.registry import make_policy
from lustre_alloc.mapper.state.cluster_state import OstFlag
from lustre_alloc.mapper.state.ost_health import (ENOINO_FILES, enospc_watermarks_kib, is_usable,
                                     pool_members, stale_servers, unusable_reason)
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.simulator.cluster import KIB, MIB, SimCluster
from lustre_alloc.simulator.engine import Simulation
from lustre_alloc.simulator.network.model import make_network
from lustre_alloc.simulator.scenario import load_scenario

GIB = 1 << 30
OST_BYTES = 4 * GIB              # low watermark 4 MiB (4 GiB >> 20 KiB), high 9 MiB


def _cluster() -> SimCluster:
    n = 4
    return SimCluster(oss_names=["oss0", "oss1"], ost_index=np.arange(n),
                      ost_oss=np.array([0, 0, 1, 1]),
                      capacity_bytes=np.full(n, float(OST_BYTES)),
                      used_bytes=np.zeros(n), bandwidth_bytes_s=np.full(n, 100.0 * MIB))


def _simulation(cluster: SimCluster) -> Simulation:
    sc = load_scenario("paper-32ost")
    return Simulation(sc, cluster, make_policy("round_robin"), [],
                      make_network(sc.network, **sc.network_params))


def _feed(store: StateStore, cluster: SimCluster, avail_kib: list[int], files_free: list[int],
          t: float, oss_times: dict[str, float] | None = None) -> None:
    """One sample per OSS, as the collectors publish it (docs/protocol.md)."""
    for s, host in enumerate(cluster.oss_names):
        targets = {}
        for p in np.flatnonzero(cluster.ost_oss == s):
            total = int(cluster.capacity_bytes[p] // KIB)
            targets[f"OST{p:04x}"] = {"kind": "ost", "index": int(cluster.ost_index[p]),
                                      "available": True,
                                      "values": {"kbytes_total": total,
                                                 "kbytes_free": avail_kib[p],
                                                 "kbytes_avail": avail_kib[p],
                                                 "files_free": files_free[p]}}
        when = (oss_times or {}).get(host, t)
        store.apply("oss", host, when, 5.0, {"values": {"cpu_percent": 1.0}}, targets)


def test_watermark_hysteresis_and_usability_agree_on_every_path(tmp_path):
    cluster = _cluster()
    sim = _simulation(cluster)
    emu = EmulatedCluster(cluster, tmp_path)
    store = StateStore()
    total_kib = OST_BYTES // KIB
    low, high = enospc_watermarks_kib(total_kib)
    assert (low, high) == (4 * 1024, 9 * 1024)
    # Free KiB per step: each OST walks down through the low watermark, back up between
    # the watermarks (stays full: hysteresis) and above the high one (clears); the OSTs
    # are out of phase so every combination meets the others.
    walk = [high + 5000, low + 1, low, low - 1, 1, low + 10, high, high + 1, low - 1, 0,
            high + 1]
    seen_flags = set()
    for step in range(len(walk) + 3):
        avail = [walk[(step + k) % len(walk)] for k in range(cluster.ost_count)]
        used = cluster.capacity_bytes - np.array(avail, dtype=float) * KIB
        sim.used[:] = used
        sim.refresh_statfs(float(step))
        for o, u in zip(emu.osts, used):
            o.used_bytes = float(u)
        emu_view = emu.snapshot()
        _feed(store, cluster, avail, [1 << 24] * cluster.ost_count, float(step))
        svc_view = store.current(float(step))
        for a, b, c in zip(sim.view.osts, emu_view.osts, svc_view.osts):
            assert a.index == b.index == c.index
            assert a.kbytes_avail == b.kbytes_avail == c.kbytes_avail, step
            assert a.flags == b.flags == c.flags, (step, a.index, a.flags, b.flags, c.flags)
            assert is_usable(a) == is_usable(b) == is_usable(c)
            seen_flags.add(a.flags)
    assert seen_flags == {OstFlag.NONE, OstFlag.ENOSPC}


def test_enoino_agrees_between_simulator_view_and_service():
    """The simulator does not model inodes, so its view keeps the default ``files_free``;
    set the same inode counts on both sides and the rule answers the same."""
    cluster = _cluster()
    sim = _simulation(cluster)
    store = StateStore()
    files = [ENOINO_FILES - 1, ENOINO_FILES, 0, 1 << 20]
    precreated = [0, 0, 5, 0]
    for ost, f, pre in zip(sim.view.osts, files, precreated):
        ost.files_free = f
        ost.files_precreated = pre
    sim.refresh_statfs(0.0)
    _feed(store, cluster, [OST_BYTES // KIB] * 4, files, 0.0)
    svc = store.current(0.0)
    for ost, pre in zip(svc.osts, precreated):
        ost.files_precreated = pre
    assert [o.flags for o in sim.view.osts] == [o.flags for o in svc.osts] == \
        [OstFlag.ENOINO, OstFlag.NONE, OstFlag.ENOINO, OstFlag.NONE]
    # ENOINO with no precreated object left is ENOSPC to LOD; with some left it is usable.
    assert [unusable_reason(o) for o in sim.view.osts] == \
        [unusable_reason(o) for o in svc.osts] == ["ENOSPC", None, None, None]


def test_stale_servers_agree_between_gate_function_and_store():
    """The simulator's gate asks :func:`stale_servers` on its view; the service asks the
    store's cached answer. Same sample times -> same stale OSSes at every moment."""
    cluster = _cluster()
    sim = _simulation(cluster)
    store = StateStore()
    sim.refresh_statfs(0.0)
    sim._refresh_stats(100.0)
    sim.view.osses["oss1"].sample_time_s = 90.0
    for ost in sim.view.osts:
        if ost.oss == "oss1":
            ost.sample_time_s = 90.0
    _feed(store, cluster, [OST_BYTES // KIB] * 4, [1 << 24] * 4, 100.0,
          oss_times={"oss1": 90.0})
    gate_sim = GatedPolicy(make_policy("round_robin"), make_policy("round_robin"),
                           max_sample_age_s=10.0)
    for now in (100.0, 100.5, 105.0, 110.0, 111.0, 120.0):
        sim.view.time_s = now
        svc = store.current(now)
        assert store.stale_servers(svc, 10.0) == stale_servers(sim.view, 10.0), now
        assert gate_sim.stale_source(sim.view, 10.0) == stale_servers(sim.view, 10.0)
    assert stale_servers(sim.view, 10.0) == ["oss0", "oss1"]
    sim.view.time_s = 105.0
    assert stale_servers(sim.view, 10.0) == ["oss1"]


def test_pool_membership_agrees():
    cluster = _cluster()
    sim = _simulation(cluster)
    store = StateStore({"fast": [1, 3], "all": []})
    _feed(store, cluster, [OST_BYTES // KIB] * 4, [1 << 24] * 4, 0.0)
    sim.view.pools = {"fast": frozenset({1, 3}), "all": frozenset()}
    svc = store.current(0.0)
    for pool in (None, "fast", "all"):
        assert [o.index for o in pool_members(sim.view, pool)] == \
            [o.index for o in pool_members(svc, pool)]
