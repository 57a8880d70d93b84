"""Distances between a particle measure and a PDE measure on the sphere.

Both sides are weighted point sets: tokens with weights 1/n, and the PDE as its cell
centroids (on the sphere) with the cell masses ``rho_c |c|`` (the centroid quadrature the
scheme itself uses).  Functions here are serial and pure.

* :func:`moment_errors`: ``mean_error = |m_1 - m_1^ref|`` (Euclidean), ``second_moment_error``
  = Frobenius norm of the difference of the second-moment matrices, ``energy_error`` =
  ``|E - E^ref|``; from observables rows (see :mod:`meanfield.observables`).
* :func:`mmd`: maximum mean discrepancy with the kernel
  ``k(x, y) = exp((<x, y> - 1) / s^2) = exp(-|x - y|^2 / (2 s^2))`` (Gaussian in the chord
  distance, positive definite on the sphere), ``s`` = ``scale``; the kernel sums are the
  attention partition function with ``beta = 1/s^2``, ``Q = K = I``, evaluated exactly
  (``auto`` evaluator at tolerance 1e-13: direct or the harmonic expansion).
* :func:`w1_exact`: W_1 with the geodesic cost ``arccos <x, y>`` by ``ot.emd2``
  (dense cost matrix: for a few thousand tokens).
* :func:`w1_circle`: exact W_1 on S^1 (the weighted median of the CDFs' difference), in radians.
* :func:`sliced_w2`: spherical sliced W_2 (``ot.sliced_wasserstein_sphere``, fixed
  projections seed), any d >= 3.
* :func:`hist_l1`: ``sum_c |p_c - m_c|`` between cell masses; :func:`hist_l1_noise` its
  expectation when p is the histogram of n i.i.d. samples of m, by the normal approximation
  ``E|p_c - m_c| = sqrt(2 m_c (1 - m_c) / (pi n))``.
"""

from __future__ import annotations

import numpy as np

from ..model import AttentionModel

MMD_TOL = 1e-13


def moment_errors(row: dict[str, float], ref: dict[str, float], d: int) -> dict[str, float]:
    """First-moment, second-moment and energy errors of an observables row against a reference."""
    mean = np.array([row[f"mean_{k}"] - ref[f"mean_{k}"] for k in range(d)])
    second = np.zeros((d, d))
    for k in range(d):
        for l in range(k, d):
            second[k, l] = second[l, k] = row[f"m2_{k}{l}"] - ref[f"m2_{k}{l}"]
    return {"mean_error": float(np.linalg.norm(mean)),
            "second_moment_error": float(np.linalg.norm(second)),
            "energy_error": abs(row["energy"] - ref["energy"])}


def kernel_sum(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray, scale: float) -> float:
    """``sum_ij a_i b_j k(x_i, y_j)`` for the MMD kernel of width ``scale``."""
    from ..nonlocal_field import make_evaluator

    beta = 1.0 / scale**2
    model = AttentionModel(d=x.shape[1], beta=beta)
    values = make_evaluator(model, None, "auto", MMD_TOL).evaluate(x, y, b)
    return float(a @ (np.exp(values.log_scale[0] - beta) * values.Z[0]))


def mmd(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray, scale: float = 0.5) -> float:
    """MMD between ``sum a_i delta_{x_i}`` and ``sum b_j delta_{y_j}`` (module docstring)."""
    sq = kernel_sum(x, a, x, a, scale) + kernel_sum(y, b, y, b, scale) - 2.0 * kernel_sum(x, a, y, b, scale)
    return float(np.sqrt(max(sq, 0.0)))


def geodesic_cost(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Matrix of great-circle distances ``arccos <x_i, y_j>``."""
    return np.arccos(np.clip(x @ y.T, -1.0, 1.0))


def w1_exact(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray) -> float:
    """Exact W_1 with the geodesic cost (``ot.emd2``); weights are renormalised to sum 1."""
    import ot

    return float(ot.emd2(a / a.sum(), b / b.sum(), geodesic_cost(x, y), numItermax=10_000_000))


def circle_coordinate(x: np.ndarray) -> np.ndarray:
    """Angle of points on S^1 as a fraction of the turn, in [0, 1)."""
    return np.mod(np.arctan2(x[:, 1], x[:, 0]) / (2.0 * np.pi), 1.0)


def w1_circle(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray) -> float:
    """Exact W_1 on the unit circle (geodesic distance, radians).

    With F - G the difference of the two cumulative distributions along the turn (weights
    renormalised to sum 1), W_1 = 2 pi min_c int_0^1 |F - G - c| (Delon, Salomon and Sobolevski
    2010): c is a median of F - G weighted by the arcs on which it holds, the arc from the last
    point round to the first included.  (POT's ``wasserstein_circle`` with p = 1 is a binary
    search to 1e-6 that returned a full turn for two measures 1e-17 apart, and its closed form
    ``wasserstein1_circle`` leaves out the arc before the first point.)
    """
    points = np.concatenate([circle_coordinate(x), circle_coordinate(y)])
    weights = np.concatenate([a / a.sum(), -b / b.sum()])
    order = np.argsort(points, kind="stable")
    turn = points[order]
    difference = np.cumsum(weights[order])  # F - G on the arc [turn[i], turn[i + 1])
    arcs = np.diff(np.append(turn, turn[0] + 1.0))
    by_value = np.argsort(difference, kind="stable")
    covered = np.cumsum(arcs[by_value])
    median = difference[by_value][min(int(np.searchsorted(covered, 0.5 * covered[-1])), len(covered) - 1)]
    return float(2.0 * np.pi * np.sum(arcs * np.abs(difference - median)))


def sliced_w2(x: np.ndarray, a: np.ndarray, y: np.ndarray, b: np.ndarray,
              projections: int = 100, seed: int = 0) -> float:
    """Spherical sliced W_2 (``ot.sliced_wasserstein_sphere``), d >= 3."""
    import ot

    value = ot.sliced_wasserstein_sphere(x, y, a / a.sum(), b / b.sum(), n_projections=projections, p=2, seed=seed)
    return float(np.asarray(value).item())


def hist_l1(p: np.ndarray, m: np.ndarray) -> float:
    """L1 distance ``sum_c |p_c - m_c|`` between two vectors of cell masses."""
    return float(np.abs(p - m).sum())


def hist_l1_noise(m: np.ndarray, n: int) -> float:
    """Expected :func:`hist_l1` of an n-sample histogram of the cell masses m (normal approx.)."""
    m = np.clip(m / m.sum(), 0.0, 1.0)
    return float(np.sqrt(2.0 * m * (1.0 - m) / (np.pi * n)).sum())
