"""Densities the cluster analysis reads: what the watershed sees, peaks, basin moments.

A field lives on an :class:`~.cells.AnalysisMesh` and provides

* ``values``: one number per cell for the watershed (:mod:`.basins`);
* ``peak(cell)``: the sub-cell position and height of the peak whose top cell that is;
* ``moments(labels, positions)``: mass and width of each cluster region.

Mesh fields (this module) hold PDE data: cell averages (finite volumes, or any run whose
snapshots hold averages only) or the DG1 state.  Their peaks come from a polynomial fitted
to the cell data of a patch (:mod:`.reconstruction`):

=======  ======  ====================================  ======  ===========================
sphere   data    patch                                 degree  functionals / coefficients
=======  ======  ====================================  ======  ===========================
S^1      FV      the cell and 2 on each side           4       5 averages / 5 (interpolation)
S^1      DG1     the cell and 1 on each side           4       6 moments / 5
S^2      FV      the cell's vertex 2-ring (~40 cells)  4       ~40 averages / 15
S^2      DG1     the cell's vertex 1-ring (~13 cells)  4       ~39 moments / 15
=======  ======  ====================================  ======  ===========================

DG1 moments are ``int_K rho lambda_i dA / int_K lambda_i dA`` for the barycentric
coordinates lambda_i of each (curved) cell: the DG1 unknown ``m = rho J`` is the L2
projection of ``rho J`` onto linears in the reference cell, so these moments are exactly what
DG1 knows about rho.  Masses and widths sum the cell rule: FV ``rho_c |c| w_q`` at the
flat rule's points; DG1 ``|T| w_q m(xi_q)`` at the curved rule's points (the cell masses
exactly).  Measured on sums of vMF bumps (``tests/test_clusters.py``): even degrees beat odd
ones (the error of a peak fit is dominated by the symmetric quartic term), and on S^2 the
quartic on these patches beat the quadratic and the cubic by 3-20x in position and height at
icosphere levels 4-5.  A width is ``sqrt(int_region d(x, peak)^2 rho / mass)``, d the geodesic distance.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .cells import AnalysisMesh
from .coords import geodesic
from .reconstruction import fit_peak

#: (patch rings, polynomial degree) of the peak reconstruction per (sphere, data).
RECONSTRUCTION: dict[tuple[str, str], tuple[int, int]] = {
    ("S1", "fv"): (2, 4), ("S1", "dg1"): (1, 4), ("S2", "fv"): (2, 4), ("S2", "dg1"): (1, 4),
}


def region_moments(points: np.ndarray, masses: np.ndarray, cells: np.ndarray, labels: np.ndarray,
                   positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mass and geodesic width about each peak of the weighted points in each cluster region.

    Parameters
    ----------
    points, masses, cells
        (N, d) points, (N,) their masses and (N,) the cells they lie in.
    labels
        (cells,) cluster index of each cell, -1 in none.
    positions
        (P, d) the clusters' peaks.
    """
    lab = labels[cells]
    keep = lab >= 0
    lab, m = lab[keep], masses[keep]
    p = len(positions)
    mass = np.bincount(lab, m, p)
    second = np.bincount(lab, m * geodesic(points[keep], positions[lab]) ** 2, p)
    return mass, np.sqrt(second / np.where(mass > 0, mass, 1.0))


class Field(ABC):
    """A density on an analysis mesh (see the module docstring)."""

    mesh: AnalysisMesh
    values: np.ndarray

    @abstractmethod
    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        """Position (d,) and height of the peak whose top cell is ``cell``."""

    @abstractmethod
    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Masses (P,) and widths (P,) of the cluster regions ``labels == i`` about ``positions[i]``."""


class CellAverages(Field):
    """Density cell averages (finite volumes; or any run that saved averages only).

    Parameters
    ----------
    mesh
        The run's mesh.
    averages
        (cells,) density cell averages.
    areas
        (cells,) the cell measures the run used (mass of cell c = averages[c] * areas[c]);
        default: the flat cell measures.
    """

    kind = "fv"

    def __init__(self, mesh: AnalysisMesh, averages: np.ndarray, areas: np.ndarray | None = None) -> None:
        self.mesh = mesh
        self.values = np.asarray(averages, float)
        self.areas = mesh.areas if areas is None else np.asarray(areas, float)
        self.rings, self.degree = RECONSTRUCTION[(mesh.sphere, self.kind)]

    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        patch = self.mesh.graph.ring(cell, self.rings)
        points, w = self.mesh.flat_rule
        weights = np.broadcast_to(w, (len(patch), len(w)))
        return fit_peak(self.mesh.centroids[cell], points[patch], weights, self.values[patch], self.degree,
                        self.mesh.cell_size)

    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        points, w = self.mesh.flat_rule
        masses = (self.values * self.areas)[:, None] * w
        cells = np.repeat(np.arange(self.mesh.num_cells), len(w))
        return region_moments(points.reshape(-1, self.mesh.d), masses.ravel(), cells, labels, positions)


class DG1Data(CellAverages):
    """The DG1 state: the density at the vertices of every (curved) cell.

    Parameters
    ----------
    mesh
        The run's mesh.
    vertex_densities
        (cells, nv) rho at each vertex of each cell, in the order of ``mesh.cells``; the DG1
        unknown is ``m = rho J`` there, linear in the reference coordinates.
    """

    kind = "dg1"

    def __init__(self, mesh: AnalysisMesh, vertex_densities: np.ndarray) -> None:
        rule = mesh.curved_rule
        self.m = np.asarray(vertex_densities, float) * rule.vertex_jacobians
        self._m_at_points = self.m @ rule.barycentric.T  # (cells, q)
        areas = rule.weights.sum(axis=1)
        super().__init__(mesh, self._m_at_points @ rule.reference_weights / areas, areas)

    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        rule = self.mesh.curved_rule
        patch = self.mesh.graph.ring(cell, self.rings)
        nv = rule.barycentric.shape[1]
        # functional (r, i): int_K rho lambda_i dA / int_K lambda_i dA, rho = m / J
        w = rule.weights[patch][:, None, :] * rule.barycentric.T[None, :, :]  # (R, nv, q)
        norm = w.sum(axis=2, keepdims=True)
        data = np.einsum("rq,q,qi->ri", self._m_at_points[patch], rule.reference_weights, rule.barycentric)
        points = np.repeat(rule.points[patch], nv, axis=0)
        return fit_peak(self.mesh.centroids[cell], points, (w / norm).reshape(-1, w.shape[2]),
                        (data / norm[:, :, 0]).ravel(), self.degree, self.mesh.cell_size)

    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rule = self.mesh.curved_rule
        masses = self._m_at_points * rule.reference_weights
        cells = np.repeat(np.arange(self.mesh.num_cells), len(rule.reference_weights))
        return region_moments(rule.points.reshape(-1, self.mesh.d), masses.ravel(), cells, labels, positions)
