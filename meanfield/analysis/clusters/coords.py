"""Coordinates on the unit sphere S^1 or S^2: geodesic distance, normal coordinates, angles.

Normal (geodesic polar) coordinates about a point o: the point at geodesic distance r in the
tangent direction u has coordinates ``r u`` in an orthonormal basis of the tangent plane at o
(S^1: the signed angle from o, counter-clockwise).  Distances from o are exact in them, and
they differ from any other smooth chart only at third order near o.
"""

from __future__ import annotations

import numpy as np

from ...sphere import tangent_frames


def geodesic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Great-circle distance of unit vectors (rows, broadcast), ``2 arcsin(|x - y| / 2)``.

    Accurate for small distances, unlike ``arccos <x, y>``.
    """
    chord = np.linalg.norm(np.asarray(x) - np.asarray(y), axis=-1)
    return 2.0 * np.arcsin(np.clip(0.5 * chord, 0.0, 1.0))


def tangent_basis(o: np.ndarray) -> np.ndarray:
    """Orthonormal basis (d, d - 1) of the tangent plane at the unit vector o (d = 2 or 3).

    S^1: the counter-clockwise tangent; S^2: a right-handed pair (e1, e2) with e1 x e2 = o.
    """
    return tangent_frames(np.asarray(o, float)[None])[0].T


def log_map(o: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Normal coordinates (n, d - 1) of points x (n, d) about o."""
    basis = tangent_basis(o)
    c = x @ o
    v = x - c[:, None] * o
    s = np.linalg.norm(v, axis=1)
    angle = np.arctan2(s, c)
    scale = np.where(s > 0, angle / np.where(s > 0, s, 1.0), 1.0)
    return (v @ basis) * scale[:, None]


def exp_map(o: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The points (n, d) with normal coordinates y (n, d - 1) about o."""
    v = np.atleast_2d(y) @ tangent_basis(o).T
    r = np.linalg.norm(v, axis=1)
    sinc = np.where(r > 0, np.sin(r) / np.where(r > 0, r, 1.0), 1.0)
    return np.cos(r)[:, None] * o + sinc[:, None] * v


def angle_columns(points: np.ndarray) -> dict[str, np.ndarray]:
    """Angles of points in radians: ``theta`` in (-pi, pi] on S^1; ``lon`` in (-pi, pi], ``lat`` on S^2."""
    lon = np.arctan2(points[:, 1], points[:, 0])
    if points.shape[1] == 2:
        return {"theta": lon}
    return {"lon": lon, "lat": np.arcsin(np.clip(points[:, 2], -1.0, 1.0))}
