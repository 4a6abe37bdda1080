"""The collectors on a real Lustre 2.17.0 server (OSS and MDS on one node): every source
read and parsed through the collectors' own code, by ``lctl get_param`` and from the
/proc and /sys files; job_stats with a jobid; a fixture captured for the host's tests."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.sources import make_source

from .conftest import FSNAME, MOUNT, N_MDTS, N_OSTS, OSD, OUT, lctl_get, lctl_set, rule, sh

CAPTURE = [
    # (file in the fixture, lctl get_param pattern): what the collectors read (2.15+)
    ("obdfilter.stats", "obdfilter.*.stats"),
    ("obdfilter.job_stats", "obdfilter.*.job_stats"),
    ("obdfilter.kbytesfree", "obdfilter.*.kbytesfree"),
    ("obdfilter.kbytestotal", "obdfilter.*.kbytestotal"),
    ("obdfilter.degraded", "obdfilter.*.degraded"),
    (f"osd-{OSD}.brw_stats", f"osd-{OSD}.*.brw_stats"),
    ("mdt.md_stats", "mdt.*.md_stats"),
    ("mdt.job_stats", "mdt.*.job_stats"),
    ("osp.max_create_count", "osp.*.max_create_count"),
    ("osp.create_count", "osp.*.create_count"),
    ("osp.prealloc_status", "osp.*.prealloc_status"),
    ("osp.prealloc_next_id", "osp.*.prealloc_next_id"),
    ("osp.prealloc_last_id", "osp.*.prealloc_last_id"),
    ("osp.prealloc_reserved", "osp.*.prealloc_reserved"),
    ("lod.stripesize", "lod.*.stripesize"),
    ("lod.stripecount", "lod.*.stripecount"),
    ("mdd.append_stripe_count", "mdd.*.append_stripe_count"),
    ("health_check", "health_check"),
    ("version", "version"),
]


def write_some(jobid_var: str = "procname_uid") -> None:
    lctl_set("jobid_var", jobid_var)
    d = Path(MOUNT) / "collector-load"
    d.mkdir(exist_ok=True)
    for i in range(N_OSTS):
        f = d / f"f{i}"
        f.unlink(missing_ok=True)
        sh("lfs", "setstripe", "-i", str(i), "-c", "1", str(f))
        sh("dd", "if=/dev/zero", f"of={f}", "bs=1M", "count=8", "conv=fsync", "status=none")


@pytest.mark.parametrize("kind", ["lctl", "files"])
@pytest.mark.parametrize("role,n", [("oss", N_OSTS), ("mds", N_MDTS)])
def test_every_target_is_read_and_parsed_through_the_collectors_code(kind, role, n):
    source = make_source(kind, role, "/", ["lctl"], ["lnetctl"])
    collector = Collector(role, source)
    collector.collect()
    write_some()
    time.sleep(1.0)                       # rates are per interval: two readings apart
    body = collector.collect()
    targets = body["targets"]
    bad = {t: v["unavailable"] for t, v in targets.items() if v.get("unavailable")}
    rule(f"{role} statistics readable through {kind}",
         f"obdfilter/mdt stats, osd-{OSD} brw_stats, job_stats (lustre-stats-formats.md)",
         "livestack's emulated servers write the 2.15 formats",
         f"{len(targets)} targets, unreadable: {bad or 'none'}", not bad and len(targets) == n)
    assert len(targets) == n and not bad, bad
    if role == "oss":
        written = sum(v["values"].get("write_bytes_per_s", 0) or 0 for v in targets.values())
        assert written > 0, targets


def test_job_stats_carry_the_jobid_lustre_sets():
    """jobid_var=procname_uid: job ids like ``dd.0`` (lustre-vm notes)."""
    source = make_source("lctl", "oss", "/", ["lctl"], ["lnetctl"])
    collector = Collector("oss", source)
    collector.collect()
    write_some()
    time.sleep(1.0)
    body = collector.collect()
    jobs = {j["job_id"] for t in body["targets"].values() for j in t["jobs"]}
    rule("job_stats job ids with jobid_var=procname_uid", "obdclass/jobid.c",
         "fixtures from 2.10/2.15 servers", f"{sorted(jobs)[:5]}", any("dd." in j for j in jobs))
    assert any(j.startswith("dd.") for j in jobs), body


def test_capture_a_fixture_of_this_servers_files():
    """What this server prints, saved for the host's tests (tests/fixtures/lustre/, one
    folder per configuration)."""
    write_some()
    dest = OUT / "fixture"
    dest.mkdir(exist_ok=True)
    for name, pattern in CAPTURE:
        p = sh("lctl", "get_param", pattern, check=False)
        assert p.returncode == 0, f"{pattern}: {p.stderr}"
        (dest / name).write_text(p.stdout)
    for name, cmd in (("lnetctl.stats", ["lnetctl", "stats", "show"]),
                      ("lnetctl.net", ["lnetctl", "net", "show", "-v"])):
        (dest / name).write_text(sh(*cmd).stdout)
    missing = sh("lctl", "get_param", "obdfilter.*.brw_stats", check=False)
    rule(f"brw_stats of an OST lives under osd-{OSD}, not obdfilter",
         f"osd-{OSD}/osd_lproc.c", "collectors read osd-*.brw_stats, then obdfilter's",
         f"obdfilter.*.brw_stats: exit {missing.returncode}", missing.returncode != 0)
    assert (dest / f"osd-{OSD}.brw_stats").read_text().count("brw_stats") >= N_OSTS
