import numpy as np
import pytest

from lustre_alloc.simulator.metrics import (coefficient_of_variation, hours_to_balance, jain_index,
                               max_mean_ratio, normalised_capacity, per_step_to_hourly_mean)


def test_max_mean_ratio_hand_checked():
    # max 4, mean (1+2+3+4)/4 = 2.5 -> 1.6 ; all equal -> 1 ; all zero -> 1 (balanced)
    r = max_mean_ratio(np.array([[1, 2, 3, 4], [5, 5, 5, 5], [0, 0, 0, 0]]))
    assert r.tolist() == pytest.approx([1.6, 1.0, 1.0])


def test_hours_to_balance_is_first_hour_after_which_ratio_stays_low():
    assert hours_to_balance([3.0, 1.2, 1.04, 1.10, 1.03, 1.01]) == 4.0
    assert hours_to_balance([1.0, 1.01]) == 0.0
    assert hours_to_balance([2.0, 1.0, 1.2]) is None


def test_jain_index_one_for_equal_and_one_over_n_for_a_single_loaded_element():
    assert jain_index(np.array([3.0, 3.0, 3.0])) == pytest.approx(1.0)
    assert jain_index(np.array([9.0, 0.0, 0.0])) == pytest.approx(1 / 3)
    # (1+3)^2 / (2 * (1+9)) = 16/20
    assert jain_index(np.array([1.0, 3.0])) == pytest.approx(0.8)


def test_coefficient_of_variation_hand_checked():
    # mean 2, population std 1 -> 0.5
    assert coefficient_of_variation(np.array([1.0, 3.0])) == pytest.approx(0.5)


def test_normalised_capacity_divides_by_each_hours_median():
    n = normalised_capacity(np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 6.0]]))
    assert n.ravel().tolist() == pytest.approx([0.5, 1.0, 2.0, 1.0, 1.0, 2.0])


def test_hourly_mean_of_per_step_series():
    s = np.concatenate([np.full(3600, 1.0), np.full(3600, 3.0)])
    assert per_step_to_hourly_mean(s, 1.0).tolist() == [1.0, 3.0]
