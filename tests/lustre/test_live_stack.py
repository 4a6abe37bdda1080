"""The whole stack on a real Lustre 2.17.0 server: the broker, a collector per role reading
Lustre through ``lctl`` (the OSS's four OSTs, the MDS's MDT and OSP devices), the mapper
subscribed to the broker, and files created under the shim with the mapper's layouts."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from common.record_file import read_records
from livestack.stack import command, free_ports, spawn, terminate_all

from .conftest import FSNAME, MOUNT, N_OSTS, SHIM, rule, wait_for
from .test_shim import first_osts, layout

INTERVAL_S = 2.0


def metrics(port: int) -> dict[str, float]:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


@pytest.fixture
def stack(tmp_path):
    """Broker, OSS and MDS collectors (lctl), mapper (mcmf); torn down after."""
    front, back, snap, mapper, mport = free_ports(5)
    ep = {k: f"tcp://127.0.0.1:{p}" for k, p in
          (("front", front), ("back", back), ("snap", snap), ("mapper", mapper))}
    procs = {"broker": spawn([*command("lustre-alloc-broker", "collectors.broker_cli"),
                              "--frontend", ep["front"], "--backend", ep["back"],
                              "--snapshot", ep["snap"], "--heartbeat", "0.5"],
                             tmp_path / "broker.log")}
    for role in ("oss", "mds"):
        procs[role] = spawn([*command("lustre-alloc-collector", "collectors.cli"),
                             "--role", role, "--broker", ep["front"], "--source", "lctl",
                             "--interval", str(INTERVAL_S), "--host", f"lustre-vm-{role}",
                             "--steer-journal", str(tmp_path / f"{role}-journal.json")],
                            tmp_path / f"collector-{role}.log")
    conf = tmp_path / "mapper.toml"
    conf.write_text("\n".join([
        "[mapper]", f'bind = "{ep["mapper"]}"', f'broker_backend = "{ep["back"]}"',
        f'broker_snapshot = "{ep["snap"]}"', 'policy = "mcmf"',
        f'state_file = "{tmp_path / "state.json"}"', f"metrics_port = {mport}",
        'metrics_addr = "127.0.0.1"']) + "\n")
    procs["mapper"] = spawn([*command("lustre-alloc-mapper", "mapper.service.cli"),
                             "--config", str(conf)], tmp_path / "mapper.log")
    yield {"mapper": ep["mapper"], "metrics_port": mport, "procs": procs, "logs": tmp_path}
    terminate_all(list(procs.values()))


def test_the_mapper_learns_every_ost_from_the_collectors_and_places_files(stack, tmp_path):
    fs = f'fsname="{FSNAME}"'

    def ready():
        for name, p in stack["procs"].items():
            assert p.poll() is None, (name, (stack["logs"] / f"{name}.log").read_text()[-2000:]
                                      if (stack["logs"] / f"{name}.log").exists() else "")
        m = metrics(stack["metrics_port"])
        return m.get(f'lustre_alloc_mapper_osts{{{fs},state="usable"}}') == N_OSTS
    t0 = time.monotonic()
    wait_for(ready, timeout_s=300, what="the mapper serving every OST of the real Lustre")
    learned_s = time.monotonic() - t0
    work = Path(MOUNT) / "live-stack"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir()
    record = tmp_path / "record"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUSTRE_ALLOC_")}
    env.update(LD_PRELOAD=str(SHIM), LUSTRE_ALLOC_MAPPER=stack["mapper"],
               LUSTRE_ALLOC_RECORD=str(record), LUSTRE_ALLOC_TIMEOUT_MS="5000")
    code = (f"import os\nfor i in range(40):\n"
            f"    with open('{work}/f%d' % i, 'wb') as f: f.write(b'x' * 65536)\n")
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
    recs = read_records(record)
    placed = [r for r in recs if r["result"] == "layout" and r["policy"]]
    osts = {o for i in range(40) for o in first_osts(layout(work / f"f{i}"))}
    rule("the collectors read a 2.17.0 OSS and MDS through lctl and the mapper learns every "
         "OST through the broker", "collectors/, mapper/state",
         "livestack's emulated servers (files)",
         f"{N_OSTS} OSTs usable after {learned_s:.0f} s; {len(placed)} of {len(recs)} files "
         f"placed by {sorted({r['policy'] for r in placed})}, on OSTs {sorted(osts)}",
         len(placed) == 40)
    assert len(recs) == 40 and len(placed) == 40, recs[:3]
    for r in placed:
        assert r["osts"] == r["asked"], r
    assert len(osts) == N_OSTS           # every OST used
