"""The primary's learned state survives restarts: saved atomically on SIGTERM and
periodically, restored at start; an unreadable file is set aside, never fatal."""
from __future__ import annotations

import json

import pytest

from lustre_alloc.mapper.service.client import MapperClient
from lustre_alloc.mapper.policies.registry import POLICIES
from tests.support import wait_for

from .conftest import (JobCounter, free_port, log_events, make_service, spawn_mapper,
                       stop_process, wait_ready)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def job_counter_registered():
    POLICIES["job_counter"] = JobCounter
    yield
    POLICIES.pop("job_counter", None)


def test_sigterm_saves_learned_state_atomically(tmp_path):
    state = tmp_path / "state" / "mapper-state.json"
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    proc = spawn_mapper(["--bind", endpoint, "--static-cluster", "4x2", "--policy", "job_counter",
                         "--state-file", str(state)], tmp_path / "m.log", with_test_policy=True)
    try:
        wait_ready(endpoint, proc)
        with MapperClient(endpoint) as c:
            for _ in range(5):
                c.alloc("ior.7", 2)
            c.alloc("hacc.1", 1)
        assert not state.exists()                 # nothing saved before the signal
    finally:
        assert stop_process(proc) == 0            # SIGTERM: clean exit
    assert json.loads(state.read_text()) == {"ior.7": 5, "hacc.1": 1}
    assert [p.name for p in state.parent.iterdir()] == ["mapper-state.json"]  # no temp left
    events = [e["event"] for e in log_events(tmp_path / "m.log")]
    assert events[-2:] == ["state_saved", "mapper_stop"]


def test_restart_restores_the_learned_state(tmp_path, job_counter_registered):
    state = tmp_path / "mapper-state.json"
    first = make_service(static_cluster="4x2", policy="job_counter", state_file=str(state))
    with MapperClient(first.endpoint) as c:
        before = [c.alloc("ior.7", 1).osts for _ in range(3)]
    first.stop()
    assert before == [(0,), (1,), (2,)]
    second = make_service(static_cluster="4x2", policy="job_counter", state_file=str(state))
    try:
        assert second.policy.primary.counts == {"ior.7": 3}
        with MapperClient(second.endpoint) as c:
            assert c.alloc("ior.7", 1).osts == (3,)   # continues where the first left off
    finally:
        second.stop()


def test_state_is_saved_periodically(tmp_path, job_counter_registered):
    state = tmp_path / "s.json"
    svc = make_service(static_cluster="2x2", policy="job_counter", state_file=str(state),
                       save_interval_s=0.1)
    try:
        with MapperClient(svc.endpoint) as c:
            c.alloc("a", 1)
        wait_for(lambda: state.exists() and "a" in state.read_text(), 5, "a periodic save")
        assert json.loads(state.read_text()) == {"a": 1}
    finally:
        svc.stop()


def test_unreadable_state_is_set_aside_and_the_mapper_starts_fresh(tmp_path,
                                                                   job_counter_registered):
    state = tmp_path / "s.json"
    state.write_text("{not json")
    svc = make_service(static_cluster="2x2", policy="job_counter", state_file=str(state))
    try:
        assert svc.policy.primary.counts == {}
        assert (tmp_path / "s.json.bad").read_text() == "{not json"
        with MapperClient(svc.endpoint) as c:
            assert c.alloc("a", 1).osts == (0,)
    finally:
        svc.stop()
    assert json.loads(state.read_text()) == {"a": 1}


def test_failed_save_keeps_the_previous_file_and_keeps_serving(tmp_path, job_counter_registered):
    state = tmp_path / "s.json"
    state.write_text('{"old": 1}')
    svc = make_service(static_cluster="2x2", policy="job_counter", state_file=str(state))
    try:
        svc.policy.primary.save_state = lambda path: (_ for _ in ()).throw(OSError("disk full"))
        assert svc.save_state() is False
        assert state.read_text() == '{"old": 1}' and list(tmp_path.iterdir()) == [state]
        with MapperClient(svc.endpoint) as c:
            assert c.alloc("a", 1).osts
    finally:
        svc.stop()


def test_the_mapper_process_keeps_the_ost_speeds_it_learned_across_a_restart(tmp_path):
    # the real lustre-alloc-mapper process, mcmf, its state file: saved on SIGTERM with the
    # OST rate memory, restored by the next process, which then avoids the slow OST
    state = tmp_path / "mapper-state.json"

    def serve():
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        proc = spawn_mapper(["--bind", endpoint, "--static-cluster", "4x2", "--policy", "mcmf",
                             "--state-file", str(state)], tmp_path / "m.log")
        wait_ready(endpoint, proc)
        return endpoint, proc

    def placed(endpoint) -> set[int]:
        with MapperClient(endpoint) as c:
            return {i for k in range(8) for i in c.alloc("ior.7", 2, path=f"/r/f{k}").osts}

    endpoint, proc = serve()
    try:
        assert 3 in placed(endpoint)                 # nothing measured: Lustre's RR order
    finally:
        assert stop_process(proc) == 0
    doc = json.loads(state.read_text())
    assert doc["ost_rates"]["version"] == 1 and doc["format"] == "lustre-alloc-markov-predictor"
    # what a mapper that had measured OST 3 at 1/49 of the others would have saved
    rates = {str(i): 5e8 / (49.475 if i == 3 else 1.0) for i in range(8)}
    doc["ost_rates"].update(rate_bytes_s=rates, last_look_bytes_s=rates)
    state.write_text(json.dumps(doc))
    endpoint, proc = serve()
    try:
        assert 3 not in placed(endpoint)
    finally:
        assert stop_process(proc) == 0
    events = [e.get("event") for e in log_events(tmp_path / "m.log")]
    assert "state_loaded" in events
