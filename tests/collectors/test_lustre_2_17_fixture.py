"""The collectors' readers on what each configuration of the real-Lustre tier printed
(tests/fixtures/lustre/lustre-*-vm: 2.17.0 and 2.15.8 on ZFS, 2.17.0 with ldiskfs OSTs,
2.17.0 with two MDTs; captured by tests/lustre/test_collectors.py)."""
from __future__ import annotations

import pytest

from lustre_alloc.collectors.readers.job_stats import parse_job_stats
from lustre_alloc.collectors.readers.lctl_get_param import parse_get_param
from lustre_alloc.collectors.readers.lnetctl import parse_lnetctl_stats

from ..conftest import FIXTURES
from .test_lctl_get_param import assert_every_statistics_parameter_parses

V217 = FIXTURES / "lustre" / "lustre-2.17.0-vm"
V2158 = FIXTURES / "lustre" / "lustre-2.15.8-vm"
LDISKFS = FIXTURES / "lustre" / "lustre-2.17.0-ldiskfs-vm"
TWO_MDTS = FIXTURES / "lustre" / "lustre-2.17.0-2mdt-vm"
CONFIGURATIONS = (V217, V2158, LDISKFS, TWO_MDTS)
DUMPS = sorted(p for d in CONFIGURATIONS for p in d.glob("*.txt")
               if not p.name.startswith("lnetctl"))


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_parameter_lustre_printed_parses(dump):
    assert_every_statistics_parameter_parses(dump)


def test_every_configuration_has_a_fixture():
    assert all((d / "version.txt").exists() for d in CONFIGURATIONS), CONFIGURATIONS


@pytest.mark.parametrize("fixture", CONFIGURATIONS, ids=lambda p: p.name)
def test_the_mds_precreated_objects_on_every_ost(fixture):
    """osp prealloc ids as the real MDS printed them: each OST's OSP had objects ready
    (with two MDTs, on each MDT's; the minimum is what the MDS view carries)."""
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


def _write_ios_timed(fixture, osd: str) -> dict[str, int]:
    """Write I/Os in each OST's brw_stats "I/O time" histogram, through the reader."""
    from lustre_alloc.collectors.readers.brw_stats import IO_TIME, parse_brw_stats
    params = parse_get_param((fixture / f"osd-{osd}.brw_stats.txt").read_text())
    out = {}
    for name, text in params.values.items():
        if "-OST" in name:
            h = parse_brw_stats(text, name).histograms.get(IO_TIME)
            out[name] = sum(h.write) if h else 0
    return out


def test_an_ldiskfs_ost_times_its_writes_in_brw_stats_and_a_zfs_ost_does_not():
    """After the same writes (8 MiB fsynced per OST), osd-ldiskfs's brw_stats timed them
    (osd-ldiskfs/osd_io.c osd_bio_fini() sets dr_elapsed; osd_fini_iobuf() tallies it) and
    osd-zfs's holds none (osd-zfs/osd_io.c osd_write_commit(): record_end_io(osd, WRITE, 0,
    ...)): lustre_alloc/mapper/state/write_time.py takes the first, the OFD's for the second."""
    ldiskfs, zfs = _write_ios_timed(LDISKFS, "ldiskfs"), _write_ios_timed(V217, "zfs")
    assert len(ldiskfs) == 4 and all(n > 0 for n in ldiskfs.values()), ldiskfs
    assert len(zfs) == 4 and not any(zfs.values()), zfs
