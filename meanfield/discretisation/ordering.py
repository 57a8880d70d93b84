"""Global order of a distributed mesh's cells: gathering owned rows to rank 0, scattering back.

The global order is the serial input mesh's cell order (``original_index`` of each owned
cell), so arrays gathered here compare entry by entry across rank counts, and an array
saved from a run on P ranks can be scattered onto any other partition.  Rows may carry any
trailing shape (a cell average, or DG1's per-vertex values in the input cell's vertex order,
which dolfinx keeps).
"""

from __future__ import annotations

import numpy as np


def gather_rows(comm, values: np.ndarray, index: np.ndarray, size: int) -> np.ndarray | None:
    """Owned rows in global order on rank 0 (``None`` on other ranks); collective.

    Parameters
    ----------
    values
        (n_owned, ...) rows of this rank's owned cells.
    index
        (n_owned,) their global indices.
    size
        Global number of cells.
    """
    parts = comm.gather((index, values), root=0)
    if comm.rank != 0:
        return None
    out = np.empty((size,) + values.shape[1:], dtype=values.dtype)
    filled = np.zeros(size, dtype=bool)
    for idx, vals in parts:
        out[idx] = vals
        filled[idx] = True
    if not filled.all():
        raise RuntimeError(f"gather_rows: {int((~filled).sum())} of {size} global rows have no owner")
    return out


def scatter_rows(comm, values: np.ndarray | None, index: np.ndarray) -> np.ndarray:
    """This rank's rows ``values[index]`` of a global array given on rank 0; collective."""
    indices = comm.gather(np.asarray(index), root=0)
    parts = [np.ascontiguousarray(values[i]) for i in indices] if comm.rank == 0 else None  # type: ignore[index]
    return comm.scatter(parts, root=0)
