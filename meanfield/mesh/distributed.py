"""Distribution of a raw sphere mesh over MPI ranks with dolfinx.

:func:`distribute` hands a raw mesh given on rank 0 to dolfinx, which partitions it with
facet ghosting (``GhostMode.shared_facet``), so that every facet of an owned cell has both its
cells on the rank.  dolfinx is imported when a mesh is distributed, not before.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np

from .._fem import dolfinx as _dolfinx
from ..collective import on_root
from .build import raw_mesh
from .raw import MeshError, RawMesh


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

    root = mesh if comm.rank == 0 else None
    d = comm.bcast(root.points.shape[1] if root is not None else None, root=0)
    cell = "triangle" if d == 3 else "interval"
    if root is not None:
        pts, cells = root.points, root.cells
    else:
        pts, cells = np.empty((0, d)), np.empty((0, d), dtype=np.int64)
    element = basix.ufl.element("Lagrange", cell, 1, shape=(d,))
    partitioner = dolfinx.mesh.create_cell_partitioner(
        importlib.import_module("dolfinx.graph").partitioner(), dolfinx.mesh.GhostMode.shared_facet, 2
    )
    msh = dolfinx.mesh.create_mesh(comm, cells, element, pts, partitioner=partitioner)
    tdim = msh.topology.dim
    msh.topology.create_connectivity(tdim - 1, tdim)
    msh.topology.create_connectivity(tdim, tdim - 1)
    return msh


def load_distributed(comm, sphere: str, resolution: int | None = None, file: str | Path | None = None):
    """Build or read a mesh on rank 0 and distribute it; errors are raised on every rank."""
    raw = on_root(comm, lambda: raw_mesh(sphere, resolution, file), MeshError, broadcast=False)
    return distribute(comm, raw)
