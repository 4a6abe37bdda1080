"""The lustre-alloc stack as real processes on one real Lustre server node (the lustre-vm
guest, docs/lustre-vm.md): the broker, one collector per role reading Lustre through
``lctl`` (an OSS's OSTs; the MDS's MDT and OSP devices), and the mapper subscribed to the
broker, on loopback ports. Used by the real-Lustre tier (tests/lustre) and
bench/lustre_vm_placement.py.
"""
from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from lustre_alloc.livestack.stack import (LiveStackError, command, free_ports, read_metrics, spawn,
                             terminate_all)


@dataclass
class RealLustreStack:
    """Broker, collectors (``--source lctl``) and mapper on this node.

    Attributes:
        workdir: logs, the mapper's configuration and state.
        fsname: the file system served.
        policy: the mapper's placement policy.
        interval_s: the collectors' sample interval, s.
        steer: ``[steer]`` keys for the mapper (``mode`` among them); when given, the MDS
            collector serves a steering agent on loopback and the mapper's
            ``[steer.mds_agents]`` names it (steering by ``drain``, what an admin does by
            hand). :meth:`set_steer_mode` switches it by a reload.
        mapper_settings: more ``[mapper]`` keys.
        policy_params: ``[policy.<name>]`` tables (policy name -> its keys).
    """
    workdir: Path
    fsname: str = "lustre"
    policy: str = "mcmf"
    interval_s: float = 2.0
    steer: dict | None = None
    mapper_settings: dict = field(default_factory=dict)
    policy_params: dict = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        front, back, snap, mapper, self.metrics_port, agent = free_ports(6)
        self.frontend, self.backend, self.snapshot, self.mapper, self.mds_agent = (
            f"tcp://127.0.0.1:{p}" for p in (front, back, snap, mapper, agent))

    def start(self, ready_timeout_s: float = 300.0, n_osts: int = 4) -> "RealLustreStack":
        """Start everything; return once the mapper serves ``n_osts`` usable OSTs.

        Raises:
            LiveStackError: a process exited, or the timeout passed (its log named).
        """
        w = self.workdir
        self.procs["broker"] = spawn([*command("lustre-alloc-broker", "lustre_alloc.collectors.broker_cli"),
                                      "--frontend", self.frontend, "--backend", self.backend,
                                      "--snapshot", self.snapshot, "--heartbeat", "0.5"],
                                     w / "broker.log")
        for role in ("oss", "mds"):
            self.procs[role] = spawn([*command("lustre-alloc-collector", "lustre_alloc.collectors.cli"),
                                      "--role", role, "--broker", self.frontend,
                                      "--source", "lctl", "--interval", str(self.interval_s),
                                      "--host", f"node-{role}",
                                      "--steer-journal", str(w / f"{role}-journal.json"),
                                      *(["--steer-endpoint", self.mds_agent]
                                        if role == "mds" and self.steer is not None else [])],
                                     w / f"{role}.log")
        conf = self._write_config()
        self.procs["mapper"] = spawn([*command("lustre-alloc-mapper", "lustre_alloc.mapper.service.cli"),
                                      "--config", str(conf)], w / "mapper.log")
        self.ready_s = self.wait_ready(n_osts, ready_timeout_s)
        return self

    def _write_config(self) -> Path:
        w = self.workdir
        conf = w / "mapper.toml"
        lines = ["[mapper]", f'bind = "{self.mapper}"', f'broker_backend = "{self.backend}"',
                 f'broker_snapshot = "{self.snapshot}"', f'policy = "{self.policy}"',
                 f'state_file = "{w / "state.json"}"', f"metrics_port = {self.metrics_port}",
                 'metrics_addr = "127.0.0.1"'] + [
                     f"{k} = {json.dumps(v)}" for k, v in self.mapper_settings.items()]
        for name, table in self.policy_params.items():
            lines += ["", f"[policy.{name}]"] + [f"{k} = {json.dumps(v)}"
                                                 for k, v in table.items()]
        if self.steer is not None:
            lines += ["", "[steer]", 'action = "drain"'] + [
                f"{k} = {json.dumps(v)}" for k, v in self.steer.items() if k != "action"]
            lines += ["", "[steer.mds_agents]", f'node-mds = "{self.mds_agent}"']
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def set_steer_mode(self, mode: str, timeout_s: float = 60.0) -> None:
        """Switch the steering to ``mode`` (off, dry_run, on) by a reload (SIGHUP), and
        return once the mapper applied it.

        Raises:
            LiveStackError: no steering configured, the reload rejected or not applied in
                ``timeout_s``.
        """
        if self.steer is None:
            raise LiveStackError("this stack was started without steering")
        key = 'lustre_alloc_mapper_reloads_total{result="applied"}'
        before = read_metrics(self.metrics_port).get(key, 0.0)
        self.steer = {**self.steer, "mode": mode}
        self._write_config()
        self.procs["mapper"].send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout_s
        while read_metrics(self.metrics_port).get(key, 0.0) <= before:
            if time.monotonic() > deadline:
                raise LiveStackError(f"the mapper did not apply the steering mode {mode}; "
                                     f"see {self.workdir / 'mapper.log'}")
            time.sleep(0.2)

    def steered(self) -> float:
        """OSTs the mapper's steering holds drained now (its ``steered_osts`` gauge)."""
        m = read_metrics(self.metrics_port)
        return sum(v for k, v in m.items() if k.startswith("lustre_alloc_mapper_steered_osts{"))

    def wait_ready(self, n_osts: int, timeout_s: float) -> float:
        t0 = time.monotonic()
        key = f'lustre_alloc_mapper_osts{{fsname="{self.fsname}",state="usable"}}'
        while time.monotonic() - t0 < timeout_s:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise LiveStackError(f"{name} exited with {p.returncode}; see "
                                         f"{self.workdir / (name + '.log')}")
            if read_metrics(self.metrics_port).get(key) == n_osts:
                return time.monotonic() - t0
            time.sleep(0.5)
        raise LiveStackError(f"the mapper did not serve {n_osts} OSTs in {timeout_s:.0f} s; "
                             f"see {self.workdir}")

    def stop(self) -> None:
        terminate_all(list(self.procs.values()))

    def __enter__(self) -> "RealLustreStack":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
