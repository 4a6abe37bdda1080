"""The demo end to end (a short window), headless: every file the trace creates is created
under the shim and recorded, the summary is written; and Ctrl-C stops every child process."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from livestack.stack import child_env

from .conftest import PROJECT_ROOT

pytestmark = pytest.mark.timeout(240)


def demo(workdir, *extra):
    return subprocess.Popen([sys.executable, "-m", "livestack.demo", "--workdir", str(workdir),
                             "--no-live", *extra], cwd=PROJECT_ROOT, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_demo_short_window_headless_every_create_recorded(tmp_path, shim_lib):
    p = demo(tmp_path, "--hours", "1", "--duration", "10", "--ranks", "1", "--timeout-ms", "1000")
    out, _ = p.communicate(timeout=200)
    assert p.returncode == 0, out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed_creates"] == 0 and summary["writers_failed"] == 0
    plans = [json.loads(line) for f in (tmp_path / "plans").glob("*.jsonl")
             for line in f.read_text().splitlines()]
    creates = len({op[2] for op in plans if op[1] == "write"})
    assert summary["creates_recorded"] == creates > 0
    assert [row["hour"] for row in summary["balance"]] == [0, 1]
    assert "simulator (mcmf)" in out and "max/mean used space" in out


def test_demo_ctrl_c_stops_every_child(tmp_path, shim_lib):
    p = demo(tmp_path, "--hours", "1", "--duration", "60", "--ranks", "1")
    deadline = time.monotonic() + 90
    children: list[psutil.Process] = []
    while time.monotonic() < deadline:
        children = psutil.Process(p.pid).children(recursive=True)
        if any("livestack.writer" in " ".join(c.cmdline()) for c in children if c.is_running()):
            break
        time.sleep(0.2)
    assert len(children) >= 7          # broker, mapper, 8 collectors, writers
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130, out
    gone, alive = psutil.wait_procs(children, timeout=15)
    assert alive == []
