"""The MDS collector reads the OSP parameters and the LOD pools (real ``osp.txt`` dump from
Lustre 2.14 plus a constructed prealloc/pools dump, see tests/fixtures/lustre/SOURCES.md),
through both access paths: an ``lctl get_param`` dump and a /sys + /proc file tree."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.readers.host_load import HostLoad
from lustre_alloc.collectors.readers.lod_pools import parse_pool
from lustre_alloc.collectors.readers.osp import parse_osp_device, parse_osp_int
from lustre_alloc.collectors.sources import FileSource, LctlSource
from lustre_alloc.common.errors import LodPoolError, OspParamError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lustre"
OSP = FIX / "ddn-lctl-2.14-2.15" / "osp.txt"
CONSTRUCTED = FIX / "constructed" / "mds-prealloc-pools.txt"


class FixedLoad:
    def read(self):
        return HostLoad(12.0, 30.0, 0.5, 0.5, 0.5)


def expected_osts():
    return {
        "tesfs-OST0001": {"fsname": "tesfs", "index": 1, "active": False, "max_create_count": 0,
                          "prealloc_status": 0, "precreated_objects": None},
        "tesfs-OST0003": {"fsname": "tesfs", "index": 3, "active": True,
                          "max_create_count": 16384, "prealloc_status": -28,
                          "precreated_objects": None},
        "tesfs-OST0005": {"fsname": "tesfs", "index": 5, "active": True,
                          "max_create_count": 16384, "prealloc_status": -19,
                          "precreated_objects": None}}


def check(server):
    osts = server["osts"]
    assert sorted(osts) == [f"tesfs-OST{i:04x}" for i in range(8)]  # MDT-MDT OSPs skipped
    for name, want in expected_osts().items():
        assert osts[name] == want
    assert osts["tesfs-OST0000"]["active"] is True
    # last - (next - 1) - reserved: osp_statfs()'s os_fprecreated
    assert [osts[f"tesfs-OST000{i}"]["precreated_objects"] for i in (0, 2, 4)] == [32, 0, 30]
    assert server["pools"] == {"tesfs": {"archive": [6, 7], "empty": [], "flash": [0, 2, 4]}}


def test_lctl_dump(tmp_path):
    dump = tmp_path / "dump.txt"
    dump.write_text(OSP.read_text() + CONSTRUCTED.read_text())
    script = tmp_path / "lctl"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(dump)!r}).read())\n")
    script.chmod(0o755)
    collector = Collector("mds", LctlSource("mds", [str(script)], []), host_load=FixedLoad())
    check(collector.collect()["server"])


def test_file_tree(tmp_path):
    # the same values laid out as on a 2.15 MDS: /sys/fs/lustre/osp/<dev>/<leaf>,
    # /proc/fs/lustre/lod/<lod>/pools/<pool>
    for line in (OSP.read_text() + CONSTRUCTED.read_text()).splitlines():
        if line.startswith("osp."):
            param, _, value = line.partition("=")
            _, device, leaf = param.split(".")
            d = tmp_path / "sys/fs/lustre/osp" / device
            d.mkdir(parents=True, exist_ok=True)
            (d / leaf).write_text(value + "\n")
    text = CONSTRUCTED.read_text().split("lod.")[1:]
    for chunk in text:
        head, _, members = chunk.partition("=\n")
        device, _, pool = head.partition(".pools.")
        d = tmp_path / "proc/fs/lustre/lod" / device / "pools"
        d.mkdir(parents=True, exist_ok=True)
        (d / pool).write_text(members)
    server = Collector("mds", FileSource(tmp_path), host_load=FixedLoad()).collect()["server"]
    check(server)


def test_readers_refuse_garbage_with_the_place():
    assert parse_osp_device("tesfs-MDT0001-osp-MDT0000") is None
    assert parse_osp_device("tesfs-OST000a-osc-MDT0001").index == 10
    assert parse_osp_int("-28\n") == -28
    with pytest.raises(OspParamError, match="x.active"):
        parse_osp_int("yes", "x.active")
    with pytest.raises(LodPoolError, match=":2:"):
        parse_pool("a-OST0000_UUID\nnot a uuid\n", "lod.a-MDT0000-mdtlov.pools.p")
    with pytest.raises(LodPoolError, match="file system"):
        parse_pool("a-OST0000_UUID\nb-OST0001_UUID\n")


def test_a_missing_source_is_named_not_fatal(tmp_path):
    server = Collector("mds", FileSource(tmp_path), host_load=FixedLoad()).collect()["server"]
    assert server["osts"] == {} and server["pools"] == {}
    assert server["unavailable"]["osp.max_create_count"].startswith("missing")
    assert server["unavailable"]["lod_pools"].startswith("missing")


def test_precreated_objects_take_the_fewest_over_the_mdts_and_skip_a_wrapped_sequence():
    from lustre_alloc.collectors.readers.osp import combine_osp, precreated_objects
    assert precreated_objects(2, 33, 0) == 32 and precreated_objects(34, 33, None) == 0
    assert precreated_objects(1, 70000, 0) == 70000 and precreated_objects(5, 3, 0) is None
    view = combine_osp({"prealloc_next_id": {"fs-OST0001-osc-MDT0000": 10,
                                             "fs-OST0001-osc-MDT0001": 40},
                        "prealloc_last_id": {"fs-OST0001-osc-MDT0000": 41,
                                             "fs-OST0001-osc-MDT0001": 41}})
    assert view["fs-OST0001"].precreated_objects == 2
