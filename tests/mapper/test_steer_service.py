"""The mapper's steering loop against real agents on 127.0.0.1: actions reach the
right OSS's files, a dry run touches nothing, a dead agent is reported and nothing else
changes, stop releases everything; the ``[steer]`` table's errors name the key."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from lustre_alloc.collectors.lustre_params import FileParams, degraded_param
from lustre_alloc.collectors.steer_agent import SteerAgent
from lustre_alloc.collectors.steer_socket import AgentServer
from lustre_alloc.common.errors import ConfigError
from lustre_alloc.common.fsname import target_name
from lustre_alloc.mapper.service.config import load_config
from lustre_alloc.mapper.state.cluster_state import make_uniform_cluster
from lustre_alloc.mapper.steer.agents import SteerConfig
from lustre_alloc.mapper.steer.service import SteerLoop
from lustre_alloc.livestack.stack import free_port

FS = "demofs"
FAST, SLOW = 700e6, 14e6


class Store:
    def __init__(self):
        self.snap = make_uniform_cluster(4, 2, 1 << 30)      # OST 2k, 2k+1 on oss{k}
        self.t = 0.0
        self.slow: set[int] = set()

    def current(self):
        self.t += 5
        for o in self.snap.osts:
            v = SLOW if o.index in self.slow else FAST
            o.sample_time_s, o.write_bytes_per_s, o.write_latency_s = self.t, v, (1 << 20) / v
        self.snap.time_s = self.t
        return self.snap


class Fs:
    key = ""
    fsname = FS

    def __init__(self):
        self.store = Store()


def oss_root(tmp: Path, oss: int) -> Path:
    root = tmp / f"oss{oss}"
    for i in (2 * oss, 2 * oss + 1):
        d = root / "sys/fs/lustre/obdfilter" / target_name(FS, i)
        d.mkdir(parents=True)
        (d / "degraded").write_text("0\n")
    return root


@pytest.fixture
def agents(tmp_path):
    servers = {}
    for k in range(4):
        root = oss_root(tmp_path, k)
        names = [target_name(FS, 2 * k), target_name(FS, 2 * k + 1)]
        servers[f"oss{k}"] = AgentServer(SteerAgent("oss", lambda n=names: n, FileParams(root)),
                                         "tcp://127.0.0.1:*").start()
    yield servers
    for s in servers.values():
        s.stop()


def degraded(tmp_path: Path, ost: int) -> str:
    return FileParams(tmp_path / f"oss{ost // 2}").get(degraded_param(target_name(FS, ost)))


def loop_for(agents, mode="on", **extra) -> tuple[SteerLoop, Fs, CollectorRegistry]:
    table = {"mode": mode, "rate_smoothing": 1.0, "min_dwell_s": 0, "confirm_s": 0, "action_lease_s": 30,
             "max_fraction": 0.25, "interval_s": 1,
             "oss_agents": {n: s.endpoint for n, s in agents.items()}, **extra}
    fs, reg = Fs(), CollectorRegistry()
    return SteerLoop(SteerConfig.from_table(table), [fs], threading.Lock(), registry=reg), fs, reg


def test_actions_reach_the_serving_osss_files_and_stop_releases_them(tmp_path, agents):
    loop, fs, reg = loop_for(agents)
    fs.store.slow = {3}                               # OST 3 is on oss1
    loop.evaluate_once()
    assert degraded(tmp_path, 3) == "1"
    assert [degraded(tmp_path, i) for i in range(8) if i != 3] == ["0"] * 7
    assert reg.get_sample_value("lustre_alloc_mapper_steer_actions_total", {
        "fsname": FS, "kind": "degraded", "action": "apply", "mode": "on"}) == 1
    assert reg.get_sample_value("lustre_alloc_mapper_steered_osts",
                                {"fsname": FS, "kind": "degraded"}) == 1
    assert loop.status() == {FS: [pytest.approx(loop.controllers[""].active[3].as_dict())]}
    fs.store.slow = set()                             # recovered: returned
    loop.evaluate_once()
    assert degraded(tmp_path, 3) == "0"
    fs.store.slow = {3}
    loop.evaluate_once()
    assert degraded(tmp_path, 3) == "1"
    loop.stop()
    assert degraded(tmp_path, 3) == "0"


def test_dry_run_logs_and_counts_but_touches_nothing(tmp_path, agents, caplog):
    loop, fs, reg = loop_for(agents, mode="dry_run")
    fs.store.slow = {5}
    with caplog.at_level("INFO", logger="lustre_alloc.mapper.steer.service"):
        loop.evaluate_once()
    assert [degraded(tmp_path, i) for i in range(8)] == ["0"] * 8
    assert reg.get_sample_value("lustre_alloc_mapper_steer_actions_total", {
        "fsname": FS, "kind": "degraded", "action": "apply", "mode": "dry_run"}) == 1
    (rec,) = [r for r in caplog.records if getattr(r, "event", "") == "steer_action"]
    assert rec.ost == 5 and rec.dry_run and "slow" in rec.reason and rec.until_s > 0
    loop.stop()


def test_a_dead_agent_is_reported_and_the_others_still_act(tmp_path, agents):
    agents["oss1"].stop()
    loop, fs, reg = loop_for(agents, agent_timeout_s=0.3)
    fs.store.slow = {3, 6}                    # oss1 (dead) and oss3
    loop.evaluate_once()
    assert degraded(tmp_path, 6) == "1" and degraded(tmp_path, 3) == "0"
    assert reg.get_sample_value("lustre_alloc_mapper_steer_agent_errors_total",
                                {"fsname": FS}) == 1
    loop.stop()


def test_steer_table_in_the_mapper_config(tmp_path):
    path = tmp_path / "mapper.toml"
    path.write_text('[development]\nstatic_cluster = "2x2"\n\n[steer]\nmode = "dry_run"\n'
                    'slow_factor = 4.0\n')
    cfg = load_config(str(path), {})
    steer = cfg.steer_config()
    assert steer.params.mode == "dry_run" and steer.params.slow_factor == 4.0
    path.write_text('[mapper]\n\n[steer]\nmode = "on"\nbogus = 1\n')
    with pytest.raises(ConfigError, match="bogus"):
        load_config(str(path), {})
    path.write_text('[mapper]\n\n[steer]\nmode = "on"\n')
    with pytest.raises(ConfigError, match="steer.oss_agents"):
        load_config(str(path), {})
    assert load_config(None, {}).steer_config().params.mode == "off"      # off by default
    with pytest.raises(ConfigError, match="qos_steer is the simulator"):
        load_config(None, {"policy": "qos_steer"})


def test_drain_goes_to_every_mds_agent_and_the_emulated_lod_honours_it(tmp_path):
    """``action = drain``: each MDS's agent sets ``max_create_count=0`` on its OSP device of
    the OST; the emulated MDS's allocator then sees NOPRECREATE and places nothing there."""
    from lustre_alloc.collectors.lustre_params import max_create_count_param
    from lustre_alloc.livestack.emulator import EmulatedCluster
    from lustre_alloc.mapper.policies.lustre_qos import LustreQos
    from lustre_alloc.mapper.policies.placement import CreateRequest
    from lustre_alloc.mapper.state.cluster_state import OstFlag
    from tests.live.conftest import small_cluster
    emu = EmulatedCluster(small_cluster(), tmp_path / "servers")
    files = FileParams(emu.mds_root)
    osp = [f"{o.name}-osc-MDT0000" for o in emu.osts]
    server = AgentServer(SteerAgent("mds", lambda: osp, files), "tcp://127.0.0.1:*").start()
    table = {"mode": "on", "action": "drain", "rate_smoothing": 1.0, "max_fraction": 0.25,
             "confirm_s": 0,
             "mds_agents": {"mds0": server.endpoint}}
    fs = Fs()
    loop = SteerLoop(SteerConfig.from_table(table), [fs], threading.Lock(),
                     registry=CollectorRegistry())
    try:
        fs.store.slow = {2}
        loop.evaluate_once()
        param = max_create_count_param(f"{target_name(FS, 2)}-osc-MDT0000")
        assert files.get(param) == "0"
        emu.flush()                                   # the MDS's next statfs
        snap = emu.snapshot()
        assert snap.ost_by_index()[2].flags & OstFlag.NOPRECREATE
        qos = LustreQos(seed=3)
        assert 2 not in {qos.allocate(snap, CreateRequest(jobid="a", stripe_count=4)).osts[k]
                         for _ in range(50) for k in range(4)}
    finally:
        loop.stop()
        server.stop()
    assert files.get(param) == "20000"
    emu.flush()
    assert not emu.snapshot().ost_by_index()[2].flags & OstFlag.NOPRECREATE


def test_drain_reaches_every_mdt_of_every_mds_even_when_one_mds_does_not_answer(tmp_path):
    """DNE over three MDS hosts: two answer (one serving two MDTs), one is down. Both live
    agents drain their OSP devices of the OST; the dead one is counted as an error."""
    from lustre_alloc.collectors.lustre_params import max_create_count_param
    osps = {"mds0": ["MDT0000", "MDT0001"], "mds1": ["MDT0002"]}
    ost = target_name(FS, 2)
    servers, params = [], {}
    for host, mdts in osps.items():
        root = tmp_path / host
        devices = [f"{target_name(FS, i)}-osc-{m}" for i in range(4) for m in mdts]
        for d in devices:
            base = root / "sys/fs/lustre/osp" / d
            base.mkdir(parents=True)
            (base / "max_create_count").write_text("20000\n")
        files = FileParams(root)
        servers.append(AgentServer(SteerAgent("mds", lambda d=devices: d, files),
                                   "tcp://127.0.0.1:*").start())
        params[host] = (files, [max_create_count_param(f"{ost}-osc-{m}") for m in mdts])
    dead = f"tcp://127.0.0.1:{free_port()}"
    table = {"mode": "on", "action": "drain", "rate_smoothing": 1.0, "max_fraction": 0.25,
             "confirm_s": 0, "agent_timeout_s": 0.3,
             "mds_agents": {"mds-dead": dead, "mds0": servers[0].endpoint,
                            "mds1": servers[1].endpoint}}
    fs = Fs()
    reg = CollectorRegistry()
    loop = SteerLoop(SteerConfig.from_table(table), [fs], threading.Lock(), registry=reg)
    try:
        fs.store.slow = {2}
        loop.evaluate_once()
        for files, names in params.values():
            assert [files.get(n) for n in names] == ["0"] * len(names)
        assert reg.get_sample_value("lustre_alloc_mapper_steer_agent_errors_total",
                                    {"fsname": FS}) == 1
    finally:
        loop.stop()
        for server in servers:
            server.stop()
    for files, names in params.values():
        assert [files.get(n) for n in names] == ["20000"] * len(names)
