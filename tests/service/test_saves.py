"""Durable saves without stalls: stale temporaries of a crashed save are removed at start, a
periodic save is written by the writer thread from a snapshot while the loop keeps serving,
the directory is fsynced after the rename, and a damaged record costs only itself."""
from __future__ import annotations

import json
import os
import stat
import threading
import time

import pytest

from lustre_alloc.mapper.predictor import markov_store
from lustre_alloc.mapper.predictor.markov import MarkovPredictor
from lustre_alloc.mapper.service.client import MapperClient

from .conftest import make_service

pytestmark = pytest.mark.timeout(60)


def test_write_document_fsyncs_the_file_and_then_its_directory(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def spy(fd):
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)
    monkeypatch.setattr(markov_store.os, "fsync", spy)
    p = MarkovPredictor()
    p.observe("a", 1 << 20)
    markov_store.save_predictor(p, tmp_path / "s.json")
    assert synced == ["file", "dir"]


def test_service_removes_stale_temporaries_saves_in_the_writer_thread_and_skips_bad_records(
        tmp_path):
    state = tmp_path / "state.json"
    p = MarkovPredictor()
    for job in ("good.1", "bad.2", "good.3"):
        for size in (1 << 20, 1 << 22) * 3:
            p.observe(job, size)
    markov_store.save_predictor(p, state)
    doc = json.loads(state.read_text())
    doc["apps"][1]["hist"] = "garbage"
    state.write_text(json.dumps(doc))
    for stale in ("state.json.x1y2.tmp", ".state.json.999.tmp"):
        (tmp_path / stale).write_text("{")
    svc = make_service(static_cluster="2x2", state_file=str(state), save_interval_s=0.2)
    writers = []
    try:
        assert sorted(svc.policy.primary.predictor.jobids()) == ["good.1", "good.3"]
        assert svc.metrics.records_skipped._value.get() == 1
        assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))
        real = markov_store.write_document

        def spy(doc, path):
            writers.append(threading.current_thread().name)
            return real(doc, path)
        import lustre_alloc.mapper.service.persist as persist
        persist.write_document = spy
        with MapperClient(svc.endpoint) as c:
            deadline = time.monotonic() + 10
            while svc.saves < 2 and time.monotonic() < deadline:
                c.alloc("good.1", 2, 1 << 20, 1 << 20)
                time.sleep(0.02)
    finally:
        import lustre_alloc.mapper.service.persist as persist
        persist.write_document = markov_store.write_document
        svc.stop()
    assert svc.saves >= 2 and writers and set(writers) == {"lustre-alloc-save"}
    assert set(markov_store.load_predictor(state).jobids()) == {"good.1", "good.3"}
    # the OST rate memory rides in the same background save (lustre_alloc/mapper/speed/rate_memory.py)
    assert json.loads(state.read_text())["ost_rates"]["version"] == 1
