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
masses and widths integrate ``rho_c |c| w_q`` at the flat rule's points.  Regions are sets of
cells; on S^1 their ends are then moved from the cell vertex to the reconstructed minimum
of the density nearby (the mass of the arc in between changes region), which matters where
two clusters meet at a high saddle, e.g. while they merge: a cell edge is up to h/2 from the
minimum, a mass error of ``rho_saddle h / 2`` (4e-3 at 2048 cells for a saddle at 17x uniform).
On S^2 region boundaries stay on cell edges.  A width is
``sqrt(int_region d(x, peak)^2 rho / mass)``, d the geodesic distance.  Peak positions from
polynomials of degree 4 beat degrees 2 and 3 by 3-20x on sums of vMF bumps on S^2.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ...peaks import cluster_labels
from .cells import AnalysisMesh
from .coords import exp_map, geodesic, log_map
from .reconstruction import fit_extremum

#: Patch rings and polynomial degree of the peak reconstruction.
RINGS, DEGREE = 2, 4


def region_integrals(points: np.ndarray, masses: np.ndarray, labels: np.ndarray,
                     positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mass and second moment ``sum m d(x, peak)^2`` of labelled weighted points per cluster.

    Parameters
    ----------
    points, masses
        (N, d) points and (N,) their masses.
    labels
        (N,) cluster of each point, -1 for none.
    positions
        (P, d) the clusters' peaks.
    """
    keep = labels >= 0
    lab, m = labels[keep], masses[keep]
    p = len(positions)
    return np.bincount(lab, m, p), np.bincount(lab, m * geodesic(points[keep], positions[lab]) ** 2, p)


def widths(mass: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``sqrt(second / mass)`` (0 for an empty region)."""
    return np.sqrt(np.clip(second, 0.0, None) / np.where(mass > 0, mass, 1.0))


class Field(ABC):
    """A density on an analysis mesh (see the module docstring)."""

    #: What the field is made of (reported by the analysis).
    source: str = ""
    mesh: AnalysisMesh
    values: np.ndarray

    @abstractmethod
    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        """Position (d,) and height of the peak whose top cell is ``cell``."""

    @abstractmethod
    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Masses (P,) and widths (P,) of the cluster regions ``labels == i`` about ``positions[i]``."""

    def clusters(self, threshold: float, prominence: float) -> tuple[np.ndarray, np.ndarray]:
        """Cluster labels (cells,) and peak cells (P,), tallest first: :func:`~meanfield.peaks.basins.cluster_labels`
        of :attr:`values`."""
        return cluster_labels(self.values, self.mesh.graph, threshold, prominence)

    def atom_parts(self, labels: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Per cluster: the mass of the atoms in it and its heaviest atom's id; None for a field
        without atoms (:mod:`.atoms`)."""
        return None


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

    source = "averages"

    def __init__(self, mesh: AnalysisMesh, averages: np.ndarray, areas: np.ndarray | None = None) -> None:
        self.mesh = mesh
        self.values = np.asarray(averages, float)
        self.areas = mesh.areas if areas is None else np.asarray(areas, float)

    def averaging(self, patch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Points (R, q, d) and weights (R, q) of the cell averages of the patch cells."""
        points, w = self.mesh.flat_rule
        return points[patch], np.broadcast_to(w, (len(patch), len(w)))

    def extremum(self, cell: int, maximum: bool = True) -> tuple[np.ndarray, float, bool]:
        """The reconstructed maximum (or minimum) near a cell (:func:`.reconstruction.fit_extremum`)."""
        patch = self.mesh.graph.ring(cell, RINGS)
        points, weights = self.averaging(patch)
        return fit_extremum(self.mesh.centroids[cell], points, weights, self.values[patch], DEGREE,
                            self.mesh.cell_size, maximum=maximum)

    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        return self.extremum(cell)[:2]

    def mass_points(self) -> tuple[np.ndarray, np.ndarray]:
        """Quadrature points (cells, q, d) and the density's mass at them (cells, q)."""
        points, w = self.mesh.flat_rule
        return points, (self.values * self.areas)[:, None] * w

    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        points, masses = self.mass_points()
        q = masses.shape[1]
        mass, second = region_integrals(points.reshape(-1, self.mesh.d), masses.ravel(), np.repeat(labels, q),
                                        positions)
        if self.mesh.dimension == 1:  # regions meet at points
            self._move_ends(labels, positions, mass, second)
        return mass, widths(mass, second)

    def _move_ends(self, labels: np.ndarray, positions: np.ndarray, mass: np.ndarray, second: np.ndarray) -> None:
        """S^1: move each region end from the cell vertex to the reconstructed minimum (in place).

        The mass of the arc between the vertex and the minimum changes region; it is the
        minimum value times the arc length, accurate to ``O(rho'' arc^3)`` since rho' = 0 there.
        """
        for c, n, v in self.mesh.region_ends(labels):
            x, low, found = self.extremum(c if self.values[c] <= self.values[n] else n, maximum=False)
            if not found:
                continue
            vertex = self.mesh.vertices[v]
            s = log_map(vertex, x[None])[0, 0]
            inward = np.sign(log_map(vertex, self.mesh.centroids[n][None])[0, 0])  # towards n
            give, take = (labels[n], labels[c]) if s * inward > 0 else (labels[c], labels[n])
            moved = max(low, 0.0) * abs(s)
            middle = exp_map(vertex, np.array([[0.5 * s]]))[0]
            mass[give] -= moved
            mass[take] += moved
            second[give] -= moved * geodesic(middle, positions[give]) ** 2
            second[take] += moved * geodesic(middle, positions[take]) ** 2


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

    source = "dg1 state"

    def __init__(self, mesh: AnalysisMesh, vertex_densities: np.ndarray) -> None:
        rule = mesh.curved_rule
        self.m = np.asarray(vertex_densities, float) * rule.vertex_jacobians
        self._m_at_points = self.m @ rule.barycentric.T  # (cells, q)
        areas = rule.weights.sum(axis=1)
        super().__init__(mesh, self._m_at_points @ rule.reference_weights / areas, areas)

    def averaging(self, patch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rule = self.mesh.curved_rule
        return rule.points[patch], rule.weights[patch] / self.areas[patch, None]

    def mass_points(self) -> tuple[np.ndarray, np.ndarray]:
        rule = self.mesh.curved_rule
        return rule.points, self._m_at_points * rule.reference_weights
