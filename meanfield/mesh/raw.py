"""Serial sphere meshes as numpy arrays: the icosahedral sphere (S^2) and the circle (S^1).

Raw meshes are (points, cells) arrays built or read on one rank; their cell order is the
*global order* in which every run writes its results, whatever the rank count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..spheres import SPHERES as SPHERES  # sphere name -> descriptor
from ..spheres import sphere_of_dimension


class MeshError(ValueError):
    """A mesh that cannot be used; the message names the field or file."""


@dataclass(frozen=True)
class RawMesh:
    """A serial sphere mesh: vertex coordinates and cell-to-vertex connectivity.

    Attributes
    ----------
    points
        Shape (vertices, d), d = 2 (S^1) or 3 (S^2).
    cells
        Shape (cells, 2) segments or (cells, 3) triangles, int64.
    """

    points: np.ndarray
    cells: np.ndarray

    @property
    def sphere(self) -> str:
        described = sphere_of_dimension(self.points.shape[1])
        assert described is not None, "a mesh's points are in R^2 or R^3"
        return described.name


def icosphere(level: int) -> RawMesh:
    """Icosahedral sphere refined ``level`` times by edge bisection (20 * 4**level cells).

    New vertices are edge midpoints projected onto the unit sphere; triangles are oriented
    counter-clockwise seen from outside.
    """
    if level < 0:
        raise MeshError(f"mesh.resolution: the refinement level must be >= 0, got {level}")
    t = (1.0 + 5.0**0.5) / 2.0
    pts = np.array(
        [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t],
         [0, -1, -t], [0, 1, -t], [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]],
        dtype=float,
    )
    pts /= np.linalg.norm(pts, axis=1)[:, None]
    cells = np.array(
        [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4],
         [11, 10, 2], [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8],
         [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]],
        dtype=np.int64,
    )
    for _ in range(level):
        edges = np.sort(np.concatenate([cells[:, [0, 1]], cells[:, [1, 2]], cells[:, [2, 0]]]), axis=1)
        unique, inverse = np.unique(edges, axis=0, return_inverse=True)
        mid = pts[unique[:, 0]] + pts[unique[:, 1]]
        mid /= np.linalg.norm(mid, axis=1)[:, None]
        n = cells.shape[0]
        m01, m12, m20 = (len(pts) + inverse.reshape(3, n)).astype(np.int64)
        a, b, c = cells.T
        cells = np.concatenate(
            [np.stack(s, axis=1) for s in ((a, m01, m20), (b, m12, m01), (c, m20, m12), (m01, m12, m20))]
        )
        pts = np.concatenate([pts, mid])
    return RawMesh(pts, cells)


def circle(n: int) -> RawMesh:
    """The unit circle cut into ``n`` equal segments (vertex k at angle 2 pi k / n)."""
    if n < 3:
        raise MeshError(f"mesh.resolution: S1 needs at least 3 cells, got {n}")
    theta = 2.0 * np.pi * np.arange(n) / n
    pts = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    cells = np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1).astype(np.int64)
    return RawMesh(pts, cells)


#: The mesh generators by name (a sphere descriptor's ``mesh_generator``, :mod:`meanfield.spheres`):
#: the mesh of ``mesh.resolution``.
GENERATORS = {"icosphere": icosphere, "circle": circle}
