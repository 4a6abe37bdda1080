"""Saving and loading the predictor's learned state (a versioned file)."""
from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lustre_alloc.mapper.predictor.markov import MarkovConfig, MarkovPredictor, PredictorStateError
from lustre_alloc.mapper.predictor.markov_store import FORMAT, VERSION, load_or_new, load_predictor, save_predictor

MiB = 1 << 20
PREDICT = dict(stripe_size=MiB, max_stripe_count=64, usable_osts=64)


def trained() -> MarkovPredictor:
    p = MarkovPredictor(max_apps=10)
    for i in range(60):
        p.observe("ior.1", [1, 2, 3, 4, 5][i % 5] * MiB)
        p.observe("tpa.2", [0, 0, 8 * MiB, 3 * MiB][i % 4])
        if i % 7 == 0:
            p.observe("hacc.3", (i % 3) * 64 * MiB)
    return p


def same_behaviour(a: MarkovPredictor, b: MarkovPredictor) -> None:
    assert a.jobids() == b.jobids()
    for job in a.jobids():
        assert a.app_info(job) == b.app_info(job)
        assert a.predict(job, 8, **PREDICT) == b.predict(job, 8, **PREDICT)


def test_save_load_round_trip_predicts_exactly_as_before(tmp_path):
    p = trained()
    path = save_predictor(p, tmp_path / "markov.json")
    q = load_predictor(path)
    assert q.config == p.config
    same_behaviour(p, q)
    assert [f.name for f in tmp_path.iterdir()] == ["markov.json"]   # no temporary left


def test_loaded_predictor_keeps_learning_like_the_original(tmp_path):
    p = trained()
    q = load_predictor(save_predictor(p, tmp_path / "m.json"))
    for i in range(30):
        for m in (p, q):
            m.observe("tpa.2", [MiB, 0, 0][i % 3])
            m.observe(f"new.{i % 4}", i * MiB)
    same_behaviour(p, q)


# Incremental learning (add one transition, drop the one leaving each window) must equal
# counting the window from scratch, which is what loading does: any sequence, any order.
@settings(max_examples=60, deadline=None)
@given(order=st.integers(1, 4),
       seq=st.lists(st.tuples(st.sampled_from("abc"),
                              st.sampled_from([0, 1, 2, 3, 7, 64, 1000]).map(lambda v: v * 4096)),
                    max_size=120))
def test_incremental_counts_equal_counts_rebuilt_from_the_window(tmp_path_factory, order, seq):
    p = MarkovPredictor(order=order, max_apps=2, history=20)
    for job, x in seq:
        p.observe(job, x)
    path = tmp_path_factory.mktemp("s") / "m.json"
    same_behaviour(p, load_predictor(save_predictor(p, path)))


def test_corrupt_file_is_a_clear_error_and_load_or_new_starts_fresh(tmp_path, caplog):
    path = save_predictor(trained(), tmp_path / "m.json")
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(PredictorStateError, match=r"m\.json: corrupt: not JSON"):
        load_predictor(path)
    with caplog.at_level(logging.ERROR, logger="lustre_alloc.mapper.predictor.markov_store"):
        fresh = load_or_new(path, MarkovConfig())
    assert len(fresh) == 0
    assert [r for r in caplog.records if getattr(r, "event", "") == "markov_state_unusable"]
    assert "m.json" in caplog.text


def test_wrong_version_is_rejected_with_both_versions_named(tmp_path):
    path = save_predictor(trained(), tmp_path / "m.json")
    doc = json.loads(path.read_text())
    doc["version"] = VERSION + 1
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorStateError, match=f"version {VERSION + 1}, this build reads version {VERSION}"):
        load_predictor(path)
    assert len(load_or_new(path, MarkovConfig())) == 0


@pytest.mark.parametrize("content", ['{"format": "something-else", "version": 1}', "[1, 2]", "null"])
def test_a_file_of_another_kind_is_rejected(tmp_path, content):
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(PredictorStateError, match="not a Markov predictor state file"):
        load_predictor(path)


@pytest.mark.parametrize("field, value", [
    ("ctx", 10 ** 6), ("hist", [-5]), ("hist", "1,2"), ("trans", [10 ** 9]), ("mse", [0.0]),
    ("n_obs", -1), ("job_id", ""), ("mse", [float("nan")] * 3),
])
def test_an_inconsistent_application_record_is_skipped_counted_and_named(tmp_path, field, value,
                                                                          caplog):
    original = trained()
    path = save_predictor(original, tmp_path / "m.json")
    doc = json.loads(path.read_text())
    bad_job = doc["apps"][1]["job_id"]
    doc["apps"][1][field] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorStateError, match=r"apps\[1\]"):
        load_predictor(path, strict=True)
    loaded = load_predictor(path)               # the others survive one bad record
    assert loaded.stats.skipped_on_load == 1
    assert len(loaded) == len(original) - 1
    if field != "job_id":
        assert bad_job not in loaded and set(loaded.jobids()) < set(original.jobids())
    assert "apps[1]" in caplog.text


def test_stale_temporaries_are_removed(tmp_path):
    from lustre_alloc.mapper.predictor.markov_store import remove_stale_temporaries
    target = tmp_path / "state.json"
    for name in ("state.json.abc123.tmp", ".state.json.4242.tmp", "other.json.x.tmp"):
        (tmp_path / name).write_text("{")
    removed = remove_stale_temporaries(target)
    assert sorted(p.name for p in removed) == [".state.json.4242.tmp", "state.json.abc123.tmp"]
    assert (tmp_path / "other.json.x.tmp").exists()


def test_bad_stored_config_is_rejected(tmp_path):
    path = save_predictor(trained(), tmp_path / "m.json")
    doc = json.loads(path.read_text())
    doc["config"]["order"] = 0
    path.write_text(json.dumps(doc))
    with pytest.raises(PredictorStateError, match="config: order"):
        load_predictor(path)


def test_state_learned_with_another_order_is_not_reused(tmp_path, caplog):
    path = save_predictor(trained(), tmp_path / "m.json")
    with pytest.raises(PredictorStateError, match="learned with order 3.*configured order 2"):
        load_predictor(path, MarkovConfig(order=2))
    with caplog.at_level(logging.ERROR, logger="lustre_alloc.mapper.predictor.markov_store"):
        assert len(load_or_new(path, MarkovConfig(order=2))) == 0
    assert "order 2" in caplog.text


def test_operational_settings_may_change_across_a_restart(tmp_path):
    p = trained()
    path = save_predictor(p, tmp_path / "m.json")
    q = load_predictor(path, MarkovConfig(max_apps=2, history=16, mse_decay=0.5))
    assert q.jobids() == p.jobids()[-2:]
    assert q.app_info("ior.1").requests == p.app_info("ior.1").requests


def test_missing_file_starts_fresh_with_an_info_line(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="lustre_alloc.mapper.predictor.markov_store"):
        p = load_or_new(tmp_path / "absent.json", MarkovConfig())
    events = {getattr(r, "event", ""): r for r in caplog.records}
    assert len(p) == 0 and "markov_state_missing" in events
    assert events["markov_config"].order == 3


def test_state_file_layout_is_documented_json(tmp_path):
    doc = json.loads(save_predictor(trained(), tmp_path / "m.json").read_text())
    assert doc["format"] == FORMAT and doc["version"] == VERSION
    assert set(doc["apps"][0]) == {"job_id", "n_obs", "ctx", "hist", "trans", "mse", "mse_n"}
