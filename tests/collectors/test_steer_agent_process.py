"""A real collector process with its steering agent, killed with SIGKILL during a drain on
two MDTs and started again with the same journal: the drain is held for what is left of
its lease and then restored, never stranded."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import zmq

from lustre_alloc.livestack.stack import free_port

from tests.support import wait_for

from .test_steer_agent import _osp_root

PROJECT = Path(__file__).resolve().parents[2]
OST = "demofs-OST000e"
DEVICES = [f"{OST}-osc-MDT0000", f"{OST}-osc-MDT0001"]
LEASE_S = 10.0
"""Long enough that the restarted collector finds the lease still running."""


def start_collector(root: Path, endpoint: str, journal: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lustre_alloc.collectors.cli", "--role", "mds", "--source", "files",
         "--root", str(root), "--broker", f"tcp://127.0.0.1:{free_port()}",
         "--interval", "1", "--steer-endpoint", endpoint, "--steer-journal", str(journal),
         "--log-level", "warning"], cwd=PROJECT, stderr=subprocess.PIPE, text=True)


def ask(endpoint: str, request: dict, timeout_s: float = 20.0) -> dict:
    """One request to the agent, retried until its socket answers."""
    ctx = zmq.Context.instance()
    deadline = time.monotonic() + timeout_s
    while True:
        s = ctx.socket(zmq.REQ)
        s.linger = 0
        s.connect(endpoint)
        try:
            s.send(msgpack.packb(request))
            if s.poll(500):
                return msgpack.unpackb(s.recv())
        finally:
            s.close(0)
        assert time.monotonic() < deadline, "the agent did not answer"


def values(root: Path) -> set[str]:
    return {(root / "sys/fs/lustre/osp" / d / "max_create_count").read_text().strip()
            for d in DEVICES}


def test_a_sigkilled_collector_restarted_holds_then_restores_its_drain(tmp_path):
    root = _osp_root(tmp_path, DEVICES)
    journal = tmp_path / "steer-journal.json"
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    first = start_collector(root, endpoint, journal)
    second = None
    try:
        reply = ask(endpoint, {"op": "steer", "ost": OST, "kind": "drain", "lease_s": LEASE_S,
                               "reason": "test"})
        drained_at = time.monotonic()
        assert reply["ok"], reply
        assert values(root) == {"0"}
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        assert values(root) == {"0"}                 # killed: nothing restored by it
        second = start_collector(root, endpoint, journal)
        status = ask(endpoint, {"op": "status"})
        assert {x["ost"] for x in status["leases"]} == {OST}      # resumed from the journal
        assert values(root) == {"0"}                               # held, not restored
        # held to the lease's end (the journal's wall-clock deadline), then restored
        held_until = drained_at + LEASE_S - 0.5
        if time.monotonic() < held_until:
            time.sleep(held_until - time.monotonic())
            assert values(root) == {"0"}
        wait_for(lambda: values(root) == {"20000"}, timeout_s=LEASE_S + 60,
                 what="the drain restored")
        assert ask(endpoint, {"op": "status"})["leases"] == []
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(10)
