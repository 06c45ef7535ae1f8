"""Bounded relative-error fits (``estimator/fit.py``): a slow link's time must not vanish into
the latency columns and come back as an absurd bandwidth."""

import numpy as np
import pytest

from mdloader_plugin.estimator.fit import POOR_FIT, lad_relative, nnls_relative


def test_exact_data_fits_exactly_and_reports_no_residual():
    n = np.array([1, 2, 4, 1, 2, 4.0])
    b = np.array([1e3, 1e3, 1e3, 1e6, 1e6, 1e6]) * n
    y = 1e-4 + 2e-5 * n + b / 60e6
    fit = nnls_relative({"flush": np.ones(6), "get": n, "per_byte": b}, y)
    assert fit.rel_rms < 1e-9 and fit.rel_worst < 1e-9 and not fit.poor
    assert fit.coef["per_byte"] == pytest.approx(1 / 60e6, rel=1e-6) and fit.bounded == ()


def test_floor_binds_only_when_the_free_fit_breaks_it():
    """Collinear latency and bytes (every point moves the same bytes per peer): the free fit may
    price the bytes at almost nothing; the floor holds the bandwidth at a plausible value."""
    peers = np.array([1, 2, 3, 4.0])
    nbytes = peers * 1e6
    y = peers * (1e6 / 62.5e6)   # all of it is link time, 62.5 MB/s
    free = nnls_relative({"peer": peers, "per_byte": nbytes}, y)
    floor = 1 / (1.5 * 62.5e6)
    held = nnls_relative({"peer": peers, "per_byte": nbytes}, y, lower={"per_byte": floor})
    assert held.coef["per_byte"] >= floor * (1 - 1e-12)
    assert 1 / held.coef["per_byte"] <= 1.5 * 62.5e6 * (1 + 1e-9)
    assert held.rel_rms < 1e-6  # the peer column takes the rest: the fit is still exact
    if free.coef["per_byte"] >= floor:
        assert held.bounded == () and held.coef == free.coef
    else:
        assert held.bounded == ("per_byte",)


def test_poor_fit_is_flagged_with_its_worst_point():
    y = np.array([1e-3, 1e-3, 9e-3, 1e-3])
    fit = nnls_relative({"c": np.ones(4)}, y)
    assert fit.poor and fit.rel_rms > POOR_FIT and fit.worst_row == 2


def test_bad_times_rejected():
    with pytest.raises(ValueError):
        nnls_relative({"c": np.ones(2)}, np.array([1e-3, 0.0]))


def test_absolute_deviation_fit_ignores_one_outlier():
    """Three rows measure one per-byte cost; one is 2x off: least squares splits the
    difference, least absolute relative deviation keeps the other two."""
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 1.0, 2.0]) * x * 1e-7  # the middle row runs at twice the rate
    lsq = nnls_relative({"b": x}, y).coef["b"]
    lad = lad_relative({"b": x}, y).coef["b"]
    assert lad == pytest.approx(1e-7, rel=0.02)
    assert abs(lsq / 1e-7 - 1) > 0.1


def test_absolute_deviation_fit_is_exact_on_exact_data_and_keeps_floors():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    y = 1e-3 + 2e-3 * x
    fit = lad_relative({"a": np.ones(4), "b": x}, y)
    assert fit.coef["a"] == pytest.approx(1e-3, rel=1e-6) and fit.rel_rms < 1e-6
    held = lad_relative({"b": x}, 1e-9 * x, lower={"b": 1e-6})
    assert held.coef["b"] == pytest.approx(1e-6) and held.bounded == ("b",)
