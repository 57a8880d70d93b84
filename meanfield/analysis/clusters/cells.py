"""The mesh a cluster analysis works on: cells, adjacency, point location and cell quadrature.

Flat cells carry the finite-volume data: a cell average is ``(1/|c|) int_c rho`` over the flat
cell with the density evaluated radially (the degree-4 rule of :mod:`meanfield.sphere`, as
the runs compute initial averages).  Curved cells carry DG1 data: the P2 map of each cell
onto the sphere (vertices and radially projected edge midpoints, as
:mod:`meanfield.discretisation.dg1` builds it), with the area element J.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ...discretisation.curved import CurvedCells, area_element, reference_volume
from ...mesh import CellLocator, RawMesh
from ...peaks import CellGraph, cell_graph
from ...sphere import cell_measure, cell_quadrature_points, cell_rule, normalize


@dataclass(frozen=True)
class CurvedRule:
    """The degree-4 cell rule mapped onto the curved (P2) cells.

    Attributes
    ----------
    points
        (cells, q, d) quadrature points, projected onto the sphere.
    weights
        (cells, q) ``|T| w_q J(xi_q)``: ``int_K f dA ~ sum_q weights f(points)``.
    reference_weights
        (q,) ``|T| w_q``: ``int_T m dxi ~ sum_q reference_weights m(xi_q)``.
    barycentric
        (q, nv) the points' barycentric coordinates.
    vertex_jacobians
        (cells, nv) J at the cell vertices (DG1: ``m = rho J`` there).
    """

    points: np.ndarray
    weights: np.ndarray
    reference_weights: np.ndarray
    barycentric: np.ndarray
    vertex_jacobians: np.ndarray


class AnalysisMesh:
    """A serial sphere mesh (global cell order) with what the cluster analysis needs.

    Parameters
    ----------
    mesh
        Vertices and cells (S^1 segments or S^2 triangles).
    """

    def __init__(self, mesh: RawMesh) -> None:
        self.raw = mesh
        self.vertices = np.asarray(mesh.points, float)
        self.cells = np.asarray(mesh.cells, np.int64)
        self.d = self.vertices.shape[1]
        self.sphere = mesh.sphere
        #: The sphere's own dimension (:attr:`meanfield.spheres.Sphere.dimension`): on a curve (1)
        #: two clusters' regions meet at a point, on a surface (2) along edges.
        self.dimension = self.d - 1
        corners = self.vertices[self.cells]
        self.centroids = normalize(corners.mean(axis=1))
        self.areas = cell_measure(corners)
        self.graph: CellGraph = cell_graph(self.cells)
        #: typical cell size (radians): mean segment length (S^1), sqrt of the mean area (S^2)
        self.cell_size = float(self.areas.mean() if self.d == 2 else np.sqrt(self.areas.mean()))

    @property
    def num_cells(self) -> int:
        return len(self.cells)

    @cached_property
    def locator(self) -> CellLocator:
        return CellLocator(self.raw)

    @cached_property
    def flat_rule(self) -> tuple[np.ndarray, np.ndarray]:
        """Points (cells, q, d) on the sphere and weights (q,) summing to 1 of the flat-cell rule."""
        return cell_quadrature_points(self.vertices[self.cells])

    @cached_property
    def curved_rule(self) -> CurvedRule:
        """The cell rule on the P2 cells (see :class:`CurvedRule`)."""
        nv = self.cells.shape[1]
        corners = self.vertices[self.cells]
        edges = [(1, 2), (0, 2), (0, 1)] if nv == 3 else [(0, 1)]  # basix P2 node order
        mids = [normalize(corners[:, a] + corners[:, b]) for a, b in edges]
        curved = CurvedCells(np.concatenate([corners, np.stack(mids, axis=1)], axis=1))
        bary, w = cell_rule(self.d)
        x, jac = curved.map(bary)
        _, vertex_jac = curved.map(np.eye(nv))
        ref = reference_volume(nv - 1) * w
        return CurvedRule(normalize(x), ref * area_element(jac), ref, bary, area_element(vertex_jac))

    @cached_property
    def adjacent_pairs(self) -> np.ndarray:
        """(E, 3) adjacent cells (c, n), c < n, and a vertex they share."""
        e = self.graph.edges()
        a, b = self.cells[e[:, 0]], self.cells[e[:, 1]]
        common = (a[:, :, None] == b[:, None, :]).any(axis=2)  # vertex k of c is in n
        return np.column_stack([e, a[np.arange(len(e)), common.argmax(axis=1)]])

    def region_ends(self, labels: np.ndarray) -> np.ndarray:
        """Rows (c, n, vertex) of :attr:`adjacent_pairs` where two clusters' regions meet (S^1: their ends)."""
        c, n = self.adjacent_pairs[:, 0], self.adjacent_pairs[:, 1]
        return self.adjacent_pairs[(labels[c] != labels[n]) & (labels[c] >= 0) & (labels[n] >= 0)]

    def check_centroids(self, centroids: np.ndarray, where: str) -> None:
        """Raise ValueError unless a run's cell centroids are this mesh's (same cells, same order)."""
        if centroids.shape != self.centroids.shape or not np.allclose(centroids, self.centroids, atol=1e-8):
            raise ValueError(f"{where}: the run's cell centroids are not those of its mesh "
                             "(different mesh, or cells not in global order)")
