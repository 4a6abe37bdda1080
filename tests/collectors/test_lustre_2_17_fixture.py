"""The collectors' readers on what Lustre 2.17.0 and 2.15.8 printed in the real-Lustre tier
(tests/fixtures/lustre/lustre-2.17.0-vm, lustre-2.15.8-vm, captured by
tests/lustre/test_collectors.py)."""
from __future__ import annotations

import pytest

from lustre_alloc.collectors.readers.job_stats import parse_job_stats
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param
from lustre_alloc.collectors.readers.lnetctl import parse_lnetctl_stats

from ..conftest import FIXTURES
from .test_lctl_get_param import assert_every_statistics_parameter_parses

V217 = FIXTURES / "lustre" / "lustre-2.17.0-vm"
V2158 = FIXTURES / "lustre" / "lustre-2.15.8-vm"
DUMPS = sorted(p for d in (V217, V2158) for p in d.glob("*.txt")
               if not p.name.startswith("lnetctl"))


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_parameter_lustre_printed_parses(dump):
    assert_every_statistics_parameter_parses(dump)


@pytest.mark.parametrize("fixture", [V217, V2158], ids=lambda p: p.name)
def test_the_mds_precreated_objects_on_every_ost(fixture):
    """osp prealloc ids as the real MDS printed them: each OST's OSP had objects ready."""
    from lustre_alloc.collectors.readers.osp import combine_osp, parse_osp_int
    values = {}
    for leaf in ("prealloc_next_id", "prealloc_last_id", "prealloc_reserved"):
        params = parse_get_param((fixture / f"osp.{leaf}.txt").read_text())
        values[leaf] = {name.split(".")[1]: parse_osp_int(text)
                        for name, text in params.values.items()}
    osts = combine_osp(values)
    assert len(osts) == 4 and all(o.precreated_objects > 0 for o in osts.values()), osts


def test_the_ost_job_stats_name_the_dd_job_and_its_bytes():
    """jobid_var=procname_uid: ``dd.0`` wrote 8 MiB to each OST."""
    params = parse_get_param((V217 / "obdfilter.job_stats.txt").read_text())
    for name, text in params.values.items():
        jobs = parse_job_stats(text, name).jobs
        assert "dd.0" in jobs, (name, sorted(jobs))
        assert jobs["dd.0"].counters["write_bytes"].sum >= 8 << 20


def test_lnetctl_stats_of_2_17_parse():
    stats = parse_lnetctl_stats((V217 / "lnetctl.stats.txt").read_text())
    assert stats
