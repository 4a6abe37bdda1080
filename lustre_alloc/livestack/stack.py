"""The whole lustre-alloc stack as real processes on 127.0.0.1, over emulated Lustre servers.

Used by the demo (``lustre-alloc-demo``), the live fault and load tests (``tests/live/``) and
the live benchmarks (``bench/live_*.py``). Every piece is the shipped command, started as its
own process with ephemeral ports on the loopback:

* ``lustre-alloc-broker`` (frontend, backend, snapshot endpoints);
* ``lustre-alloc-mapper --config mapper.toml`` subscribed to that broker (not a static
  cluster), with a learned-state file and its Prometheus port (readiness is read there);
* one ``lustre-alloc-collector --role oss --source files --root <emulated OSS>`` per OSS of an
  :class:`~lustre_alloc.livestack.emulator.EmulatedCluster`.

:class:`EmulatorPump` keeps the emulated statistics files moving: it follows the shim's record
(:class:`~lustre_alloc.livestack.emulator.RecordFeed`) and rewrites the files twice per collector
interval. Children get ``PR_SET_PDEATHSIG`` (SIGTERM), so they go when the orchestrating process
dies, even by SIGKILL; :meth:`LiveStack.stop` terminates them in order (collectors, mapper,
broker), SIGKILL after a grace period.
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lustre_alloc.common.settings import settings_of
from lustre_alloc.mapper.service.config import MapperConfig
from lustre_alloc.mapper.steer.agents import SteerConfig
from lustre_alloc.mapper.steer.controller import SteerParams
from lustre_alloc.livestack.emulator import FSNAME, MDS_NAME, EmulatedCluster, RecordFeed

log = logging.getLogger("lustre_alloc.livestack.stack")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
_PR_SET_PDEATHSIG = 1


class LiveStackError(RuntimeError):
    """A piece of the live stack did not start or did not become ready in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports on 127.0.0.1 that were free a moment ago.

    Every socket stays bound until all are chosen: asked one after another, the kernel may
    hand the same ephemeral port out twice (seen in the suite: the mapper's metrics port
    equal to a broker socket's, so /metrics answered in ZMTP)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def read_metrics(port: int, timeout_s: float = 2.0) -> dict[str, float]:
    """A mapper's Prometheus samples on 127.0.0.1:``port`` as ``{"name{labels}": value}``
    (empty if down)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=timeout_s) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def command(script: str, module: str) -> list[str]:
    """argv of a console script of this installation (``.venv/bin/<script>``), or
    ``python -m <module>`` when the script is not installed (a checkout without
    ``pip install -e``)."""
    exe = Path(sys.executable).parent / script
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", module]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: ours, the project on PYTHONPATH, no shim variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LUSTRE_ALLOC_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT),
                                                    os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


def spawn(argv: list[str], log_path: Path, *, env: dict[str, str] | None = None,
          cwd: str | os.PathLike[str] | None = None, stdin: Any = subprocess.DEVNULL,
          stdout: Any = None) -> subprocess.Popen:
    """Start ``argv``, stderr (and stdout unless given) appended to ``log_path``."""
    logf = open(log_path, "ab")
    try:
        return subprocess.Popen(argv, stdin=stdin, stdout=stdout if stdout is not None else logf,
                                stderr=logf, env=env or child_env(), cwd=cwd or PROJECT_ROOT,
                                preexec_fn=_die_with_parent)
    finally:
        logf.close()


def terminate(proc: subprocess.Popen, grace_s: float = 5.0) -> int:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL. Returns the exit code."""
    terminate_all([proc], grace_s)
    return proc.returncode


def terminate_all(procs: list[subprocess.Popen], grace_s: float = 5.0) -> None:
    """SIGTERM every process at once, wait up to ``grace_s`` in all, then SIGKILL the rest.

    At once, not one after another: on a loaded machine a dozen children that each take a
    few seconds to exit would otherwise add up past any caller's patience (Ctrl-C on the
    demo must stop everything within a minute)."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        try:
            p.terminate()
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    for p in running:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
    for p in running:
        p.wait(5)


@dataclass
class CurveKeys:
    """CURVE key files of a live stack (``lustre-alloc-broker --keygen`` format)."""
    directory: Path
    authorized: Path

    def secret(self, name: str) -> str:
        return str(self.directory / f"{name}.key_secret")

    def public(self, name: str) -> str:
        return str(self.directory / f"{name}.key")

    @classmethod
    def generate(cls, directory: Path, clients: list[str]) -> "CurveKeys":
        """Keys for the broker and each client; the clients' public keys authorised."""
        from lustre_alloc.common.curve import generate_keys
        authorized = directory / "authorized"
        authorized.mkdir(parents=True, exist_ok=True)
        generate_keys(directory, "broker")
        for name in clients:
            public, _ = generate_keys(directory, name)
            shutil.copy(public, authorized / public.name)
        return cls(directory, authorized)


@dataclass
class Endpoints:
    """Loopback endpoints of one stack (fixed for its life: restarts reuse them)."""
    frontend: str
    backend: str
    snapshot: str
    mapper: str
    metrics_port: int

    @classmethod
    def allocate(cls) -> "Endpoints":
        f, b, s, m, p = free_ports(5)
        return cls(f"tcp://127.0.0.1:{f}", f"tcp://127.0.0.1:{b}", f"tcp://127.0.0.1:{s}",
                   f"tcp://127.0.0.1:{m}", p)


class EmulatorPump:
    """Background thread: follow the shim's record, charge the emulated OSTs, rewrite the
    statistics files, every ``period_s``. ``lock`` guards the emulator for readers (the UI).
    """

    def __init__(self, cluster: EmulatedCluster, feed: RecordFeed | None, period_s: float,
                 on_lines: Callable[[list[dict[str, str]]], None] | None = None):
        self.cluster = cluster
        self.feed = feed
        self.period_s = period_s
        self.on_lines = on_lines
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def step(self) -> None:
        """One poll + flush (also called once more at the end of a run)."""
        with self.lock:
            new = self.feed.poll() if self.feed is not None else []
            self.cluster.flush()
        if new and self.on_lines is not None:
            self.on_lines(new)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - reported by stop()
                self.error = exc
                log.exception("emulator step failed")
                return

    def start(self) -> "EmulatorPump":
        self._thread = threading.Thread(target=self._run, name="lustre-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


@dataclass
class LiveStack:
    """Broker, mapper and one collector per emulated OSS, as processes on 127.0.0.1.

    Args:
        workdir: where configs, logs, keys and the mapper's state file go.
        cluster: the emulated servers (their roots are the collectors' ``--root``).
        interval_s: collector interval, s (the mapper's staleness limit is twice it).
        policy: the mapper's primary policy.
        curve: CURVE on the broker (collectors and mapper get authorised keys).
        mapper_settings: more ``[mapper]`` keys (e.g. ``round_budget_s``).
        policy_params: ``[policy.<name>]`` tables (policy name -> its keys).
        heartbeat_s: broker heartbeat period, s.
        log_level: of every process.
        steer: ``[steer]`` keys for the mapper; when given, every collector also
            serves a steering agent (``--steer-endpoint``, acting on its emulated files) and
            the mapper's ``oss_agents`` name them (over CURVE when ``curve``); a collector of
            the emulated MDS serves the ``drain`` agent (``mds_agents``).
        scope: the mapper's ``[scope]`` table (e.g. ``{"shadow": True}``).
    """
    workdir: Path
    cluster: EmulatedCluster
    interval_s: float = 1.0
    policy: str = "mcmf"
    curve: bool = False
    mapper_settings: dict[str, Any] = field(default_factory=dict)
    policy_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    heartbeat_s: float = 0.2
    log_level: str = "info"
    endpoints: Endpoints = field(default_factory=Endpoints.allocate)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    keys: CurveKeys | None = None
    steer: dict[str, Any] | None = None
    scope: dict[str, Any] | None = None
    agent_endpoints: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.logs = self.workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.state_file = self.workdir / "mapper-state.json"
        if self.curve and self.keys is None:
            self.keys = CurveKeys.generate(self.workdir / "keys", [
                "mapper", *self.cluster.oss_names, *([MDS_NAME] if self.steer is not None else [])])
        if self.steer is not None:
            servers = [*self.cluster.oss_names, MDS_NAME]
            self.agent_endpoints = {oss: f"tcp://127.0.0.1:{port}"
                                    for oss, port in zip(servers, free_ports(len(servers)))}
            if self.keys is not None:       # the agents accept the mapper's key only
                allowed = self.keys.directory / "steer-authorized"
                allowed.mkdir(exist_ok=True)
                shutil.copy(self.keys.public("mapper"), allowed / "mapper.key")

    # ------------------------------------------------------------------ pieces
    def log_path(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def start_broker(self) -> subprocess.Popen:
        e = self.endpoints
        argv = [*command("lustre-alloc-broker", "lustre_alloc.collectors.broker_cli"),
                "--frontend", e.frontend, "--backend", e.backend, "--snapshot", e.snapshot,
                "--heartbeat", str(self.heartbeat_s), "--stats-interval", "5",
                "--log-level", self.log_level]
        if self.keys is not None:
            argv += ["--curve-secret-key", self.keys.secret("broker"),
                     "--curve-authorized-keys", str(self.keys.authorized)]
        self.procs["broker"] = p = spawn(argv, self.log_path("broker"))
        return p

    def mapper_config(self) -> Path:
        """Write (or rewrite) the mapper's TOML and return its path."""
        e = self.endpoints
        settings: dict[str, Any] = {
            "bind": e.mapper, "broker_backend": e.backend, "broker_snapshot": e.snapshot,
            "policy": self.policy, "state_file": str(self.state_file), "save_interval_s": 1.0,
            "metrics_port": e.metrics_port, "metrics_addr": "127.0.0.1",
            # one host plays every client node here, so the per-client bounds
            # (lustre_alloc.mapper.service.limits) would treat them all as one client: lifted
            "peer_requests_per_s": 0.0, "peer_batch_max": 256,
            "peer_new_apps_per_min": 1_000_000, "peer_max_apps": 1_000_000,
            "log_level": self.log_level}
        if self.keys is not None:
            settings["curve_secret_key"] = self.keys.secret("mapper")
            settings["curve_server_key"] = self.keys.public("broker")
        settings.update(self.mapper_settings)
        path = self.workdir / "mapper.toml"
        mapper_dev = {f.name for f, _ in settings_of(MapperConfig, development=True)}
        steer_dev = {f.name for cls in (SteerParams, SteerConfig)
                     for f, _ in settings_of(cls, development=True)}
        steer = {**(self.steer or {})}
        lines = ["[mapper]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()
                                if k not in mapper_dev]
        lines += ["", "[development]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()
                                          if k in mapper_dev]
        lines += ["", "[development.steer]"] + [f"{k} = {json.dumps(v)}"
                                                for k, v in steer.items() if k in steer_dev]
        if self.steer is not None:
            if self.keys is not None:
                steer["agent_keys_dir"] = str(self.keys.directory)
            lines += ["", "[steer]"] + [f"{k} = {json.dumps(v)}" for k, v in steer.items()
                                        if k not in steer_dev]
            lines += ["", "[steer.oss_agents]"] + [f"{json.dumps(k)} = {json.dumps(v)}"
                                                   for k, v in self.agent_endpoints.items()
                                                   if k != MDS_NAME]
            lines += ["", "[steer.mds_agents]",
                      f"{json.dumps(MDS_NAME)} = {json.dumps(self.agent_endpoints[MDS_NAME])}"]
        if self.scope is not None:
            lines += ["", "[scope]"] + [f"{k} = {json.dumps(v)}" for k, v in self.scope.items()]
        for name, table in self.policy_params.items():
            lines += ["", f"[policy.{name}]"] + [f"{k} = {json.dumps(v)}"
                                                 for k, v in table.items()]
        path.write_text("\n".join(lines) + "\n")
        return path

    def start_mapper(self) -> subprocess.Popen:
        argv = [*command("lustre-alloc-mapper", "lustre_alloc.mapper.service.cli"),
                "--config", str(self.mapper_config())]
        self.procs["mapper"] = p = spawn(argv, self.log_path("mapper"))
        return p

    def start_collector(self, oss: str) -> subprocess.Popen:
        """One collector: an OSS's, or with ``oss = MDS_NAME`` the emulated MDS's (its OSP
        devices; started only with ``steer``, for the drain action)."""
        role, root = (("mds", self.cluster.mds_root) if oss == MDS_NAME
                      else ("oss", self.cluster.oss_root(oss)))
        argv = [*command("lustre-alloc-collector", "lustre_alloc.collectors.cli"),
                "--role", role, "--broker", self.endpoints.frontend, "--source", "files",
                "--root", str(root), "--interval", str(self.interval_s),
                "--host", oss, "--log-level", self.log_level]
        if self.keys is not None:
            argv += ["--curve-secret-key", self.keys.secret(oss),
                     "--curve-server-key", self.keys.public("broker")]
        if self.steer is not None:
            argv += ["--steer-endpoint", self.agent_endpoints[oss], "--steer-journal",
                     str(self.log_path(f"collector-{oss}").with_suffix(".steer-journal.json"))]
            if self.keys is not None:
                argv += ["--steer-authorized-keys",
                         str(self.keys.directory / "steer-authorized")]
        self.procs[f"collector-{oss}"] = p = spawn(argv, self.log_path(f"collector-{oss}"))
        return p

    def start(self, ready_timeout_s: float = 60.0) -> "LiveStack":
        """Start everything and wait until the mapper serves every emulated OST."""
        self.start_broker()
        for oss in self.cluster.oss_names:
            self.start_collector(oss)
        if self.steer is not None:
            self.start_collector(MDS_NAME)
        self.start_mapper()
        self.wait_ready(ready_timeout_s)
        return self

    def kill(self, name: str, sig: int = signal.SIGKILL) -> float:
        """Send ``sig`` to one piece, wait for it to exit; returns the time it was sent."""
        proc = self.procs[name]
        t = time.time()
        proc.send_signal(sig)
        proc.wait(30)
        return t

    def stop(self) -> None:
        """Terminate everything: collectors first, then the mapper (it saves its state),
        then the broker."""
        collectors = [p for n, p in self.procs.items() if n not in ("mapper", "broker")]
        terminate_all(collectors)
        for name in ("mapper", "broker"):
            if name in self.procs:
                terminate(self.procs[name])

    def __enter__(self) -> "LiveStack":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ observation
    def metrics(self, timeout_s: float = 2.0) -> dict[str, float]:
        """The mapper's Prometheus samples as ``{"name{labels}": value}`` (empty if down)."""
        return read_metrics(self.endpoints.metrics_port, timeout_s)

    def wait_ready(self, timeout_s: float = 60.0) -> float:
        """Wait until the mapper reports every emulated OST usable and no stale server;
        returns the seconds it took.

        Raises:
            LiveStackError: a process died or the timeout passed (log paths named).
        """
        t0 = time.monotonic()
        want = float(len(self.cluster.osts))
        while time.monotonic() - t0 < timeout_s:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise LiveStackError(f"{name} exited with {proc.returncode}; "
                                         f"see {self.log_path(name)}")
            m = self.metrics(0.5)
            fs = f'fsname="{FSNAME}"'
            if (m.get(f'lustre_alloc_mapper_osts{{{fs},state="usable"}}') == want
                    and m.get(f"lustre_alloc_mapper_stale_servers{{{fs}}}") == 0.0):
                return time.monotonic() - t0
            time.sleep(0.1)
        raise LiveStackError(f"mapper not ready with {int(want)} usable OSTs within "
                             f"{timeout_s} s; see {self.logs}")

    def log_events(self, name: str) -> list[dict[str, Any]]:
        """JSON log lines of one piece."""
        out = []
        try:
            text = self.log_path(name).read_text(errors="replace")
        except FileNotFoundError:
            return out
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out
