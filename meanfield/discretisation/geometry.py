"""Rank-local geometry of a flat (P1) sphere mesh, as numpy arrays, for numpy schemes.

dolfinx partitions the mesh and owns the ghost layer; this module reads off what a
finite-volume or DG scheme needs: cell vertices, measures and centroids, and for every
facet touching an owned cell its two cells, its points and one single-valued unit normal.

The facet normal is that of the great circle through the facet (S^2: ``a x b`` for the edge
from a to b; S^1: the tangent at the vertex), oriented from the facet's first to its
second cell.  It is tangent to the sphere at the facet midpoint and identical from both
sides, so the upwind flux through the facet is single-valued and mass is conserved exactly,
unlike the two in-plane co-normals of the flat cells (dolfinx's ``FacetNormal`` on a manifold
mesh: each cell's own co-normal, so ``n('+') + n('-')`` is O(h), not 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._fem import dolfinx as _dolfinx
from ..sphere import cell_measure, normalize


@dataclass
class MeshGeometry:
    """Geometry of the local cells (owned first, then ghosts) and of the needed facets.

    Attributes
    ----------
    d
        Ambient dimension (2: S^1, 3: S^2).
    num_owned, num_local
        Owned cells, and owned plus ghost cells.
    vertices
        (num_local, d, d): each cell's vertex coordinates (2 vertices on S^1, 3 on S^2).
    measure
        (num_local,): flat cell length or area.
    centroid
        (num_local, d): flat centroids projected onto the sphere.
    original_index
        (num_owned,): each owned cell's index in the serial input mesh.
    facet_cells
        (num_facets, 2): the two local cells of each facet touching an owned cell.
    facet_vertices
        (num_facets, d - 1, d): facet vertex coordinates (one point on S^1, two on S^2).
    facet_normal
        (num_facets, d): unit normal from the first to the second cell.
    facet_measure
        (num_facets,): chord length on S^2, 1 on S^1.
    """

    d: int
    num_owned: int
    num_local: int
    vertices: np.ndarray
    measure: np.ndarray
    centroid: np.ndarray
    original_index: np.ndarray
    facet_cells: np.ndarray
    facet_vertices: np.ndarray
    facet_normal: np.ndarray
    facet_measure: np.ndarray

    @property
    def facet_midpoint(self) -> np.ndarray:
        """(num_facets, d): facet midpoints projected onto the sphere."""
        return normalize(self.facet_vertices.mean(axis=1))


def mesh_geometry(msh) -> MeshGeometry:
    """Read the local geometry off a distributed dolfinx sphere mesh (P1 geometry)."""
    dolfinx = _dolfinx()
    tdim = msh.topology.dim
    d = msh.geometry.dim
    cmap = msh.topology.index_map(tdim)
    num_owned, num_local = cmap.size_local, cmap.size_local + cmap.num_ghosts
    x = msh.geometry.x[:, :d]
    vertices = x[msh.geometry.dofmaps[0][:num_local, : tdim + 1]]
    centroid = normalize(vertices.mean(axis=1))

    msh.topology.create_connectivity(tdim - 1, tdim)
    f2c = msh.topology.connectivity(tdim - 1, tdim)
    fmap = msh.topology.index_map(tdim - 1)
    nfacets = fmap.size_local + fmap.num_ghosts
    counts = np.diff(f2c.offsets)[:nfacets]
    interior = np.flatnonzero(counts == 2)
    links = f2c.array[f2c.offsets[interior][:, None] + np.arange(2)]
    keep = (links < num_owned).any(axis=1)
    facets, links = interior[keep], links[keep]
    nodes = dolfinx.mesh.entities_to_geometry(msh, tdim - 1, facets.astype(np.int32))
    fverts = x[nodes]
    if d == 3:
        normal = normalize(np.cross(fverts[:, 0], fverts[:, 1]))
        fmeasure = np.linalg.norm(fverts[:, 1] - fverts[:, 0], axis=1)
    else:
        p = fverts[:, 0]
        normal = np.stack([-p[:, 1], p[:, 0]], axis=1)
        fmeasure = np.ones(len(facets))
    flip = np.einsum("ij,ij->i", normal, centroid[links[:, 1]] - centroid[links[:, 0]]) < 0
    normal[flip] *= -1.0
    return MeshGeometry(
        d=d,
        num_owned=num_owned,
        num_local=num_local,
        vertices=vertices,
        measure=cell_measure(vertices),
        centroid=centroid,
        original_index=np.asarray(msh.topology.original_cell_index[:num_owned], dtype=np.int64),
        facet_cells=links.astype(np.int64),
        facet_vertices=fverts,
        facet_normal=normal,
        facet_measure=fmeasure,
    )
