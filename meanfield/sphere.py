"""Pure-numpy geometry of the unit sphere S^{d-1} and of flat cells inscribed in it.

Shared by the PDE schemes, the particle samplers and the studies (none of which should
import another's internals): unit vectors, the sphere's measure, flat cell measures and the
degree-4 cell quadrature used for initial cell averages and exact references.

Cell averages of a density f on the sphere are computed as ``(1/|c|) int_c f(x/|x|) dA``
over the flat cell ``c`` with a degree-4 rule (6-point Dunavant on triangles, 3-point Gauss
on segments): exact for polynomials of degree 4 on the flat cell, so the averages are
accurate to O(h^2) and better than the schemes that use them.
"""

from __future__ import annotations

import numpy as np

from .model import project_tangent
from .spheres import sphere_area as sphere_area


def normalize(v: np.ndarray) -> np.ndarray:
    """Rows of ``v`` scaled to unit length."""
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def tangent_frames(points: np.ndarray, first: np.ndarray | None = None) -> np.ndarray:
    """Orthonormal bases (n, d - 1, d) of the tangent planes at unit vectors ``points`` (n, d),
    d = 2 or 3.

    The first vector is ``first`` (n, d) projected on the tangent plane and normalised, or
    without it: S^1 the counter-clockwise tangent, S^2 ``axis x x`` normalised for the
    coordinate axis least aligned with x.  S^2: a right-handed pair (e1, e2) with e1 x e2 = x.
    """
    points = np.asarray(points, dtype=float)
    if first is not None:
        e1 = normalize(project_tangent(points, first))
    elif points.shape[1] == 2:
        e1 = np.stack([-points[:, 1], points[:, 0]], axis=1)
    else:
        e1 = normalize(np.cross(np.eye(3)[np.argmin(np.abs(points), axis=1)], points))
    if points.shape[1] == 2:
        return e1[:, None, :]
    return np.stack([e1, np.cross(points, e1)], axis=1)


def subsample(points: np.ndarray, max_points: int, seed: int = 0) -> np.ndarray:
    """At most ``max_points`` of the points (rows), a uniform subsample of a fixed seed, in order."""
    if len(points) <= max_points:
        return points
    return points[np.sort(np.random.default_rng(seed).choice(len(points), max_points, replace=False))]


def cell_measure(vertices: np.ndarray) -> np.ndarray:
    """Length (S^1) or area (S^2) of flat cells given their vertices (n, nv, d)."""
    if vertices.shape[2] == 2:
        return np.linalg.norm(vertices[:, 1] - vertices[:, 0], axis=1)
    return 0.5 * np.linalg.norm(
        np.cross(vertices[:, 1] - vertices[:, 0], vertices[:, 2] - vertices[:, 0]), axis=1
    )


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
