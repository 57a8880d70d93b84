"""Sphere meshes: generation, files and distribution over MPI ranks.

* S^2: the icosahedral sphere at refinement level L (``20 * 4**L`` flat triangles, vertices
  on the unit sphere), or any triangle mesh that meshio reads (gmsh ``.msh``, ``.vtu``, ...).
* S^1: ``N`` equal segments of the unit circle embedded in R^2, or a line mesh from a file.

Raw meshes are (points, cells) numpy arrays built on rank 0.  :func:`distribute` hands them
to dolfinx, which partitions them with facet ghosting (``GhostMode.shared_facet``), so that
every facet of an owned cell has both its cells on the rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._fem import dolfinx as _dolfinx

SPHERES: dict[str, int] = {"S1": 2, "S2": 3}  # sphere name -> ambient dimension d
ON_SPHERE_TOL = 1e-8


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
        return "S1" if self.points.shape[1] == 2 else "S2"


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


def check_on_sphere(points: np.ndarray, where: str, tol: float = ON_SPHERE_TOL) -> None:
    """Raise :class:`MeshError` unless every point has norm 1 to within ``tol``."""
    off = np.abs(np.linalg.norm(points, axis=1) - 1.0)
    if off.size and off.max() > tol:
        i = int(off.argmax())
        raise MeshError(
            f"{where}: vertex {i} at {points[i].tolist()} is off the unit sphere by "
            f"{off[i]:.3e} (tolerance {tol:g}); project the vertices onto |x| = 1"
        )


def read_mesh_file(path: str | Path, sphere: str | None = None) -> RawMesh:
    """Read a sphere mesh with meshio and check it.

    Triangles make an S^2 mesh (3D points), lines an S^1 mesh (the z column is dropped when
    all zero).  Vertices not on the unit sphere are refused.
    """
    import meshio

    path = Path(path)
    if not path.is_file():
        raise MeshError(f"mesh.file: no such file: {path}")
    try:
        m = meshio.read(path)
    except Exception as exc:  # meshio raises many kinds of errors
        raise MeshError(f"mesh.file: meshio cannot read {path}: {exc}") from None
    kind = "triangle" if sphere != "S1" and "triangle" in m.cells_dict else "line"
    if kind not in m.cells_dict:
        raise MeshError(f"mesh.file: {path} has no {'triangle' if sphere == 'S2' else 'line'} cells")
    cells = np.asarray(m.cells_dict[kind], dtype=np.int64)
    pts = np.asarray(m.points, dtype=float)
    d = 3 if kind == "triangle" else 2
    if pts.shape[1] > d:
        if np.any(pts[:, d:] != 0):
            raise MeshError(f"mesh.file: {path} has line cells but points outside the plane z = 0")
        pts = pts[:, :d]
    used = np.unique(cells)  # drop points no cell uses (gmsh keeps geometry nodes)
    renumber = np.full(len(pts), -1, dtype=np.int64)
    renumber[used] = np.arange(len(used))
    raw = RawMesh(np.ascontiguousarray(pts[used]), renumber[cells])
    if sphere is not None and raw.sphere != sphere:
        raise MeshError(f"mesh.file: {path} is an {raw.sphere} mesh but mesh.sphere = {sphere!r}")
    check_on_sphere(raw.points, f"mesh.file ({path})")
    return raw


def write_mesh_file(path: str | Path, mesh: RawMesh) -> None:
    """Write a raw mesh with meshio (format from the file extension)."""
    import meshio

    kind = "triangle" if mesh.points.shape[1] == 3 else "line"
    pts = mesh.points if kind == "triangle" else np.column_stack([mesh.points, np.zeros(len(mesh.points))])
    path = Path(path)
    fmt = "gmsh" if path.suffix == ".msh" else None  # meshio would pick ANSYS for .msh
    meshio.write(path, meshio.Mesh(pts, [(kind, mesh.cells)]), file_format=fmt)


def raw_mesh(sphere: str, resolution: int | None = None, file: str | Path | None = None) -> RawMesh:
    """The raw mesh a ``[mesh]`` config section describes (serial, no dolfinx)."""
    if sphere not in SPHERES:
        raise MeshError(f"mesh.sphere: must be one of {sorted(SPHERES)}, got {sphere!r}")
    if file is not None:
        return read_mesh_file(file, sphere)
    if resolution is None:
        raise MeshError("mesh.resolution: give a resolution or a file")
    return icosphere(int(resolution)) if sphere == "S2" else circle(int(resolution))


def distribute(comm, mesh: RawMesh | None):
    """Partition a raw mesh given on rank 0 over ``comm`` with facet ghosting.

    Parameters
    ----------
    comm
        MPI communicator.
    mesh
        The raw mesh on rank 0 (ignored on other ranks).

    Returns
    -------
    dolfinx.mesh.Mesh
        P1 (flat) manifold mesh; ``topology.original_cell_index`` maps local cells to the
        raw mesh's cell order.
    """
    dolfinx = _dolfinx()
    import basix.ufl
    import dolfinx.graph

    d = comm.bcast(mesh.points.shape[1] if comm.rank == 0 else None, root=0)
    cell = "triangle" if d == 3 else "interval"
    if comm.rank == 0:
        pts, cells = mesh.points, mesh.cells
    else:
        pts, cells = np.empty((0, d)), np.empty((0, d), dtype=np.int64)
    element = basix.ufl.element("Lagrange", cell, 1, shape=(d,))
    partitioner = dolfinx.mesh.create_cell_partitioner(
        dolfinx.graph.partitioner(), dolfinx.mesh.GhostMode.shared_facet, 2
    )
    msh = dolfinx.mesh.create_mesh(comm, cells, element, pts, partitioner=partitioner)
    tdim = msh.topology.dim
    msh.topology.create_connectivity(tdim - 1, tdim)
    msh.topology.create_connectivity(tdim, tdim - 1)
    return msh


def load_distributed(comm, sphere: str, resolution: int | None = None, file: str | Path | None = None):
    """Build or read a mesh on rank 0 and distribute it; errors are raised on every rank."""
    from .collective import on_root

    built: list[RawMesh] = []  # filled on rank 0 only; distribute() reads it there
    on_root(comm, lambda: built.append(raw_mesh(sphere, resolution, file)), MeshError)
    return distribute(comm, built[0] if built else None)
