"""Curved (P2) sphere cells: the quadratic map from the reference simplex onto the sphere.

Each flat cell of a P1 sphere mesh becomes a quadratic cell whose nodes lie on the sphere:
the vertices, plus the edge midpoints projected radially (basix node order: triangle
``[v0, v1, v2, mid(1,2), mid(0,2), mid(0,1)]``, interval ``[v0, v1, mid(0,1)]``).  A P2
edge lies in the plane of its great circle, so it projects radially onto the same arc as
the flat edge, and the cell's distance from the sphere is O(h^3): geometric errors do not
cap the order of a second-order scheme.

Reference points are given in barycentric coordinates ``lambda`` (vertex ``i`` of the
reference simplex has ``lambda_i = 1``); reference coordinates are ``xi = lambda[1:]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import factorial

import numpy as np

from .._fem import dolfinx as _dolfinx
from ..sphere import normalize

#: Local edges (pairs of local vertices) in basix P2 node order, per number of vertices.
_EDGES: dict[int, list[tuple[int, int]]] = {3: [(1, 2), (0, 2), (0, 1)], 2: [(0, 1)]}


def reference_volume(k: int) -> float:
    """Measure of the reference k-simplex (1/2 for the triangle, 1 for the interval)."""
    return 1.0 / factorial(k)


def barycentric_gradients(nv: int) -> np.ndarray:
    """d lambda_i / d xi_j of the reference simplex with ``nv`` vertices, shape (nv, nv - 1)."""
    return np.vstack([-np.ones((1, nv - 1)), np.eye(nv - 1)])


def p2_basis(bary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P2 Lagrange basis and its reference gradients at barycentric points.

    Parameters
    ----------
    bary
        (..., nv) barycentric coordinates (nv = 3 triangle, 2 interval).

    Returns
    -------
    values
        (..., nn) basis values in basix node order (nn = 6 or 3).
    grads
        (..., nn, nv - 1) derivatives with respect to the reference coordinates.
    """
    nv = bary.shape[-1]
    edges = _EDGES[nv]
    lam = [bary[..., i] for i in range(nv)]
    values = [l * (2.0 * l - 1.0) for l in lam] + [4.0 * lam[a] * lam[b] for a, b in edges]
    dlam = np.zeros(bary.shape[:-1] + (nv + len(edges), nv))  # d basis / d lambda
    for i in range(nv):
        dlam[..., i, i] = 4.0 * lam[i] - 1.0
    for e, (a, b) in enumerate(edges):
        dlam[..., nv + e, a] = 4.0 * lam[b]
        dlam[..., nv + e, b] = 4.0 * lam[a]
    return np.stack(values, axis=-1), dlam @ barycentric_gradients(nv)


def area_element(jac: np.ndarray) -> np.ndarray:
    """sqrt(det(J^T J)) of Jacobians (..., d, k) with k = 1 or 2."""
    if jac.shape[-1] == 1:
        return np.linalg.norm(jac[..., 0], axis=-1)
    return np.linalg.norm(np.cross(jac[..., 0], jac[..., 1]), axis=-1)


def surface_gradients(jac: np.ndarray) -> np.ndarray:
    """Surface gradients ``J (J^T J)^{-1} grad_xi lambda_i`` of the barycentric coordinates.

    Parameters
    ----------
    jac
        (..., d, k) Jacobians of the cell map.

    Returns
    -------
    np.ndarray
        (..., d, k + 1): column ``i`` is the tangential gradient of ``lambda_i``.
    """
    k = jac.shape[-1]
    metric = np.swapaxes(jac, -1, -2) @ jac
    gradients = np.broadcast_to(barycentric_gradients(k + 1).T, metric.shape[:-2] + (k, k + 1))
    return jac @ np.linalg.solve(metric, gradients)


@dataclass(frozen=True)
class CurvedCells:
    """P2 nodes of a set of cells and the map of barycentric points onto them.

    Attributes
    ----------
    nodes
        (cells, nn, d) node coordinates in basix order, all on the unit sphere.
    """

    nodes: np.ndarray

    def map(self, bary: np.ndarray, cells: np.ndarray | slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """Points and Jacobians of barycentric points in the given cells.

        Parameters
        ----------
        bary
            (q, nv) points common to all cells, or (cells, q, nv) per cell.
        cells
            The cells (indices or a slice) the points belong to.

        Returns
        -------
        x
            (cells, q, d) mapped points (on the P2 cell, not projected).
        jac
            (cells, q, d, k) Jacobians d x / d xi.
        """
        values, grads = p2_basis(bary)
        nodes = self.nodes[cells]
        if bary.ndim == 2:
            return np.einsum("qn,cnd->cqd", values, nodes), np.einsum("qnk,cnd->cqdk", grads, nodes)
        return np.einsum("cqn,cnd->cqd", values, nodes), np.einsum("cqnk,cnd->cqdk", grads, nodes)

    def measure(self, bary: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Cell measures ``int_ref |J| dxi`` with a reference rule (weights summing to 1)."""
        k = self.nodes.shape[2] - 1
        _, jac = self.map(bary)
        return reference_volume(k) * area_element(jac) @ weights


def curved_mesh(msh):
    """The P2 version of a distributed P1 sphere mesh, nodes projected onto the sphere.

    The topology (cells, ghosts, numbering) is shared with ``msh``.

    Returns
    -------
    mesh
        The dolfinx mesh with P2 geometry (the DG1 function space lives on it).
    cells
        :class:`CurvedCells` of the local (owned + ghost) cells.
    """
    dolfinx = _dolfinx()
    tdim = msh.topology.dim
    d = msh.geometry.dim
    curved = dolfinx.fem.interpolate_geometry(msh, dolfinx.fem.coordinate_element(msh.topology.cell_type, 2))
    x = curved.geometry.x
    x[:, :d] = normalize(x[:, :d])
    cmap = msh.topology.index_map(tdim)
    dofs = curved.geometry.dofmaps[0][: cmap.size_local + cmap.num_ghosts]
    return curved, CurvedCells(np.ascontiguousarray(x[dofs][..., :d]))
