"""A failover as the mapper sees it live: the emulated OSS's OST directories move to its
partner's proc/sys root, the real collectors read both roots, and the state store marks
the moved OSTs as served by their failover partner, whichever OSS's sample comes first."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from lustre_alloc.collectors.collector import Collector
from lustre_alloc.collectors.readers.host_load import HostLoad
from lustre_alloc.collectors.sources import FileSource
from lustre_alloc.livestack.emulator import EmulatedCluster
from lustre_alloc.mapper.state.state_store import StateStore
from lustre_alloc.simulator.cluster import MIB, SimCluster


class FixedLoad:
    def read(self):
        return HostLoad(10.0, 20.0, 0.5, 0.5, 0.5)


def _emulated(tmp_path) -> EmulatedCluster:
    cl = SimCluster(oss_names=["oss0", "oss1"], ost_index=np.arange(4),
                    ost_oss=np.array([0, 0, 1, 1]), capacity_bytes=np.full(4, float(1 << 40)),
                    used_bytes=np.zeros(4), bandwidth_bytes_s=np.full(4, 400.0 * MIB))
    return EmulatedCluster(cl, tmp_path)


@pytest.mark.parametrize("order", [("oss0", "oss1"), ("oss1", "oss0")])
def test_the_store_follows_a_failover_and_a_failback_through_the_collectors(tmp_path, order):
    emu = _emulated(tmp_path)
    collectors = {n: Collector("oss", FileSource(emu.oss_root(n)), host_load=FixedLoad())
                  for n in emu.oss_names}
    store = StateStore()
    clock = itertools.count(5.0, 5.0)

    def sample_all():
        t = next(clock)
        for name in order:
            got = collectors[name].collect()
            store.apply("oss", name, t, 5.0, got["server"], got["targets"])
        return {o.index: o for o in store.current(t).osts}

    osts = sample_all()
    assert [(osts[i].oss, osts[i].failed_over) for i in range(4)] == \
        [("oss0", False), ("oss0", False), ("oss1", False), ("oss1", False)]
    moved = emu.fail_over("oss1", "oss0")
    assert moved == [2, 3]
    osts = sample_all()              # oss1's collector reports 2 and 3 gone, oss0's has them
    for i in (2, 3):
        assert (osts[i].oss, osts[i].failed_over, osts[i].active) == ("oss0", True, True)
    assert not osts[0].failed_over and not osts[1].failed_over
    # whichever order the two samples arrived in, the old server's "gone" report did not
    # make the OSTs unusable once the partner had published them
    assert store.superseded_reports == (2 if order == ("oss0", "oss1") else 0)
    emu.fail_back(moved, "oss1")
    osts = sample_all()
    assert [(osts[i].oss, osts[i].failed_over, osts[i].active) for i in (2, 3)] == \
        [("oss1", False, True), ("oss1", False, True)]
