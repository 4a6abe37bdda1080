"""Algorithm 1's assignStates / statesToPrediction and the bytes -> stripe count rule."""
from __future__ import annotations

import numpy as np
import pytest

from lustre_alloc.mapper.predictor.markov_states import (assign_state, assign_states, predicted_write_bytes,
                                  state_to_bytes, stripe_count_for)

MU, SD = 100.0, 40.0   # band edges 66, 90, 110, 134 are exact in binary floating point
EPS = 1e-9


@pytest.mark.parametrize("x, state", [
    (100.0, 0),
    (90.0, 0), (90.0 - EPS * 1000, -1),          # mu - 0.25 sd is closed on the state-0 side
    (110.0, 0), (110.0 + EPS * 1000, 1),         # mu + 0.25 sd is closed on the state-0 side
    (66.0, -1), (66.0 - EPS * 1000, -2),         # mu - 0.85 sd belongs to state -1
    (134.0, 1), (134.0 + EPS * 1000, 2),         # mu + 0.85 sd belongs to state +1
    (0.0, -2), (1e12, 2),
])
def test_assign_state_band_edges_are_exactly_algorithm_1(x, state):
    assert assign_state(x, MU, SD) == state


def test_assign_states_keeps_order():
    assert assign_states([0.0, 70.0, 100.0, 120.0, 200.0], MU, SD) == [-2, -1, 0, 1, 2]


@pytest.mark.parametrize("state, nbytes", [(0, 100.0), (-1, 80.0), (1, 120.0), (-2, 32.0), (2, 168.0)])
def test_states_to_prediction_is_mu_plus_0_0_5_1_7_sd(state, nbytes):
    assert state_to_bytes(state, MU, SD) == pytest.approx(nbytes, abs=1e-9)


def test_state_to_bytes_rejects_a_state_outside_minus2_to_2():
    with pytest.raises(ValueError, match="state must be one of"):
        state_to_bytes(3, MU, SD)


def test_zero_sd_puts_the_mean_in_state_0_and_anything_else_at_the_ends():
    assert assign_state(4096, 4096.0, 0.0) == 0
    assert assign_state(4095, 4096.0, 0.0) == -2
    assert assign_state(4097, 4096.0, 0.0) == 2
    assert state_to_bytes(2, 4096.0, 0.0) == 4096.0


def test_band_edges_cut_a_normal_distribution_into_five_near_equal_parts():
    xs = np.random.default_rng(7).normal(1000.0, 100.0, 200_000)
    states = np.array(assign_states(xs.tolist(), 1000.0, 100.0))
    shares = [(states == s).mean() for s in (-2, -1, 0, 1, 2)]
    assert shares == pytest.approx([0.2] * 5, abs=0.01)


def test_predicted_write_bytes_rounds_and_clamps_negative_predictions_to_zero():
    assert predicted_write_bytes(2, 10.4, 3.0) == 10
    assert predicted_write_bytes(3, 10.0, 3.0) == 12          # 10 + 1.5 rounds up
    assert predicted_write_bytes(0, 100.0, 100.0) == 0        # mu - 1.7 sd < 0


@pytest.mark.parametrize("nbytes, expected", [
    (0, 1),                 # a read or an empty file still gets one object
    (1, 1),
    (1 << 20, 1),
    ((1 << 20) + 1, 2),     # a partial stripe occupies another OST
    (10 << 20, 10),
    (100 << 20, 16),        # clipped to max_stripe_count
])
def test_stripe_count_is_bytes_over_stripe_size_rounded_up_and_clipped(nbytes, expected):
    assert stripe_count_for(nbytes, 1 << 20, 16, 40) == expected


def test_stripe_count_is_clipped_to_usable_osts():
    assert stripe_count_for(100 << 20, 1 << 20, 16, 5) == 5
    assert stripe_count_for(100 << 20, 1 << 20, 16, 0) == 0
