"""DGR's closed-form retrieval profile (meanfield.references.retrieval) against an independent
solution of the linear Volterra law, and the figures MODEL.md states."""

import numpy as np
import pytest
from scipy import linalg

from meanfield.references.retrieval import (
    log_mass_ratio,
    mode_rate,
    positional_kernel,
    retrieval_mode,
    retrieval_score,
)


def test_kernel_and_mass_ratio_at_zero_decay_are_the_limits():
    """lambda -> 0: k_lambda(s, s') -> 1/s and Y -> log(1/s0)."""
    s0 = np.array([0.05, 0.3, 0.8])
    assert np.allclose(positional_kernel(0.7, s0, 1e-7), 1 / 0.7, rtol=1e-6)
    assert np.allclose(positional_kernel(0.7, s0, 0.0), 1 / 0.7, rtol=0)
    assert np.allclose(log_mass_ratio(s0, 1e-7), np.log(1 / s0), rtol=1e-6)
    assert np.allclose(log_mass_ratio(s0, 0.0), np.log(1 / s0), rtol=0)


@pytest.mark.parametrize("decay", [0.0, 1.0, 4.0])
def test_closed_form_is_the_green_function_of_the_volterra_law(decay):
    """R_n(t; s0) against the Volterra law d_t a = a_n int_0^s k_lambda(s, s') a(s') ds' solved
    independently: M midpoint slices, a(0) the unit mass at the slice of s0, expm(a_n t B), the
    value at the last slice (s = 1 - 1/(2M)).  The error falls at first order in 1/M (the last
    slice's offset from s = 1): halving from M = 100 to 400, below 5e-3 at M = 400 (1.8e-3 at
    lambda = 0 and 1, 4.7e-3 at lambda = 4)."""
    beta, t = 1.0, 1.0
    errors = []
    for M in (100, 200, 400):
        s = (np.arange(M) + 0.5) / M
        B = positional_kernel(s[:, None], s[None, :], decay) / M * (np.tril(np.ones((M, M)), -1) + 0.5 * np.eye(M))
        worst = 0.0
        for n in (1, 2, 3):
            green = linalg.expm(mode_rate(n, beta) * t * B)[-1] * M
            for j0 in (M // 10, M // 4, M // 2, 9 * M // 10):
                worst = max(worst, abs(green[j0] / retrieval_mode(t, s[j0], n, beta, decay) - 1))
        errors.append(worst)
    assert errors[-1] < 5e-3, errors
    assert 1.7 < errors[0] / errors[1] < 2.3 and 1.7 < errors[1] / errors[2] < 2.3, errors


def test_the_figures_of_model_md():
    """beta = 1, lambda = 1, M = 8: S_1(0.02) = 1.66, minimum 1.195 at s0 = 0.259, S_1(0.98) = 1.62;
    the minimum at 0.125 (t = 0.5) and 0.633 (t = 2), none inside (0, 1) at t = 5."""
    s = np.linspace(0.001, 0.999, 9981)

    def score(t, s0):
        return retrieval_score(t, s0, beta=1.0, decay=1.0, codewords=8)

    assert abs(score(1.0, 0.02) - 1.66) < 0.005 and abs(score(1.0, 0.98) - 1.62) < 0.005
    for t, where, value in ((0.5, 0.125, None), (1.0, 0.259, 1.195), (2.0, 0.633, None)):
        profile = score(t, s)
        i = int(np.argmin(profile))
        assert 0 < i < s.size - 1 and abs(s[i] - where) < 0.001, (t, s[i])
        assert np.all(np.diff(profile[:i]) < 0) and np.all(np.diff(profile[i:]) > 0)  # one interior minimum
        if value is not None:
            assert abs(profile[i] - value) < 0.0005
    assert np.all(np.diff(score(5.0, s)) < 0)  # t = 5: no recency, no interior minimum
