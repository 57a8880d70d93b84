"""The Lagrangian S^1 reference of issue 12 (meanfield.references.lagrangian_circle).

Checked against: the pairwise sum of the field, the exact linear growth rates of MODEL.md,
the particle solver's RK4 in Cartesian coordinates (a different formula and integrator),
and the Eulerian spectral reference ``solve_circle`` in the formation phase.
"""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.model import AttentionModel
from meanfield.nonlocal_field.direct import DirectEvaluator
from meanfield.particles.integrator import advance
from meanfield.references.exact import growth_rate
from meanfield.references.lagrangian_circle import (
    CircleField,
    direct_velocity,
    iterate_tokens,
    quantile_tokens,
    solve_tokens,
)
from meanfield.references.spectral_circle import solve_circle

EXPRESSION_MODES = ((3, 0.05, 0.0), (4, 0.05, 1.0), (7, 0.02, 0.0))


def bumpy(x: np.ndarray) -> np.ndarray:
    """The s1-clusters example's perturbed uniform density."""
    theta = np.arctan2(x[:, 1], x[:, 0])
    return 1.0 + sum(a * np.cos(k * theta + p) for k, a, p in EXPRESSION_MODES)


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("beta", [0.5, 4.0, 12.0, 30.0])
def test_series_field_matches_pairwise_sum(attention, beta, rng):
    """The truncated Fourier-Bessel field equals the O(n m) pairwise sum to round-off."""
    sources, targets = rng.uniform(0, 2 * np.pi, 300), rng.uniform(-10, 10, 50)
    weights = rng.uniform(0.1, 1.0, 300)
    weights /= weights.sum()
    fast = CircleField(beta, attention).velocity(targets, sources, weights)
    exact = direct_velocity(beta, attention, targets, sources, weights)
    scale = np.abs(exact).max()
    assert np.abs(fast - exact).max() <= 1e-13 * scale


def test_series_truncation_follows_tolerance():
    """Fewer modes for a looser tolerance, more for a larger beta."""
    assert CircleField(9.0, tol=1e-8).modes < CircleField(9.0).modes < CircleField(20.0).modes


@pytest.mark.parametrize("attention, k", [("softmax", 4), ("unnormalized", 2)])
def test_linear_growth_rate(attention, k):
    """Quantile tokens of a slightly perturbed uniform density: mode k grows at gamma_k."""
    eps, beta = 1e-7, 9.0 if attention == "softmax" else 2.0
    rate = growth_rate(2, k, beta, attention == "softmax")
    theta, w = quantile_tokens(lambda x: 1.0 + eps * np.cos(k * np.arctan2(x[:, 1], x[:, 0])), 256)
    frames = list(iterate_tokens(theta, w, beta, [0.0, 1.0 / rate], attention=attention))
    amp = [abs(np.exp(1j * k * a) @ w) for _, a in frames]
    assert np.log(amp[1] / amp[0]) == pytest.approx(1.0, rel=1e-5)


def test_mass_is_exact_and_order_is_kept():
    sol = solve_tokens(bumpy, 9.0, [0.0, 5.0, 30.0], 1024)
    assert sol.weights.sum() == 1.0
    assert np.all(np.diff(sol.angles[1]) > 0)  # the flow keeps tokens ordered ...
    assert np.all(np.diff(sol.angles[-1]) > -1e-12)  # ... up to round-off once clusters collapse
    assert sol.angles[-1, -1] - sol.angles[-1, 0] < 2 * np.pi


def test_agrees_with_particle_rk4():
    """Same tokens moved by meanfield.particles' RK4 with the direct Cartesian evaluator."""
    n, beta, t_final = 64, 9.0, 3.0
    theta, w = quantile_tokens(bumpy, n)
    sol = solve_tokens(bumpy, beta, [0.0, t_final], n)
    evaluator = DirectEvaluator(AttentionModel(2, beta))
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    x, _ = advance(lambda y: evaluator.velocity(y, y, w), x, 0.0, t_final, 0.005)
    moved = np.arctan2(x[:, 1], x[:, 0])
    assert np.abs(np.angle(np.exp(1j * (moved - sol.angles[-1])))).max() < 1e-10


@pytest.mark.parametrize("attention, beta, t_final, tol",
                         [("softmax", 9.0, 4.0, 1e-9), ("unnormalized", 2.0, 1.0, 1e-9)])
def test_agrees_with_eulerian_reference_in_formation(attention, beta, t_final, tol):
    """Fourier moments 1..8 of the tokens against solve_circle (both spectrally accurate)."""
    times = np.linspace(0.0, t_final, 5)
    ref = solve_circle(bumpy, beta, times, attention=attention, modes=2048)
    sol = solve_tokens(bumpy, beta, times, 2048, attention=attention)
    for k in range(1, 9):
        exact = 2 * np.pi * (ref.values * np.exp(1j * k * ref.angles)).mean(axis=1)
        assert np.abs(sol.moments(k) - exact).max() < tol, k


def test_bad_times_are_rejected():
    with pytest.raises(ValueError, match="times"):
        next(iterate_tokens(np.zeros(3), np.ones(3) / 3, 9.0, [1.0, 0.5]))
