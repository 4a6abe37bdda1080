"""Allocation load on a live mapper from many client processes, and RSS sampling of the
stack's processes: shared by ``bench/live_load.py``, ``bench/live_soak.py`` and the CI test
``tests/live/test_load.py``.

Each client is its own process (``python -m lustre_alloc.livestack.load client ...``) with one
:class:`lustre_alloc.mapper.service.client.MapperClient`, sending ``alloc`` requests back to back (or paced) until
its end time, each under its own job id; it writes its latencies (microseconds, float32) and
its counts to files the parent reads.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lustre_alloc.livestack.stack import child_env, spawn


@dataclass(frozen=True)
class LoadResult:
    """What ``clients`` processes saw over ``seconds``. Latencies: request sent -> reply
    received, microseconds; ``errors`` = error replies, ``timeouts`` = no reply in time."""
    clients: int
    seconds: float
    requests: int
    errors: int
    timeouts: int
    fallbacks: int
    p50_us: float
    p99_us: float
    max_us: float
    error_kinds: dict[str, int]

    @property
    def rate_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def client_main(endpoint: str, seconds: float, job: str, out: str, start_at: float,
                pause_s: float, timeout_s: float, expected_bytes: int = 0) -> int:
    """One client process: allocate until ``start_at + seconds``; write ``out``.json/.f32."""
    from lustre_alloc.mapper.service.client import MapperClient, MapperError, MapperTimeout
    lat = array("f")
    counts = {"requests": 0, "errors": 0, "timeouts": 0, "fallbacks": 0}
    kinds: dict[str, int] = {}
    wait = start_at - time.time()
    if wait > 0:
        time.sleep(wait)
    end = start_at + seconds
    with MapperClient(endpoint, timeout_s=timeout_s) as client:
        n = 0
        while time.time() < end:
            n += 1
            t0 = time.perf_counter()
            try:
                layout = client.alloc(job, 2, 1 << 20, expected_bytes=expected_bytes,
                                      path=f"/load/{job}/f{n}")
            except MapperError as exc:
                counts["errors"] += 1
                kinds[f"errno {exc.errno}: {exc.reason}"[:120]] = \
                    kinds.get(f"errno {exc.errno}: {exc.reason}"[:120], 0) + 1
            except MapperTimeout:
                counts["timeouts"] += 1
            else:
                lat.append((time.perf_counter() - t0) * 1e6)
                counts["fallbacks"] += bool(layout.fallback)
            counts["requests"] += 1
            if pause_s:
                time.sleep(pause_s)
    Path(out + ".f32").write_bytes(lat.tobytes())
    Path(out + ".json").write_text(json.dumps({**counts, "error_kinds": kinds}))
    return 0


def run_load(endpoint: str, workdir: Path, *, clients: int = 16, seconds: float = 60.0,
             pause_s: float = 0.0, timeout_s: float = 5.0,
             expected_bytes: int = 64 << 20) -> LoadResult:
    """Run ``clients`` client processes against ``endpoint`` for ``seconds``; aggregate.
    Each request asks for 2 stripes of 1 MiB and announces ``expected_bytes``."""
    workdir.mkdir(parents=True, exist_ok=True)
    start_at = time.time() + 1.0 + 0.05 * clients   # all started before anyone sends
    procs = []
    for i in range(clients):
        out = str(workdir / f"client{i:02d}")
        procs.append(spawn([sys.executable, "-m", "lustre_alloc.livestack.load", "client", endpoint,
                            str(seconds), f"load.{i}", out, f"{start_at:.6f}", str(pause_s),
                            str(timeout_s), str(expected_bytes)], workdir / f"client{i:02d}.log", env=child_env()))
    for p in procs:
        p.wait(seconds + 120)
    bad = [i for i, p in enumerate(procs) if p.returncode != 0]
    if bad:
        raise RuntimeError(f"load clients {bad} failed; see {workdir}")
    lats, totals = [], {"requests": 0, "errors": 0, "timeouts": 0, "fallbacks": 0}
    kinds: dict[str, int] = {}
    for i in range(clients):
        out = workdir / f"client{i:02d}"
        lats.append(np.frombuffer(Path(str(out) + ".f32").read_bytes(), dtype=np.float32))
        counts = json.loads(Path(str(out) + ".json").read_text())
        for k, v in counts.pop("error_kinds").items():
            kinds[k] = kinds.get(k, 0) + v
        for k, v in counts.items():
            totals[k] += v
    lat = np.concatenate(lats) if lats else np.zeros(0, dtype=np.float32)
    pct = (lambda q: float(np.percentile(lat, q)) if lat.size else float("nan"))
    return LoadResult(clients, seconds, totals["requests"], totals["errors"], totals["timeouts"],
                      totals["fallbacks"], pct(50), pct(99),
                      float(lat.max()) if lat.size else float("nan"), kinds)


def rss_mib(pid: int) -> float:
    """Resident set size of a process, MiB (0 when it is gone)."""
    import psutil
    try:
        return psutil.Process(pid).memory_info().rss / (1 << 20)
    except psutil.Error:
        return 0.0


def start_background_load(endpoint: str, workdir: Path, clients: int, seconds: float,
                          pause_s: float, expected_bytes: int = 64 << 20
                          ) -> list[subprocess.Popen]:
    """Client processes that run on their own (the soak samples RSS meanwhile)."""
    workdir.mkdir(parents=True, exist_ok=True)
    start_at = time.time() + 0.5
    return [spawn([sys.executable, "-m", "lustre_alloc.livestack.load", "client", endpoint, str(seconds),
                   f"soak.{i}", str(workdir / f"soak{i:02d}"), f"{start_at:.6f}", str(pause_s),
                   "5.0", str(expected_bytes)], workdir / f"soak{i:02d}.log", env=child_env())
            for i in range(clients)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 9 and args[0] == "client":
        _, endpoint, seconds, job, out, start_at, pause_s, timeout_s, expected = args
        return client_main(endpoint, float(seconds), job, out, float(start_at), float(pause_s),
                           float(timeout_s), int(expected))
    print("usage: python -m lustre_alloc.livestack.load client ENDPOINT SECONDS JOB OUT START PAUSE "
          "TIMEOUT EXPECTED_BYTES", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
