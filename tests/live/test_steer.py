"""Steering Lustre's own allocator end to end, as processes on 127.0.0.1 over
CURVE: an emulated OST slows down; the collectors publish only its own RPC times; the
mapper's controller flags it ``degraded`` through its OSS's collector; the emulated MDS's
allocator (Lustre's QOS, restated) stops placing objects on it; when it recovers it is
returned; and a mapper killed with -9 leaves nothing flagged for longer than the lease."""
from __future__ import annotations

import threading

import pytest

from lustre_alloc.collectors.lustre_params import FileParams, degraded_param, max_create_count_param
from lustre_alloc.livestack.emulator import MDS_NAME, MIB, EmulatedCluster
from lustre_alloc.livestack.stack import EmulatorPump, LiveStack
from lustre_alloc.mapper.policies.lustre_qos import LustreQos
from lustre_alloc.mapper.policies.placement import CreateRequest
from lustre_alloc.mapper.state.cluster_state import OstFlag

from .conftest import INTERVAL_S, READY_TIMEOUT_S, small_cluster
from tests.support import wait_for

pytestmark = pytest.mark.timeout(240)
SLOW_OST = 5
LEASE_S = 4.0


class Background:
    """An application the mapper never hears of, writing a little to every OST all the
    time (so each OST's own RPC times show in brw_stats)."""

    def __init__(self, emu: EmulatedCluster, pump: EmulatorPump, bytes_per_s: float = 8 * MIB):
        self.emu, self.pump, self.rate = emu, pump, bytes_per_s
        self.size = {o.index: 0 for o in emu.osts}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            with self.pump.lock:
                for i, before in self.size.items():
                    after = before + int(self.rate * 0.1)
                    self.emu.charge([i], MIB, before, after, "background", f"bg{i}")
                    self.size[i] = after

    def start(self) -> "Background":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def test_slow_ost_is_flagged_avoided_returned_and_released_when_the_mapper_dies(tmp_path):
    _run(tmp_path, "degraded")


def test_slow_ost_is_drained_through_the_mds_collector_and_returned(tmp_path):
    """``action = drain``: the emulated MDS's collector sets its OSP device's
    ``max_create_count`` to 0 and writes the value it found back."""
    _run(tmp_path, "drain")


def _run(tmp_path, action: str) -> None:
    emu = EmulatedCluster(small_cluster(), tmp_path / "servers")
    normal = emu.by_index[SLOW_OST].bandwidth_bytes_s
    pump = EmulatorPump(emu, None, INTERVAL_S / 2).start()
    steer = {"mode": "on", "action": action, "interval_s": INTERVAL_S, "rate_smoothing": 1.0, "confirm_s": 1.0, "min_dwell_s": 2.0,
             "action_lease_s": LEASE_S, "max_fraction": 0.2, "rate_relax_s": 3600.0}
    stack = LiveStack(tmp_path, emu, interval_s=INTERVAL_S, curve=True, steer=steer)
    bg = Background(emu, pump)
    slow = emu.by_index[SLOW_OST]
    if action == "degraded":
        agent, files, param, on = slow.oss, FileParams(emu.oss_root(slow.oss)), \
            degraded_param(slow.name), "1"
        others = [degraded_param(o.name) for o in emu.osts
                  if o.oss == slow.oss and o.index != SLOW_OST]
        bit = OstFlag.DEGRADED
    else:
        agent, files, param, on = MDS_NAME, FileParams(emu.mds_root), \
            max_create_count_param(f"{slow.name}-osc-MDT0000"), "0"
        others = [max_create_count_param(f"{o.name}-osc-MDT0000") for o in emu.osts
                  if o.index != SLOW_OST]
        bit = OstFlag.NOPRECREATE

    def flagged() -> bool:
        return files.get(param) == on

    try:
        stack.start(READY_TIMEOUT_S)
        bg.start()
        evaluations = 'lustre_alloc_mapper_steer_evaluations_total{fsname="demofs"}'
        first = stack.metrics().get(evaluations, 0.0)
        wait_for(lambda: stack.metrics().get(evaluations, 0.0) >= first + 3, 30,
                 "three steering evaluations under the uniform load")
        assert not flagged()                               # uniform: no action
        emu.by_index[SLOW_OST].bandwidth_bytes_s = normal / 50
        wait_for(flagged, 30, "the slow OST flagged degraded through its collector")
        assert not [p for p in others if files.get(p) == on]           # only that OST
        def lod_sees_it():                                  # at the pump's next flush
            with pump.lock:
                return emu.snapshot()
        wait_for(lambda: lod_sees_it().ost_by_index()[SLOW_OST].flags & bit, 10,
                 "the emulated MDS's LOD to see the flag")
        snap = lod_sees_it()
        qos = LustreQos(seed=1)
        placed = [qos.allocate(snap, CreateRequest(jobid="unmanaged", stripe_count=1)).osts[0]
                  for _ in range(200)]
        assert SLOW_OST not in placed and len(set(placed)) == len(emu.osts) - 1
        m = stack.metrics()
        assert m[f'lustre_alloc_mapper_steered_osts{{fsname="demofs",kind="{action}"}}'] == 1.0

        emu.by_index[SLOW_OST].bandwidth_bytes_s = normal   # recovered: returned
        wait_for(lambda: not flagged(), 30, "the recovered OST returned")

        emu.by_index[SLOW_OST].bandwidth_bytes_s = normal / 50
        wait_for(flagged, 30, "the OST flagged again")
        stack.kill("mapper")
        wait_for(lambda: not flagged(), LEASE_S + 30, "the lease to expire")

        def restores() -> list[dict]:
            return [e for e in stack.log_events(f"collector-{agent}")
                    if e.get("event") == "steer_restored"]
        # the agent writes the value back before it logs that it did
        wait_for(lambda: len(restores()) >= 2, 10, "the agent to log its second restore")
        # the last restore is the agent's own: the dead mapper released nothing
        assert restores()[-1]["why"] == "lease expired", restores()
    finally:
        bg.stop()
        pump.stop()
        stack.stop()
