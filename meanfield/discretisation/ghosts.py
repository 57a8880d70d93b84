"""The ghost exchange of values per cell: this rank's owned cells' values -> all its local cells'.

A scheme keeps its state on the owned cells; fluxes through the facets between an owned and a
ghost cell need the ghost's value.  :class:`CellGhosts` sends them through dolfinx's scatter
over the mesh's cell index map: one vector of the cells with a block of values each (one
density, a DG1 cell's vertex values, the values of k states side by side), kept per block size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._fem import dolfinx as _dolfinx


class CellGhosts:
    """The ghost exchange of a distributed mesh's cells (see the module docstring).

    Parameters
    ----------
    msh
        The distributed dolfinx mesh; its local cells are the owned ones, then the ghosts.
    """

    def __init__(self, msh) -> None:
        self.map = msh.topology.index_map(msh.topology.dim)
        self.serial = msh.comm.size == 1
        self._vectors: dict[int, Any] = {}  # block size -> a dolfinx vector of the cells

    def __call__(self, owned: np.ndarray) -> np.ndarray:
        """The values (num_local, ...) of the local cells from those (num_owned, ...) of the owned
        ones, with the ghosts' from their owners (collective).  On one rank (no ghosts) the owned
        values themselves, contiguous; else a view of the exchange's vector, overwritten by the
        next exchange of the same block size."""
        if self.serial:
            return np.ascontiguousarray(owned)
        block = owned.shape[1:]
        size = int(np.prod(block, dtype=int))
        vector = self._vectors.get(size)
        if vector is None:
            vector = self._vectors[size] = _dolfinx().la.vector(self.map, bs=size)
        values = vector.array.reshape((-1,) + block)
        values[: owned.shape[0]] = owned
        vector.scatter_forward()
        return values
