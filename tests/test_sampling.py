"""Deterministic samplers: quantile placement on S^1, the mapped Fibonacci lattice on S^2."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.config import ConfigError, load_config
from meanfield.initial import vmf_density
from meanfield.particles import sampling
from meanfield.particles.sampling import SamplingError, fibonacci_sphere, quantile_circle, sample_initial
from meanfield.problem import Problem
from meanfield.sphere import normalize


def test_config_accepts_exactly_the_samplers():
    candidates = set(sampling.SAMPLERS) | {"sobol", "random", "stratified", "fibonaci"}
    accepted = set()
    for name in candidates:
        try:
            load_config(None, [f'particles.sampler="{name}"'])
            accepted.add(name)
        except ConfigError:
            pass
    assert accepted == set(sampling.SAMPLERS)


def test_quantiles_are_exact():
    """Density 1 + 0.5 cos 2 theta: F(theta) = (theta + sin(2 theta) / 4) / (2 pi) at every token."""
    n = 1000
    x = quantile_circle(n, lambda p: 1 + 0.5 * np.cos(2 * np.arctan2(p[:, 1], p[:, 0])))
    theta = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    assert np.all(np.diff(theta) > 0)
    np.testing.assert_allclose((theta + 0.25 * np.sin(2 * theta)) / (2 * np.pi), (np.arange(n) + 0.5) / n, atol=1e-13)


def test_fibonacci_of_the_uniform_density_is_the_spherical_fibonacci_lattice():
    n = 999
    x = fibonacci_sphere(n, lambda p: np.ones(len(p)))
    i = np.arange(n)
    np.testing.assert_allclose(x[:, 2], (2 * i + 1) / n - 1, atol=1e-12)
    phi = np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi)
    golden = 2 * np.pi * np.mod(i * (np.sqrt(5) - 1) / 2, 1.0)
    np.testing.assert_allclose(np.angle(np.exp(1j * (phi - golden))), 0.0, atol=1e-9)


def test_fibonacci_integrates_smooth_functions_far_better_than_random_draws():
    """E<mu, x> = coth(kappa) - 1/kappa under vMF(mu, kappa): quasi-Monte Carlo error << n^-1/2."""
    mu, kappa, n = normalize(np.array([0.3, 0.4, 0.8])), 5.0, 20000
    x = fibonacci_sphere(n, lambda p: vmf_density(p, mu, kappa))
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-14)
    assert abs((x @ mu).mean() - (1 / np.tanh(kappa) - 1 / kappa)) < 1e-6  # measured 4e-8; random: ~2e-3


def test_samplers_through_the_config_ignore_the_seed_and_check_the_sphere():
    rng = np.random.default_rng
    s1 = load_config({"mesh": {"sphere": "S1"}, "initial": {"kind": "harmonic", "degree": 2, "amplitude": 0.1}})
    a = sample_initial(Problem(s1).initial(), 64, rng(1), "quantile")
    assert np.array_equal(a, sample_initial(Problem(s1).initial(), 64, rng(2), "quantile"))
    with pytest.raises(SamplingError, match="S\\^2"):
        sample_initial(Problem(s1).initial(), 64, rng(1), "fibonacci")
    s2 = load_config(None)
    with pytest.raises(SamplingError, match="S\\^1"):
        sample_initial(Problem(s2).initial(), 64, rng(1), "quantile")
    assert sample_initial(Problem(s2).initial(), 64, rng(1), "fibonacci").shape == (64, 3)
