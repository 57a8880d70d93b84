"""The spectral S^1 reference (meanfield.references.spectral_circle) and DG1 cluster analysis against it.

The reference is checked against the exact linear growth rates of MODEL.md, mass
conservation, exact integrals of trigonometric polynomials and self-convergence; then a small
version of issue 11's done-when check: DG1 on 512 cells against the reference, cluster by
cluster (the full check, 2048 cells and 1e-3 rad, is benchmarks/bench_clusters_s1.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.optimize import brentq

from meanfield.analysis.clusters import analyse_run, analyse_spectral, crossing_differences, frame_comparisons
from meanfield.analysis.clusters.frame import analyse_field
from meanfield.analysis.clusters.spectral import FourierField, grid_mesh
from meanfield.problem import Problem
from meanfield.references.exact import growth_rate
from meanfield.references.spectral_circle import CircleSolution, solve_circle


def angle(x: np.ndarray) -> np.ndarray:
    return np.arctan2(x[:, 1], x[:, 0])


@pytest.mark.parametrize("attention, k, courant, rtol", [
    ("softmax", 1, 0.4, 1e-8), ("softmax", 4, 0.4, 1e-8), ("softmax", 7, 0.4, 1e-8),
    ("unnormalized", 3, 0.05, 1e-7),
])
def test_linear_growth_rates(attention, k, courant, rtol):
    """A small Fourier mode about the uniform density grows at the exact rate gamma_k (beta = 9)."""
    eps = 1e-8
    rate = growth_rate(2, k, 9.0, attention == "softmax")
    sol = solve_circle(lambda x: 1.0 / (2 * np.pi) + eps * np.cos(k * angle(x)), 9.0, [0.0, 1.0 / rate],
                       attention=attention, modes=128, courant=courant)
    amplitude = [abs(sol.coefficients(i)[k]) for i in (0, 1)]
    assert np.log(amplitude[1] / amplitude[0]) * rate == pytest.approx(rate, rel=rtol)


def test_mass_resolution_and_self_convergence():
    """Through cluster formation: mass to round-off, resolved spectrum, N and dt converged."""
    rho0 = lambda x: 1 + 0.05 * np.cos(3 * angle(x)) + 0.04 * np.sin(5 * angle(x) + 1.0)
    times = [0.0, 5.5]
    a = solve_circle(rho0, 9.0, times, modes=1024)
    b = solve_circle(rho0, 9.0, times, modes=2048, courant=0.2)
    assert a.values[-1].max() * 2 * np.pi > 3  # clusters are forming
    assert abs(a.values[-1].mean() * 2 * np.pi - 1.0) < 1e-13
    assert a.tail(1) < 1e-11
    fine = b.values[-1][::2]  # the same angles
    assert np.abs(a.values[-1] - fine).max() < 1e-9 * a.values[-1].max()  # measured 2.6e-10


def test_exact_integrals_of_the_interpolant():
    theta = 2 * np.pi * np.arange(64) / 64
    rho = 0.3 + 0.1 * np.cos(2 * theta) + 0.05 * np.sin(7 * theta + 0.3)
    sol = CircleSolution(np.zeros(1), rho[None, :], 1.0, "softmax", 0)
    f = lambda t: 0.3 + 0.1 * np.cos(2 * t) + 0.05 * np.sin(7 * t + 0.3)
    a, b, c = -0.7, 2.9, 0.4
    mass, second = sol.integrals(0, a, b, c)
    assert mass == pytest.approx(integrate.quad(f, a, b)[0], rel=1e-13)
    assert second == pytest.approx(integrate.quad(lambda t: (t - c) ** 2 * f(t), a, b)[0], rel=1e-13)
    np.testing.assert_allclose(sol.evaluate(0, np.array([0.1, 1.0]), 1),
                               -0.2 * np.sin(2 * np.array([0.1, 1.0])) + 0.35 * np.cos(7 * np.array([0.1, 1.0]) + 0.3),
                               atol=1e-14)


def test_fourier_field_peaks_and_basins():
    """Two bumps given as a trigonometric density: exact peaks, and basin ends at the minimum."""
    n = 512
    theta = 2 * np.pi * np.arange(n) / n
    f = lambda t: np.exp(6 * np.cos(t - 1.0)) + 0.05 * np.exp(9 * np.cos(t + 2.0))
    df = lambda t: (-6 * np.sin(t - 1.0) * np.exp(6 * np.cos(t - 1.0))
                    - 0.45 * np.sin(t + 2.0) * np.exp(9 * np.cos(t + 2.0)))
    total = integrate.quad(f, -np.pi, np.pi)[0]
    sol = CircleSolution(np.zeros(1), (f(theta) / total)[None, :], 1.0, "softmax", 0)
    frame = analyse_field(FourierField(grid_mesh(n), sol, 0), 0.0, 1 / (2 * np.pi), 0.01)
    assert frame.count == 2
    peaks = np.sort(angle(frame.positions))
    for p, c in zip(peaks, (-2.0, 1.0)):
        assert p == pytest.approx(brentq(df, c - 0.3, c + 0.3, xtol=1e-15), abs=1e-12)
    low = [brentq(df, *bracket, xtol=1e-15) for bracket in ((-1.5, 0.0), (2.0, 3.5))]  # the two minima
    big = integrate.quad(f, low[0], low[1])[0] / total
    i = int(np.argmin(np.abs(angle(frame.positions) - 1.0)))
    assert frame.masses[i] == pytest.approx(big, abs=1e-10)
    assert frame.masses.sum() == pytest.approx(1.0, abs=1e-12)


def test_dg1_clusters_against_the_reference(tmp_path):
    """Issue 11's check, small: DG1 (512 cells) vs the spectral reference, beta = 9, three modes, t <= 6.

    Measured at 256 / 512 / 1024 cells: positions 9e-4 / 1.4e-4 / 1.5e-5 rad, masses 7.7e-5 /
    2.5e-5 / 7.8e-6 (2.7e-3 / 1.5e-3 / 8e-4 with region ends on cell vertices), peak heights
    5e-4 / 5e-5 / 7e-6 relative, crossing times (2x-5x) 1e-4 / 2e-5 / 1.6e-5 relative.
    """
    from helpers.runs import pde_result

    from meanfield.config import load_config

    expr = "1 + 0.04*cos(2*arctan2(y, x) + 0.3) + 0.05*cos(3*arctan2(y, x) + 2.1) + 0.03*cos(5*arctan2(y, x) + 4.0)"
    config = load_config({"mesh": {"sphere": "S1", "resolution": 512}, "scheme": {"kind": "dg1"},
                          "model": {"beta": 9.0}, "initial": {"kind": "expression", "expression": expr},
                          "time": {"t_final": 6.0}})
    ref = analyse_spectral(solve_circle(Problem(config).initial(), 9.0, np.round(np.arange(0, 6.0001, 0.125), 10),
                                         modes=2048))
    pde = analyse_run(pde_result(config, np.arange(0, 6.0001, 0.25), tmp_path / "run"))
    assert pde.counts[0] == 3 and pde.counts[-1] == 5 and [e.kind for e in pde.events] == ["birth", "birth"]
    comparisons = frame_comparisons(pde, ref)
    assert len(comparisons) == 25 and all(c.unmatched == 0 for c in comparisons)
    assert max(c.summary()["position"] for c in comparisons) < 3e-4
    assert max(c.summary()["mass"] for c in comparisons) < 5e-5
    assert max(abs(c.summary()["height"]) for c in comparisons) < 2e-4
    crossings = [r["relative"] for r in crossing_differences(pde, ref, comparisons) if np.isfinite(r["relative"])]
    assert len(crossings) >= 6 and max(map(abs, crossings)) < 1e-4
