"""The live stack on 127.0.0.1 for the fault and load tests: a small emulated cluster
(4 OSSes x 2 OSTs), real broker, mapper and collector processes (``lustre_alloc/livestack/stack.py``),
programs under the LD_PRELOAD shim.

Collectors sample every 0.5 s, so the mapper's staleness limit is 1 s; liveness waits are
generous (a loaded 2-core machine), correctness checks are strict."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lustre_alloc.common.record_file import read_records

from lustre_alloc.simulator.cluster import GIB, SimCluster
from lustre_alloc.livestack.stack import EmulatorPump, LiveStack, child_env, spawn
from lustre_alloc.livestack.emulator import EmulatedCluster, RecordFeed

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHIM = PROJECT_ROOT / "liblustre_alloc" / "liblustre_alloc.so"
INTERVAL_S = 0.5
MAX_AGE_S = 2 * INTERVAL_S
READY_TIMEOUT_S = 60.0
FALLBACK_REASONS = ("mapper_unreachable", "mapper_timeout", "mapper_backoff")


def small_cluster(oss: int = 4, per_oss: int = 2) -> SimCluster:
    """``oss`` x ``per_oss`` OSTs of 1 TiB, 600 MiB/s, 1-2 % used (deterministic)."""
    n = oss * per_oss
    cap = np.full(n, 1024.0 * GIB)
    used = np.floor(cap * (0.01 + 0.01 * (np.arange(n) % 3) / 2))
    return SimCluster(oss_names=[f"oss{s}" for s in range(oss)], ost_index=np.arange(n),
                      ost_oss=np.arange(n) // per_oss, capacity_bytes=cap, used_bytes=used,
                      bandwidth_bytes_s=np.full(n, 600.0 * (1 << 20)))


class Live:
    """One test's stack, emulator pump and shim record."""

    def __init__(self, root: Path, **stack_kw):
        self.root = root
        self.data = root / "data"
        self.data.mkdir()
        self.record = root / "shim-record.tsv"
        self.emu = EmulatedCluster(small_cluster(), root / "servers")
        self.feed = RecordFeed(self.emu, self.record)
        self.pump = EmulatorPump(self.emu, self.feed, INTERVAL_S / 2)
        stack_kw.setdefault("interval_s", INTERVAL_S)
        self.stack = LiveStack(root, self.emu, **stack_kw)
        self.writers: list[subprocess.Popen] = []

    def start(self) -> "Live":
        self.pump.start()
        self.stack.start(READY_TIMEOUT_S)
        return self

    def stop(self) -> None:
        for w in self.writers:
            if w.poll() is None:
                w.kill()
                w.wait(10)
        self.pump.stop()
        self.stack.stop()

    def writer(self, name: str, files: int, period_s: float, *, delay_s: float = 0.5,
               timeout_ms: int = 100, nbytes: int = 4096, linger_s: float = 0.0,
               **env: str) -> subprocess.Popen:
        """A writer under the shim creating ``files`` files, one every ``period_s``; with
        ``linger_s``, it appends to its first file that long after the last create (and
        lives until then)."""
        plan = self.root / f"{name}.jsonl"
        d = self.data / name
        d.mkdir()
        ops = [[round(i * period_s, 4), "write", str(d / f"f{i:05d}"), nbytes]
               for i in range(files)]
        if linger_s:
            ops.append([round(files * period_s + linger_s, 4), "write", ops[0][2], nbytes])
        plan.write_text("".join(json.dumps(op) + "\n" for op in ops))
        full_env = child_env({"LD_PRELOAD": str(SHIM), "LUSTRE_ALLOC_MAPPER": self.stack.endpoints.mapper,
                              "LUSTRE_ALLOC_PATHS": str(self.data),
                              "LUSTRE_ALLOC_RECORD": str(self.record),
                              "LUSTRE_ALLOC_TIMEOUT_MS": str(timeout_ms),
                              "LUSTRE_ALLOC_JOBID": name, **env})
        out = open(self.root / f"{name}.out", "wb")
        proc = spawn([sys.executable, "-m", "lustre_alloc.livestack.writer", str(plan),
                      f"{time.time() + delay_s:.6f}"], self.stack.log_path(f"writer-{name}"),
                     env=full_env, cwd=self.root, stdout=out)
        out.close()
        self.writers.append(proc)
        return proc

    def writer_result(self, name: str, proc: subprocess.Popen, timeout_s: float = 120) -> dict:
        proc.wait(timeout_s)
        text = (self.root / f"{name}.out").read_text().strip()
        assert text, self.stack.log_path(f"writer-{name}").read_text()
        return {"returncode": proc.returncode, **json.loads(text.splitlines()[-1])}

    def records(self) -> list[dict[str, str]]:
        return read_records(self.record)


@pytest.fixture(scope="session")
def shim_lib() -> Path:
    subprocess.run(["make", "-s", "-C", str(SHIM.parent)], check=True)
    return SHIM


@pytest.fixture
def live(tmp_path: Path, shim_lib: Path):
    """Factory: a started live stack (stopped after the test)."""
    made: list[Live] = []

    def _make(**stack_kw) -> Live:
        lv = Live(tmp_path, **stack_kw)
        made.append(lv)
        return lv.start()

    yield _make
    for lv in made:
        lv.stop()
