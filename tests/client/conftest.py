"""Fixtures for the client shim tests: the built library, a mapper process on
127.0.0.1 (the real ``lustre-alloc-mapper`` with a static 4x2 cluster, or the
stand-in for misbehaviours), and a runner for programs under LD_PRELOAD."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
import zmq

from lustre_alloc.common.record_file import RECORD_KEYS, read_records

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LIBDIR = PROJECT_ROOT / "liblustre_alloc"
VENV_BIN = Path(sys.executable).parent
STANDIN = Path(__file__).resolve().parent / "standin_mapper.py"
STATIC_CLUSTER = "4x2"
N_OSTS = 8  # 4 OSSes x 2 OSTs

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_records(path: Path) -> list[dict[str, str]]:
    """The record file (docs/client.md "Record format") as dicts."""
    out = read_records(path)
    for fields in out:
        assert tuple(fields) == RECORD_KEYS, fields
    return out


def assert_valid_layout(rec: dict[str, str], count: int = 1, n_osts: int = N_OSTS) -> list[int]:
    """A record whose layout came from the mapper: distinct OSTs in 0..N-1."""
    assert rec["result"] == "layout", rec
    assert rec["reason"] == "", rec
    osts = [int(x) for x in rec["osts"].split(",")]
    assert len(osts) == count == int(rec["stripe_count"]), rec
    assert len(set(osts)) == len(osts), rec
    assert all(0 <= o < n_osts for o in osts), rec
    assert int(rec["stripe_size"]) % 65536 == 0
    return osts


@dataclass
class Mapper:
    endpoint: str
    proc: subprocess.Popen
    kind: str

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for_pong(endpoint: str, proc: subprocess.Popen, deadline_s: float = 30.0) -> None:
    ctx = zmq.Context.instance()
    t_end = time.monotonic() + deadline_s
    rid = 1
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"mapper exited with {proc.returncode}")
        s = ctx.socket(zmq.REQ)
        s.linger = 0
        s.connect(endpoint)
        s.send(msgpack.packb({"v": 1, "op": "ping", "id": rid}))
        if s.poll(500):
            reply = msgpack.unpackb(s.recv())
            s.close()
            if reply.get("ok") and reply.get("id") == rid:
                return
        s.close()
        rid += 1
    raise RuntimeError(f"mapper at {endpoint} never answered a ping")


PLACES_EVERY_CREATE = "[policy.mcmf]\nalike_to_lustre = false\n"
"""The mapper's configuration for tests of the shim's layouts: on the static cluster's
alike OSTs the default mcmf would leave leased creates to Lustre's allocator (no layout to
check); that answer has its own tests (tests/client/test_leases.py)."""


def start_real_mapper(policy: str | None = None, config_dir: Path | None = None) -> Mapper:
    """The real mapper on a free loopback port, placing every create (its configuration,
    :data:`PLACES_EVERY_CREATE`, written in ``config_dir``, default a new temporary
    directory)."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    config_dir = Path(tempfile.mkdtemp(prefix="la-mapper-")) if config_dir is None else config_dir
    config = config_dir / "mapper.toml"
    config.write_text(PLACES_EVERY_CREATE)
    cmd = [str(VENV_BIN / "lustre-alloc-mapper"), "--bind", endpoint, "--config", str(config),
           "--static-cluster", STATIC_CLUSTER, "--log-level", "warning"]
    if policy:
        cmd += ["--policy", policy]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = Mapper(endpoint, proc, "real")
    try:
        wait_for_pong(endpoint, proc)
    except Exception:
        m.stop()
        raise
    return m


def start_standin(mode: str = "normal", log: Path | None = None, delay_ms: float = 300.0) -> Mapper:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    cmd = [sys.executable, str(STANDIN), "--bind", endpoint, "--mode", mode,
           "--osts", str(N_OSTS), "--delay-ms", str(delay_ms)]
    if log:
        cmd += ["--log", str(log)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = Mapper(endpoint, proc, f"standin:{mode}")
    try:
        wait_for_pong(endpoint, proc)
    except Exception:
        m.stop()
        raise
    return m


@pytest.fixture(scope="session")
def shim_lib() -> Path:
    """Build liblustre_alloc (make is a no-op when scripts/setup-env.sh did it)."""
    subprocess.run(["make", "-s", "-C", str(LIBDIR)], check=True)
    return LIBDIR / "liblustre_alloc.so"


@pytest.fixture(scope="session")
def create_files(shim_lib: Path) -> Path:
    return LIBDIR / "tests" / "la_create_files"


@pytest.fixture(scope="session")
def real_mapper() -> Mapper:
    """The real mapper service on loopback, shared by the tests of a session."""
    m = start_real_mapper()
    yield m
    m.stop()


@pytest.fixture
def standin():
    """Factory: a stand-in mapper in a given mode, stopped after the test."""
    started: list[Mapper] = []

    def _start(mode: str = "normal", **kw) -> Mapper:
        m = start_standin(mode, **kw)
        started.append(m)
        return m

    yield _start
    for m in started:
        m.stop()


@dataclass
class ShimRun:
    """Runs programs under LD_PRELOAD with a fresh eligible directory."""
    lib: Path
    root: Path
    endpoint: str
    defaults: dict[str, str] | None = None

    @property
    def data(self) -> Path:
        return self.root / "lustre"

    @property
    def record(self) -> Path:
        return self.root / "record.tsv"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LUSTRE_ALLOC_", "SLURM_"))}
        env.pop("LD_PRELOAD", None)
        env.update({
            "LD_PRELOAD": str(self.lib),
            "LUSTRE_ALLOC_PATHS": str(self.data),
            "LUSTRE_ALLOC_RECORD": str(self.record),
            "LUSTRE_ALLOC_MAPPER": self.endpoint,
        })
        env.update(self.defaults or {})
        env.update(extra)
        return env

    def run(self, cmd: list[str], timeout: float = 60, check: bool = True, **extra: str):
        p = subprocess.run([str(c) for c in cmd], env=self.env(**extra), cwd=self.root,
                           capture_output=True, text=True, timeout=timeout)
        if check:
            assert p.returncode == 0, (cmd, p.stdout, p.stderr)
        return p

    def records(self) -> list[dict[str, str]]:
        return parse_records(self.record)


@pytest.fixture
def shim_run_factory(shim_lib: Path, tmp_path: Path):
    def _make(endpoint: str, **defaults: str) -> ShimRun:
        r = ShimRun(shim_lib, tmp_path, endpoint, defaults)
        r.data.mkdir(exist_ok=True)
        return r
    return _make


@pytest.fixture
def shim(shim_run_factory, real_mapper: Mapper) -> ShimRun:
    """A ShimRun against the real mapper.  These tests check what is created
    and recorded, not timing (test_fallback.py does, at the default 50 ms):
    a generous timeout keeps a loaded 2-core machine from turning a slow
    round trip into a (correct, but unexpected here) fallback."""
    return shim_run_factory(real_mapper.endpoint, LUSTRE_ALLOC_TIMEOUT_MS="5000")


@pytest.fixture
def dead_endpoint() -> str:
    """An endpoint where nothing listens (the mapper is stopped)."""
    return f"tcp://127.0.0.1:{free_port()}"


def has(tool: str) -> bool:
    return shutil.which(tool) is not None


# ---- CURVE (tests/client/test_shim_safety.py, test_sanitizers.py) ----

@pytest.fixture(scope="session")
def curve_keys(tmp_path_factory):
    """Key files in the format of ``lustre-alloc-broker --keygen`` (common curve module)."""
    from lustre_alloc.common.curve import generate_keys
    d = tmp_path_factory.mktemp("keys")
    authorized = d / "authorized"
    authorized.mkdir()
    keys = {}
    for name in ("mapper", "client", "rogue"):
        keys[name] = generate_keys(d, name)
    # only the client's public key is authorised by the mapper
    (authorized / "client.key").write_bytes(keys["client"][0].read_bytes())
    keys["authorized"] = (authorized, None)
    return keys


@pytest.fixture(scope="session")
def curve_mapper(curve_keys, tmp_path_factory):
    """The real mapper with CURVE on its request socket."""
    d = tmp_path_factory.mktemp("curve_mapper")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    cfg = d / "mapper.toml"
    cfg.write_text(f"""[mapper]
serve_curve_secret_key = "{curve_keys['mapper'][1]}"
serve_curve_authorized_keys = "{curve_keys['authorized'][0]}"
""")
    proc = subprocess.Popen([str(VENV_BIN / "lustre-alloc-mapper"), "--config", str(cfg),
                             "--bind", endpoint, "--static-cluster", "4x2",
                             "--policy", "round_robin", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = Mapper(endpoint, proc, "real+curve")
    try:
        _wait_curve(endpoint, proc, curve_keys)
        yield m
    finally:
        m.stop()


def _wait_curve(endpoint, proc, keys, deadline_s=30.0):
    """wait_for_pong, over CURVE."""
    import zmq.auth
    ctx = zmq.Context.instance()
    pub, sec = zmq.auth.load_certificate(keys["client"][1])
    srv, _ = zmq.auth.load_certificate(keys["mapper"][0])
    t_end = time.monotonic() + deadline_s
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"mapper exited with {proc.returncode}")
        s = ctx.socket(zmq.REQ)
        s.linger = 0
        s.curve_publickey, s.curve_secretkey, s.curve_serverkey = pub, sec, srv
        s.connect(endpoint)
        s.send(msgpack.packb({"v": 1, "op": "ping", "id": 1}))
        ok = s.poll(500)
        s.close()
        if ok:
            return
    raise RuntimeError("CURVE mapper never answered")
