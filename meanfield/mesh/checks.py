"""Checks that a raw mesh is a usable mesh of the unit sphere."""

from __future__ import annotations

import numpy as np

from .raw import MeshError

ON_SPHERE_TOL = 1e-8


def check_on_sphere(points: np.ndarray, where: str, tol: float = ON_SPHERE_TOL) -> None:
    """Raise :class:`MeshError` unless every point has norm 1 to within ``tol``."""
    off = np.abs(np.linalg.norm(points, axis=1) - 1.0)
    if off.size and off.max() > tol:
        i = int(off.argmax())
        raise MeshError(
            f"{where}: vertex {i} at {points[i].tolist()} is off the unit sphere by "
            f"{off[i]:.3e} (tolerance {tol:g}); project the vertices onto |x| = 1"
        )
