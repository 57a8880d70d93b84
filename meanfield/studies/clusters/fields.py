"""Densities the cluster analysis reads: what the watershed sees, peaks, basin moments.

A field lives on an :class:`~.cells.AnalysisMesh` and provides

* ``values``: one number per cell for the watershed (:mod:`.basins`);
* ``peak(cell)``: the sub-cell position and height of the peak whose top cell that is;
* ``moments(labels, positions)``: mass and width of each cluster region.

Mesh fields (this module) hold PDE data: cell averages (finite volumes, or any run whose
snapshots hold averages only) or the DG1 state.  Their peaks come from a polynomial of degree
4 in normal coordinates fitted to the cell averages of the peak cell's 2-ring
(:mod:`.reconstruction`): on S^1 the cell and two on each side (5 averages, interpolation),
on S^2 the cells within two vertex-sharing steps (about 40 averages, least squares for 15
coefficients).  FV averages are over flat cells (the runs' convention), DG1 averages over the
curved cells.

Why averages also for DG1: DG1's cell averages converge faster than its slopes.  Against the
spectral S^1 reference (beta = 9, clusters forming), fitting the averages gave peak positions
of 9e-4 / 1.4e-5 rad at 256 / 1024 cells, fitting the DG1 moments ``int_K rho lambda_i dA``
(the whole DG1 state) 1.5e-3 / 3.4e-4 (first order: the slopes' error); heights 5e-4 / 7e-6
against 1.3e-3 / 2.6e-4.  On S^2 (levels 3-4 against level 5) the averages were 2-4x better
at t >= 1.  For exactly projected data (no evolution) the moments are the better data, which
is not the case that matters.  The DG1 state is used where it is exact: masses and widths
integrate the linear DG1 density (``|T| w_q m(xi_q)`` at the curved rule's points); FV
masses and widths integrate ``rho_c |c| w_q`` at the flat rule's points.  A width is
``sqrt(int_region d(x, peak)^2 rho / mass)``, d the geodesic distance.  Peak positions from
polynomials of degree 4 beat degrees 2 and 3 by 3-20x on sums of vMF bumps on S^2.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .cells import AnalysisMesh
from .coords import geodesic
from .reconstruction import fit_peak

#: Patch rings and polynomial degree of the peak reconstruction.
RINGS, DEGREE = 2, 4


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

    #: What the field is made of (reported by the analysis).
    kind: str = ""
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

    kind = "averages"

    def __init__(self, mesh: AnalysisMesh, averages: np.ndarray, areas: np.ndarray | None = None) -> None:
        self.mesh = mesh
        self.values = np.asarray(averages, float)
        self.areas = mesh.areas if areas is None else np.asarray(areas, float)

    def averaging(self, patch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Points (R, q, d) and weights (R, q) of the cell averages of the patch cells."""
        points, w = self.mesh.flat_rule
        return points[patch], np.broadcast_to(w, (len(patch), len(w)))

    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        patch = self.mesh.graph.ring(cell, RINGS)
        points, weights = self.averaging(patch)
        return fit_peak(self.mesh.centroids[cell], points, weights, self.values[patch], DEGREE, self.mesh.cell_size)

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

    kind = "dg1 state"

    def __init__(self, mesh: AnalysisMesh, vertex_densities: np.ndarray) -> None:
        rule = mesh.curved_rule
        self.m = np.asarray(vertex_densities, float) * rule.vertex_jacobians
        self._m_at_points = self.m @ rule.barycentric.T  # (cells, q)
        areas = rule.weights.sum(axis=1)
        super().__init__(mesh, self._m_at_points @ rule.reference_weights / areas, areas)

    def averaging(self, patch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rule = self.mesh.curved_rule
        return rule.points[patch], rule.weights[patch] / self.areas[patch, None]

    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rule = self.mesh.curved_rule
        masses = self._m_at_points * rule.reference_weights
        cells = np.repeat(np.arange(self.mesh.num_cells), len(rule.reference_weights))
        return region_moments(rule.points.reshape(-1, self.mesh.d), masses.ravel(), cells, labels, positions)
