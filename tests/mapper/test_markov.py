"""The online Markov request predictor (Paul et al. 2017, Section III-B, Algorithm 1)."""
from __future__ import annotations

import math
from statistics import fmean, pstdev

import numpy as np
import pytest

from lustre_alloc.mapper.predictor.markov import (MarkovConfig, MarkovPredictor, PredictorConfigError,
                           PredictorUsageError)
from lustre_alloc.mapper.predictor.markov_states import assign_state, predicted_write_bytes

MiB = 1 << 20
PREDICT = dict(stripe_size=MiB, max_stripe_count=64, usable_osts=64)


def feed(p: MarkovPredictor, job: str, seq) -> None:
    for x in seq:
        assert p.observe(job, x)


def states(preds) -> list[int]:
    return [r.state for r in preds]


# ---------------------------------------------------------------- prediction
def test_periodic_sequence_predicts_its_own_continuation():
    p = MarkovPredictor()
    cycle = [1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB, 5 * MiB]
    feed(p, "ior.1", cycle * 20)
    preds = p.predict("ior.1", 10, **PREDICT)
    assert states(preds) == [-2, -1, 0, 1, 2] * 2
    assert [r.step for r in preds] == list(range(1, 11))
    assert all(r.probability == 1.0 for r in preds)


def test_predicted_bytes_are_states_to_prediction_of_the_current_mean_and_sd():
    p = MarkovPredictor()
    seq = [1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB, 5 * MiB] * 20
    feed(p, "a", seq)
    info = p.app_info("a")
    assert info.mean_bytes == pytest.approx(fmean(seq[-64:]))
    assert info.sd_bytes == pytest.approx(pstdev(seq[-64:]))
    for r in p.predict("a", 5, **PREDICT):
        assert r.bytes == predicted_write_bytes(r.state + 2, info.mean_bytes, info.sd_bytes)
        assert r.stripe_count == max(1, math.ceil(r.bytes / MiB))


def test_mean_and_sd_cover_only_the_last_history_requests():
    p = MarkovPredictor(history=32)
    seq = [MiB] * 100 + [8 * MiB, 2 * MiB] * 20
    feed(p, "a", seq)
    assert p.app_info("a").mean_bytes == fmean(seq[-32:])


def test_predicted_stripe_count_is_clipped_to_maximum_and_usable_osts():
    p = MarkovPredictor()
    feed(p, "a", [64 * MiB] * 10)
    assert [r.stripe_count for r in p.predict("a", 2, MiB, 16, 40)] == [16, 16]
    assert [r.stripe_count for r in p.predict("a", 2, MiB, 16, 5)] == [5, 5]
    assert [r.stripe_count for r in p.predict("a", 2, 128 * MiB, 16, 40)] == [1, 1]


def test_probability_is_the_product_of_transition_frequencies_along_the_path():
    # Order 1, one training length of 16 requests (15 transitions). Period L L L H:
    # after L the chain has seen L twice as often as H.
    p = MarkovPredictor(order=1, train_lengths=(16,))
    low, high = 1 * MiB, 9 * MiB
    seq = [low, low, low, high] * 10 + [low]
    feed(p, "a", seq)
    window = seq[-16:]
    after_low = [b for a, b in zip(window, window[1:]) if a == low]
    p_low_low = after_low.count(low) / len(after_low)
    preds = p.predict("a", 3, **PREDICT)
    assert p.app_info("a").train_length == 16
    assert preds[0].probability == pytest.approx(p_low_low)
    assert preds[1].probability == pytest.approx(p_low_low ** 2)
    assert [r.probability for r in preds] == sorted((r.probability for r in preds), reverse=True)


def test_zero_variance_predicts_the_constant_size_with_certainty():
    p = MarkovPredictor()
    feed(p, "a", [4 * MiB] * 8)
    preds = p.predict("a", 3, **PREDICT)
    assert [(r.state, r.bytes, r.stripe_count, r.probability) for r in preds] == [(0, 4 * MiB, 4, 1.0)] * 3


def test_reads_are_zero_byte_requests():
    p = MarkovPredictor()
    feed(p, "tpa", [0, 0, 8 * MiB] * 10)
    assert states(p.predict("tpa", 3, **PREDICT))[:3] == [-1, -1, 2]
    assert p.predict("tpa", 1, **PREDICT)[0].bytes < 2 * MiB


# ---------------------------------------------------------- defined behaviour
def test_unknown_application_gets_no_prediction():
    assert MarkovPredictor().predict("never.seen", 4, **PREDICT) == []


def test_fewer_than_order_plus_one_requests_gets_no_prediction():
    p = MarkovPredictor(order=3)
    feed(p, "a", [MiB, 2 * MiB, 3 * MiB])
    assert p.predict("a", 4, **PREDICT) == []
    p.observe("a", MiB)
    assert len(p.predict("a", 4, **PREDICT)) == 4


def test_k_zero_and_no_usable_ost_give_no_prediction():
    p = MarkovPredictor()
    feed(p, "a", [MiB] * 10)
    assert p.predict("a", 0, **PREDICT) == []
    assert p.predict("a", 3, MiB, 16, 0) == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -1, -0.5, np.float64("nan")])
def test_nan_infinite_and_negative_bytes_are_not_learned(bad):
    p = MarkovPredictor()
    feed(p, "a", [MiB, 2 * MiB] * 5)
    before = (p.app_info("a"), p.predict("a", 4, **PREDICT))
    assert p.observe("a", bad) is False
    assert p.observe("other", bad) is False
    assert (p.app_info("a"), p.predict("a", 4, **PREDICT)) == before
    assert "other" not in p
    assert p.stats.rejected == 2


def test_float_and_numpy_byte_counts_are_learned_as_whole_bytes():
    p = MarkovPredictor()
    assert p.observe("a", 1048575.6)
    assert p.observe("a", np.int64(MiB))
    assert p.observe("a", np.float32(MiB))
    assert p.app_info("a").mean_bytes == MiB


@pytest.mark.parametrize("bad", ["4096", None, True, b"1", [1]])
def test_non_numeric_bytes_is_a_usage_error(bad):
    with pytest.raises(PredictorUsageError, match="write_bytes must be a real number"):
        MarkovPredictor().observe("a", bad)


@pytest.mark.parametrize("job", ["", None, 42])
def test_job_id_must_be_a_non_empty_string(job):
    p = MarkovPredictor()
    with pytest.raises(PredictorUsageError, match="job_id"):
        p.observe(job, MiB)
    with pytest.raises(PredictorUsageError, match="job_id"):
        p.predict(job, 1, **PREDICT)


@pytest.mark.parametrize("args, name", [
    ((-1, MiB, 16, 40), "k"), ((1.0, MiB, 16, 40), "k"),
    ((1, 0, 16, 40), "stripe_size"), ((1, 1.5, 16, 40), "stripe_size"),
    ((1, MiB, 0, 40), "max_stripe_count"), ((1, MiB, 16, -1), "usable_osts"),
])
def test_out_of_range_predict_arguments_are_usage_errors(args, name):
    p = MarkovPredictor()
    feed(p, "a", [MiB] * 8)
    with pytest.raises(PredictorUsageError, match=name):
        p.predict("a", *args)


# ------------------------------------------------------------- applications
def test_applications_are_learned_separately():
    a_seq = [1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB, 5 * MiB] * 12
    b_seq = [0, 0, 64 * MiB, 8 * MiB] * 15
    together = MarkovPredictor()
    for x, y in zip(a_seq, b_seq):
        together.observe("a", x)
        together.observe("b", y)
    alone_a, alone_b = MarkovPredictor(), MarkovPredictor()
    feed(alone_a, "a", a_seq)
    feed(alone_b, "b", b_seq)
    assert together.predict("a", 6, **PREDICT) == alone_a.predict("a", 6, **PREDICT)
    assert together.predict("b", 6, **PREDICT) == alone_b.predict("b", 6, **PREDICT)
    assert together.app_info("b") == alone_b.app_info("b")


def test_least_recently_observed_application_is_evicted_at_the_cap():
    p = MarkovPredictor(max_apps=2)
    for job in ("a", "b", "a", "c"):
        p.observe(job, MiB)
    assert p.jobids() == ["a", "c"]
    assert "b" not in p and p.predict("b", 1, **PREDICT) == []
    assert p.stats.evicted == 1


def test_predict_does_not_refresh_an_application_for_eviction():
    p = MarkovPredictor(max_apps=2)
    p.observe("a", MiB)
    p.observe("b", MiB)
    p.predict("a", 1, **PREDICT)
    p.observe("c", MiB)
    assert p.jobids() == ["b", "c"]


def test_forget_drops_an_application():
    p = MarkovPredictor()
    p.observe("a", MiB)
    assert p.forget("a") and not p.forget("a") and len(p) == 0


# ----------------------------------------------------- training-length choice
def _state_hits(seq, **config) -> int:
    """One-step state predictions that match, for a predictor built with ``config``."""
    p = MarkovPredictor(**config)
    hits = 0
    for x in seq:
        pred = p.predict("a", 1, **PREDICT)
        info = p.app_info("a")
        if pred and assign_state(x, info.mean_bytes, info.sd_bytes) == pred[0].state:
            hits += 1
        p.observe("a", x)
    return hits


def test_a_period_longer_than_the_shortest_window_picks_a_longer_window():
    seq = [1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB, 5 * MiB] * 20
    p = MarkovPredictor(order=3)                     # candidates 4, 8, 16
    feed(p, "a", seq)
    info = p.app_info("a")
    assert info.mse_by_length[4] > 10 * info.mse_by_length[8]
    assert info.train_length in (8, 16)
    assert _state_hits(seq, order=3, train_lengths=(4,)) < _state_hits(seq, order=3, train_lengths=(16,))


def test_a_frequently_changing_pattern_picks_a_short_window():
    # Order 1: phases of 8 constant small writes alternate with 8 small/large alternating
    # writes. A 16-request window mixes both phases' transitions after small; 4 forgets fast.
    low, high = 1 * MiB, 8 * MiB
    seq = ([low] * 8 + [low, high] * 4) * 12
    p = MarkovPredictor(order=1)                     # candidates 2, 4, 8, 16
    feed(p, "a", seq)
    info = p.app_info("a")
    assert info.train_length == 4
    assert info.mse_by_length[4] == min(info.mse_by_length.values())
    assert _state_hits(seq, order=1, train_lengths=(4,)) > _state_hits(seq, order=1, train_lengths=(16,))


def test_length_is_rechosen_when_the_behaviour_changes():
    low, high = 1 * MiB, 8 * MiB
    p = MarkovPredictor(order=1)
    feed(p, "a", [1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB, 5 * MiB] * 12)
    stationary = p.app_info("a").train_length
    feed(p, "a", ([low] * 8 + [low, high] * 4) * 12)
    assert stationary > 4 and p.app_info("a").train_length == 4


# ------------------------------------------------------------------- config
def test_default_candidate_lengths_double_up_to_16_and_exceed_the_order():
    assert MarkovConfig(order=3).lengths == (4, 8, 16)
    assert MarkovConfig(order=1).lengths == (2, 4, 8, 16)
    assert MarkovConfig(order=8).lengths == (16,)
    assert MarkovConfig(order=3, train_lengths=(16, 5)).lengths == (5, 16)


@pytest.mark.parametrize("fields, field", [
    (dict(order=0), "order"), (dict(order=16), "order"), (dict(order=2.5), "order"),
    (dict(order=3, train_lengths=(3,)), "train_lengths"),
    (dict(train_lengths=(17,)), "train_lengths"), (dict(train_lengths=(8, 8)), "train_lengths"),
    (dict(history=8), "history"), (dict(max_apps=0), "max_apps"),
    (dict(mse_decay=0.0), "mse_decay"), (dict(mse_decay=1.5), "mse_decay"),
])
def test_invalid_configuration_names_the_field(fields, field):
    with pytest.raises(PredictorConfigError, match=field):
        MarkovConfig(**fields)


def test_config_object_or_keyword_fields_but_not_both():
    assert MarkovPredictor(MarkovConfig(order=2)).config.order == 2
    assert MarkovPredictor(order=2).config.order == 2
    with pytest.raises(PredictorUsageError, match="not both"):
        MarkovPredictor(MarkovConfig(), order=2)


def test_an_unseen_context_backs_off_to_its_longest_seen_suffix():
    # 20 writes then 3 reads: (read, read, read) never occurred as a context, but
    # (read, read) -> read did; without backoff the order-0 frequencies say "write".
    seq = [64 * MiB] * 20 + [0, 0, 0]
    with_backoff = MarkovPredictor(order=3, train_lengths=(16,))
    without = MarkovPredictor(order=3, train_lengths=(16,), backoff=False)
    feed(with_backoff, "ior", seq)
    feed(without, "ior", seq)
    assert with_backoff.predict("ior", 1, **PREDICT)[0].state == -2
    assert without.predict("ior", 1, **PREDICT)[0].state == 0
