"""Which mesh cell a point of the sphere lies in (S^1 and S^2), exactly.

A flat cell with vertices ``v_1..v_d`` (2 on S^1, 3 on S^2), projected radially onto the
sphere, is the cone ``{sum_k l_k v_k : l_k >= 0}`` cut with the sphere; the point x lies in
it iff the solution ``l`` of ``[v_1 .. v_d] l = x`` is non-negative.  Candidate cells are the
``k`` cells with the nearest centroids (scipy cKDTree); the first candidate whose cone holds
x is taken (cells share their boundary, ties go to the nearer centroid).  Points no candidate
holds (none on a closed mesh, unless k is too small for a very irregular mesh) are retried
with 8 times as many candidates, then refused.
"""

from __future__ import annotations

import numpy as np

from .raw import RawMesh

TOL = 1e-12


class CellLocator:
    """Locates points of the sphere in the cells of a raw sphere mesh.

    Parameters
    ----------
    mesh
        The serial mesh (cells in global order).
    candidates
        How many nearest-centroid cells are tested first.
    """

    def __init__(self, mesh: RawMesh, candidates: int = 8) -> None:
        from scipy.spatial import cKDTree  # here, not at the top: a command that locates no point does not load it

        self.vertices = mesh.points[mesh.cells]  # (cells, d, d): row k is vertex k
        centroids = self.vertices.mean(axis=1)
        self.tree = cKDTree(centroids / np.linalg.norm(centroids, axis=1)[:, None])
        self.inverse = np.linalg.inv(np.transpose(self.vertices, (0, 2, 1)))  # columns = vertices
        self.candidates = min(candidates, len(mesh.cells))
        self.num_cells = len(mesh.cells)

    def _try(self, points: np.ndarray, k: int) -> np.ndarray:
        _, cand = self.tree.query(points, k=k)
        cand = cand.reshape(len(points), -1)
        lam = np.einsum("nkij,nj->nki", self.inverse[cand], points)
        inside = np.all(lam >= -TOL, axis=2)
        found = inside.any(axis=1)
        return np.where(found, cand[np.arange(len(points)), inside.argmax(axis=1)], -1)

    def locate(self, points: np.ndarray) -> np.ndarray:
        """Cell index (global order) of each point, shape (n,)."""
        cells = self._try(points, self.candidates)
        missing = np.flatnonzero(cells < 0)
        if missing.size:
            cells[missing] = self._try(points[missing], min(8 * self.candidates, self.num_cells))
        if np.any(cells < 0):
            bad = points[np.flatnonzero(cells < 0)[0]]
            raise ValueError(f"point {bad.tolist()} lies in no mesh cell (is the mesh closed?)")
        return cells

    def histogram(self, points: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Mass of the weighted points in each cell (default weights 1/n), shape (cells,)."""
        w = np.full(len(points), 1.0 / len(points)) if weights is None else weights
        return np.bincount(self.locate(points), weights=w, minlength=self.num_cells)
