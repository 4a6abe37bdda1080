"""The mapper applies the MDS's own view of the OSTs: an OST drained with
``max_create_count=0`` or deactivated on the MDS is never proposed once the MDS sample is in
(within one stats interval), and pools follow the ``lod`` samples; over a real broker and the
real request socket, and from the real MDS collector's output."""
from __future__ import annotations

import errno
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest
import zmq

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.publisher import Publisher
from lustre_alloc.collectors.readers.host_load import HostLoad
from lustre_alloc.collectors.sources import LctlSource
from lustre_alloc.mapper.service.client import MapperClient, MapperError
from lustre_alloc.mapper.service.server import MapperService
from lustre_alloc.mapper.state.ost_health import is_usable, unusable_reason
from lustre_alloc.mapper.state.state_store import StateStore

from .conftest import make_service
from .test_filesystems import KIB, body, ost
from tests.support import wait_for

pytestmark = pytest.mark.timeout(60)
INTERVAL = 0.2
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lustre"


class FixedLoad:
    def read(self):
        return HostLoad(12.0, 30.0, 0.5, 0.5, 0.5)


def mds_body(drained=(), inactive=(), pools=None):
    osts = {f"fs-OST{i:04x}": {"fsname": "fs", "index": i, "active": i not in inactive,
                               "max_create_count": 0 if i in drained else 20000,
                               "prealloc_status": 0} for i in range(4)}
    return {"server": {"values": {"cpu_percent": 5.0}, "unavailable": {}, "osts": osts,
                       "pools": {"fs": pools or {}}}, "targets": {}}


@contextmanager
def fed_by_mds(**settings) -> Iterator[tuple[MapperService, Callable[[dict], None]]]:
    """A round-robin mapper of the file system ``fs`` with an embedded broker, fed by one
    OSS (OSTs 0-3, half full) and one MDS collector: yields the service and
    ``publish(mds_sample)``, which publishes both servers' samples now."""
    svc = make_service(policy="round_robin", fsnames=["fs"], embed_broker=True,
                       broker_frontend="tcp://127.0.0.1:*",
                       broker_backend_bind="tcp://127.0.0.1:*",
                       broker_snapshot_bind="tcp://127.0.0.1:*", **settings)
    ctx = zmq.Context()
    oss = Publisher(svc.broker_endpoints[0], "oss", "oss0", context=ctx)
    mds = Publisher(svc.broker_endpoints[0], "mds", "mds0", context=ctx)
    oss_sample = body(*(ost("fs", i, KIB // 2) for i in range(4)))

    def publish(mds_sample: dict) -> None:
        now = time.time()
        oss.publish(now, INTERVAL, oss_sample)
        mds.publish(now, INTERVAL, mds_sample)
    try:
        yield svc, publish
    finally:
        oss.close()
        mds.close()
        svc.stop()
        ctx.destroy(linger=0)


def test_drained_and_inactive_osts_are_never_proposed_and_pools_follow_lod():
    with fed_by_mds() as (svc, publish):
        with MapperClient(svc.endpoint, timeout_s=2) as c:
            wait_for(lambda: publish(mds_body(pools={"flash": [0, 1]})) or
                     svc.store.ost_count == 4 and svc.store.pools_from_mds, what="state")
            assert sorted(c.alloc("a.1", -1).osts) == [0, 1, 2, 3]
            assert set(c.alloc("a.1", 2, pool="flash").osts) == {0, 1}

            drained = [None, None, "ENOBUFS", "inactive"]
            wait_for(lambda: publish(mds_body(drained={2}, inactive={3},
                                              pools={"flash": [2, 3, 1]})) or
                     [unusable_reason(o) for o in svc.store.snapshot.osts] == drained,
                     what="the MDS's drained and inactive OSTs in the state")
            for _ in range(50):
                assert sorted(c.alloc("a.1", -1).osts) == [0, 1]
                assert c.alloc("a.1", 1, pool="flash").osts == (1,)
            snap = svc.store.snapshot
            assert [unusable_reason(o) for o in snap.osts] == [None, None, "ENOBUFS", "inactive"]
            with pytest.raises(MapperError) as exc:       # a pool the MDS no longer lists
                c.alloc("a.1", 1, pool="gone")
            assert exc.value.errno == errno.EINVAL

            wait_for(lambda: publish(mds_body(pools={"flash": [2, 3, 1]})) or  # undrained,
                     all(is_usable(o) for o in svc.store.snapshot.osts),   # reactivated
                     what="every OST usable again")
            assert sorted(c.alloc("a.1", -1).osts) == [0, 1, 2, 3]
            assert set(c.alloc("a.1", 3, pool="flash").osts) == {1, 2, 3}


def test_real_mds_collector_output_drives_usability(tmp_path):
    dump = tmp_path / "dump.txt"
    dump.write_text((FIX / "ddn-lctl-2.14-2.15" / "osp.txt").read_text() +
                    (FIX / "constructed" / "mds-prealloc-pools.txt").read_text())
    script = tmp_path / "lctl"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(dump)!r}).read())\n")
    script.chmod(0o755)
    mds_server = Collector("mds", LctlSource("mds", [str(script)], []),
                           host_load=FixedLoad()).collect()["server"]
    store = StateStore(fsname="tesfs")
    oss_sample = body(*(ost("tesfs", i, KIB // 2) for i in range(8)))
    store.apply("oss", "oss0", 100.0, 5.0, oss_sample["server"], oss_sample["targets"])
    store.apply("mds", "mds0", 100.0, 5.0, mds_server, {})
    assert [o.index for o in store.snapshot.osts if is_usable(o)] == [0, 2, 4, 6, 7]
    assert [unusable_reason(o) for o in store.snapshot.osts if not is_usable(o)] == [
        "inactive", "ENOSPC", "inactive"]         # OST1 inactive+drained, 3 -28, 5 -19
    assert store.snapshot.pools == {"flash": frozenset({0, 2, 4}),
                                    "archive": frozenset({6, 7}), "empty": frozenset()}
