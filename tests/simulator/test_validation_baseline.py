"""The trivial baseline of the HACC-IO validation (lustre_alloc.simulator.validation.constant_mdape)."""
from __future__ import annotations

from types import SimpleNamespace

from lustre_alloc.simulator.validation import constant_mdape


def jobs(*bandwidths):
    return [SimpleNamespace(bandwidth_mib_s=b) for b in bandwidths]


def test_the_constant_is_the_fitting_halfs_median_and_its_error_is_relative():
    fit = jobs(100.0, 200.0, 300.0)                    # the constant: 200
    assert abs(constant_mdape(fit, fit) - 1 / 3) < 1e-12   # errors 1, 0, 1/3: the median
    assert constant_mdape(fit, jobs(200.0, 250.0, 400.0)) == 0.2


def test_no_jobs_is_nan():
    assert constant_mdape([], jobs(1.0)) != constant_mdape([], jobs(1.0))
