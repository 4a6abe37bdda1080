"""A hostile client against the real mapper process (CURVE, real sockets): 10,000 new job ids
from one peer leave other jobs' learned state intact, oversize job ids are refused, absurd
``expected_bytes`` clipped, a flood is rate limited with EBUSY, and a well-behaved client is
answered within the shim's 50 ms throughout, also while 4,096 learned applications are being
saved. The attacker runs in its own process so the well-behaved client's timings are not its
GIL's."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lustre_alloc.common.curve import CurveClient, generate_keys
from lustre_alloc.mapper.predictor.markov import MarkovPredictor
from lustre_alloc.mapper.predictor.markov_store import load_predictor, save_predictor
from lustre_alloc.mapper.service.client import MapperClient, MapperError

from .conftest import PROJECT, PYTHON, free_port, log_events, spawn_mapper, stop_process, wait_ready
from tests.support import wait_for

pytestmark = pytest.mark.timeout(120)
SHIM_TIMEOUT_S = 0.050
APPS = 4096
VICTIMS = [f"victim.{i}" for i in range(20)]
PATTERN = [1 << 28, 1 << 28, 1 << 30, 1 << 26]

ATTACKER = r'''
import json, sys, errno, zmq
from lustre_alloc.common.curve import CurveClient
from lustre_alloc.mapper.service import wire
endpoint, secret, server_key, out = sys.argv[1:5]
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER); s.linger = 0
CurveClient(secret, server_key).apply(s); s.connect(endpoint)
counts = {}
def send(rid, job, expected=1 << 20):
    s.send_multipart([b"", wire.encode_request(rid, job, 2, 1 << 20, expected)])
def drain(n):
    for _ in range(n):
        if not s.poll(5000):
            counts["timeout"] = counts.get("timeout", 0) + 1; continue
        r = wire.decode_reply(s.recv_multipart()[-1])
        key = "ok" if r["ok"] else errno.errorcode.get(r["errno"], str(r["errno"]))
        counts[key] = counts.get(key, 0) + 1
rid = 1
send(rid, "x" * 300); drain(1); counts["oversize"] = counts.pop("EINVAL", 0)
for i in range(4):
    rid += 1; send(rid, "greedy.0", (1 << 63) - 1)
drain(4); counts["absurd_ok"] = counts.pop("ok", 0)
for start in range(0, 10000, 250):                 # 10,000 new job ids, 250 in flight
    for i in range(start, start + 250):
        rid += 1; send(rid, f"evil.{i}")
    drain(250)
json.dump(counts, open(out, "w"))
'''


def write_state(path):
    """4,096 learned applications; the victims are the most recent (they run right now)."""
    p = MarkovPredictor(max_apps=APPS)
    jobs = [f"old.{i}" for i in range(APPS - len(VICTIMS))] + VICTIMS
    for job in jobs:
        for size in PATTERN * 2:
            p.observe(job, size)
    save_predictor(p, path)
    return p


def test_hostile_client_cannot_evict_others_or_stall_the_well_behaved(tmp_path):
    keys = tmp_path / "keys"
    generate_keys(keys, "mapper")
    allowed = tmp_path / "clients"
    allowed.mkdir()
    for name in ("victim", "attacker"):
        generate_keys(keys, name)
        shutil.copy(keys / f"{name}.key", allowed / f"{name}.key")
    state = tmp_path / "state.json"
    before = write_state(state)
    port, metrics_port = free_port(), free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    config = tmp_path / "mapper.toml"
    config.write_text(f'''[development]
static_cluster = "4x2"

[mapper]
bind = "{endpoint}"
policy = "mcmf"
state_file = "{state}"
save_interval_s = 0.25
metrics_port = {metrics_port}
metrics_addr = "127.0.0.1"
require_curve = true
serve_curve_secret_key = "{keys / 'mapper.key_secret'}"
serve_curve_authorized_keys = "{allowed}"
peer_requests_per_s = 2000.0
''')
    log = tmp_path / "mapper.log"
    proc = spawn_mapper(["--config", str(config)], log)
    victim_curve = CurveClient(str(keys / "victim.key_secret"), str(keys / "mapper.key"))
    latencies: list[float] = []
    phase = ["control"]
    by_phase: dict[str, list[float]] = {"control": [], "attack": []}
    timeouts = {"control": 0, "attack": 0}
    stop = threading.Event()
    try:
        with MapperClient(endpoint, timeout_s=0.2, curve=victim_curve) as c:
            deadline = time.monotonic() + 15
            while True:
                try:
                    c.ping()
                    break
                except Exception:  # noqa: BLE001 - starting
                    assert time.monotonic() < deadline and proc.poll() is None, log.read_text()

        def saves_logged() -> int:
            return sum(e.get("event") == "state_saved" for e in log_events(log))

        def well_behaved():
            with MapperClient(endpoint, timeout_s=SHIM_TIMEOUT_S, curve=victim_curve) as c:
                i = 0
                while not stop.is_set():
                    t0 = time.perf_counter()
                    now = phase[0]
                    try:
                        c.alloc(VICTIMS[i % len(VICTIMS)], 2, 1 << 20, PATTERN[(i // 20) % 4])
                    except Exception:  # noqa: BLE001 - a timeout is what the shim would see
                        timeouts[now] += 1
                    by_phase[now].append(time.perf_counter() - t0)
                    i += 1
                    time.sleep(0.002)
        thread = threading.Thread(target=well_behaved)
        thread.start()
        # control: the same client, saves, no attacker, long enough to judge its latency
        wait_for(lambda: len(by_phase["control"]) >= 500 and saves_logged() >= 2, 30,
                 "500 control requests and two saves")
        phase[0] = "attack"
        out = tmp_path / "attacker.json"
        attack_started = time.monotonic()
        attacker = subprocess.run(
            [PYTHON, "-c", ATTACKER, endpoint, str(keys / "attacker.key_secret"),
             str(keys / "mapper.key"), str(out)], cwd=PROJECT, timeout=90,
            env={"PYTHONPATH": str(PROJECT), "PATH": "/usr/bin:/bin"},
            # a real attacker runs on its own node; here it shares the mapper's cores, so it
            # runs at the lowest CPU priority to measure the mapper, not the CPU contention
            preexec_fn=lambda: os.nice(19))
        attack_s = time.monotonic() - attack_started
        saves_after_flood = saves_logged() + 2
        wait_for(lambda: saves_logged() >= saves_after_flood, 30, "two saves after the flood")
        stop.set()
        thread.join(10)
        assert attacker.returncode == 0
        counts = json.loads(out.read_text())
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    finally:
        stop.set()
        code = stop_process(proc)
    assert code == 0, log.read_text()[-2000:]
    samples = {s.name + json.dumps(s.labels, sort_keys=True): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}

    # oversize job id refused; absurd expected_bytes answered and clipped; none timed out
    assert counts["oversize"] == 1 and counts["absurd_ok"] == 4
    assert samples['lustre_alloc_mapper_expected_bytes_clipped_total{}'] >= 4
    assert counts.get("timeout", 0) == 0
    assert counts.get("ok", 0) + counts.get("EBUSY", 0) == 10_000

    # learned state of the other jobs intact: at most the attacker's new-application budget
    # (60 at once, refilled at 1/s) + its overflow id were admitted, so at most that many
    # old apps evicted
    budget = 60 + int(attack_s + 2)
    after = load_predictor(state)
    evil = [j for j in after.jobids() if j.startswith(("evil.", "overflow:", "greedy."))]
    assert len(evil) <= budget + 1
    for job in VICTIMS:
        assert job in after and after.app_info(job).requests >= before.app_info(job).requests
    old_left = sum(1 for j in after.jobids() if j.startswith("old."))
    assert old_left >= APPS - len(VICTIMS) - len(evil)
    # every answered evil request past the budget was learned under the overflow id
    assert samples['lustre_alloc_mapper_peer_limited_total{"limit": "new_apps"}'] >= \
        counts["ok"] - budget

    # saves of 4,096 apps happened while the well-behaved client was served
    saves = [e for e in log_events(log) if e.get("event") == "state_saved"]
    assert len(saves) >= 3
    p99 = {}
    for name, lat in by_phase.items():
        lat.sort()
        p99[name] = lat[int(0.99 * (len(lat) - 1))]
        print(f"well-behaved, {name}: {len(lat)} requests, p50 {lat[len(lat) // 2] * 1e3:.2f} ms,"
              f" p99 {p99[name] * 1e3:.2f} ms, max {lat[-1] * 1e3:.2f} ms, "
              f"timeouts {timeouts[name]}")
    print(f"attacker {counts}; saves {len(saves)}")
    # The shim's timeout is the bar. On a machine so loaded that the same client already
    # misses it with no attacker (control phase, same run), the mapper is not what it
    # measures: the bar is then twice the control's p99 (a ratio, not an absolute time).
    assert len(by_phase["attack"]) > 50
    assert p99["attack"] < max(SHIM_TIMEOUT_S, 2 * p99["control"]), p99
