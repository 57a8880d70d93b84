"""Quadrature on flat sphere-mesh cells mapped radially onto the sphere.

Cell averages of a density f on the sphere are computed as ``(1/|c|) int_c f(x/|x|) dA``
over the flat cell ``c`` with a degree-4 rule (6-point Dunavant on triangles, 3-point Gauss
on segments): exact for polynomials of degree 4 on the flat cell, so the averages are
accurate to O(h^2) and better than the schemes that use them.
"""

from __future__ import annotations

import numpy as np

from .geometry import normalize

_A, _WA = 0.445948490915965, 0.223381589678011
_B, _WB = 0.091576213509771, 0.109951743655322
TRIANGLE_BARYCENTRIC = np.array(
    [[_A, _A, 1 - 2 * _A], [_A, 1 - 2 * _A, _A], [1 - 2 * _A, _A, _A],
     [_B, _B, 1 - 2 * _B], [_B, 1 - 2 * _B, _B], [1 - 2 * _B, _B, _B]]
)
TRIANGLE_WEIGHTS = np.array([_WA] * 3 + [_WB] * 3)
_G = np.sqrt(3.0 / 5.0)
SEGMENT_BARYCENTRIC = np.array([[(1 + s) / 2, (1 - s) / 2] for s in (-_G, 0.0, _G)])
SEGMENT_WEIGHTS = np.array([5.0, 8.0, 5.0]) / 18.0


def cell_rule(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Barycentric points and weights (summing to 1) of the cell rule for S^{d-1}."""
    return (TRIANGLE_BARYCENTRIC, TRIANGLE_WEIGHTS) if d == 3 else (SEGMENT_BARYCENTRIC, SEGMENT_WEIGHTS)


def cell_quadrature_points(vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature points on the sphere (cells, q, d) and weights (q,) summing to 1."""
    bary, weights = cell_rule(vertices.shape[2])
    return normalize(np.einsum("qv,cvd->cqd", bary, vertices)), weights


def cell_averages(f, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Averages of ``f`` (points (n, d) -> values (n,)) over flat cells, evaluated radially.

    Returns
    -------
    values
        (cells, q): ``f`` at the quadrature points, for callers to check.
    averages
        (cells,): the cell averages.
    """
    points, weights = cell_quadrature_points(vertices)
    values = np.asarray(f(points.reshape(-1, points.shape[2])), dtype=float).reshape(points.shape[:2])
    return values, values @ weights
