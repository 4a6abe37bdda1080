"""Helpers for the mapper service tests: ephemeral ports, in-thread services on a static
cluster, mapper subprocesses, and a small policy with learned state to persist."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from lustre_alloc.livestack.stack import free_port, free_ports  # noqa: F401 - one port picker for every test

from lustre_alloc.mapper.state.cluster_state import ClusterSnapshot
from lustre_alloc.mapper.state.ost_health import is_usable, pool_members, resolve_stripe_count
from lustre_alloc.mapper.predictor.markov_store import write_document
from lustre_alloc.mapper.policies.placement import CreateRequest, Placement
from lustre_alloc.mapper.service.server import MapperService
from lustre_alloc.mapper.service.config import load_config

PYTHON = sys.executable
PROJECT = Path(__file__).resolve().parents[2]


def make_service(**settings) -> MapperService:
    """A started in-thread mapper bound on an ephemeral 127.0.0.1 port."""
    settings.setdefault("bind", "tcp://127.0.0.1:*")
    settings.setdefault("log_level", "warning")
    return MapperService(load_config(None, settings)).start()


@pytest.fixture
def static_service() -> Iterator[MapperService]:
    """A 4x2 static cluster served by round_robin (fallback lustre_qos)."""
    svc = make_service(static_cluster="4x2", policy="round_robin")
    yield svc
    svc.stop()


class JobCounter:
    """A placement policy with learned state: how many requests each job made. Places
    stripes on the usable pool members in index order, rotated by that count. Its state
    is a JSON file, so tests can check what a restart restores."""
    name = "job_counter"

    def __init__(self, seed: int = 0):
        self.counts: dict[str, int] = {}

    def allocate(self, snapshot: ClusterSnapshot, request: CreateRequest) -> Placement:
        usable = [o.index for o in pool_members(snapshot, request.pool) if is_usable(o)]
        n = self.counts.get(request.jobid, 0)
        self.counts[request.jobid] = n + 1
        count = resolve_stripe_count(request.stripe_count, len(usable))
        rot = n % len(usable)
        return Placement(tuple((usable[rot:] + usable[:rot])[:count]), self.name)

    def save_state(self, path: str) -> Path:
        return write_document(self.counts, path)      # atomically, as PersistsState asks

    def load_state(self, path: str) -> int:
        self.counts = json.loads(Path(path).read_text())
        return 0

    def learned_predictor(self) -> None:
        return None                                     # saved by save_state alone

    def learned_extras(self) -> dict:
        return {}


def spawn_mapper(args: Sequence[str], log_path: Path, *, with_test_policy: bool = False
                 ) -> subprocess.Popen:
    """``lustre-alloc-mapper ARGS`` in a real subprocess (stderr to ``log_path``); with
    ``with_test_policy`` the :class:`JobCounter` policy is registered as ``job_counter``."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    if with_test_policy:
        code = ("import sys; from lustre_alloc.mapper.policies.registry import POLICIES; "
                "from tests.service.conftest import JobCounter; "
                "POLICIES['job_counter'] = JobCounter; "
                "from lustre_alloc.mapper.service.cli import main; sys.exit(main(sys.argv[1:]))")
        argv = [PYTHON, "-c", code, *args]
    else:
        argv = [PYTHON, "-m", "lustre_alloc.mapper.service.cli", *args]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"),
                            env=env, cwd=PROJECT)


def wait_ready(endpoint: str, proc: subprocess.Popen | None = None, timeout_s: float = 15.0,
               curve=None) -> None:
    """Ping until the mapper answers (as a CURVE client with ``curve`` keys)."""
    from lustre_alloc.mapper.service.client import MapperClient, MapperTimeout
    deadline = time.monotonic() + timeout_s
    with MapperClient(endpoint, timeout_s=0.2, curve=curve) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"mapper exited with {proc.returncode}")
            try:
                client.ping()
                return
            except MapperTimeout:
                continue
    raise AssertionError(f"mapper at {endpoint} did not answer within {timeout_s} s")


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> int:
    """SIGTERM, wait; SIGKILL if it hangs. Returns the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def log_events(path: Path) -> list[dict]:
    """The JSON log lines of a mapper subprocess."""
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out
