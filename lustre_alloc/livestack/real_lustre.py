"""The lustre-alloc stack as real processes on one real Lustre server node (the lustre-vm
guest, docs/lustre-vm.md): the broker, one collector per role reading Lustre through
``lctl`` (an OSS's OSTs; the MDS's MDT and OSP devices), and the mapper subscribed to the
broker, on loopback ports. Used by the real-Lustre tier (tests/lustre) and
bench/lustre_vm_placement.py.
"""
from __future__ import annotations

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
    """
    workdir: Path
    fsname: str = "lustre"
    policy: str = "mcmf"
    interval_s: float = 2.0
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        front, back, snap, mapper, self.metrics_port = free_ports(5)
        self.frontend, self.backend, self.snapshot, self.mapper = (
            f"tcp://127.0.0.1:{p}" for p in (front, back, snap, mapper))

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
                                      "--steer-journal", str(w / f"{role}-journal.json")],
                                     w / f"{role}.log")
        conf = w / "mapper.toml"
        conf.write_text("\n".join([
            "[mapper]", f'bind = "{self.mapper}"', f'broker_backend = "{self.backend}"',
            f'broker_snapshot = "{self.snapshot}"', f'policy = "{self.policy}"',
            f'state_file = "{w / "state.json"}"', f"metrics_port = {self.metrics_port}",
            'metrics_addr = "127.0.0.1"']) + "\n")
        self.procs["mapper"] = spawn([*command("lustre-alloc-mapper", "lustre_alloc.mapper.service.cli"),
                                      "--config", str(conf)], w / "mapper.log")
        self.ready_s = self.wait_ready(n_osts, ready_timeout_s)
        return self

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
