"""The cell adjacency graph of a sphere mesh, from its connectivity alone.

Two cells are adjacent when they share a vertex: on S^1 a segment's two neighbours along the
circle; on S^2 the cell's vertex 1-ring (about 12 triangles on an icosphere).  Sharing an
edge would be too few on S^2: a smooth peak near a mesh vertex puts the highest cell and a
cell across that vertex (no common edge) both above all their edge-neighbours, so steepest
ascent on edges alone would split one peak into two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CellGraph:
    """Cells sharing a vertex.

    Attributes
    ----------
    neighbours
        (cells, max degree) neighbour indices of each cell, padded with -1.
    """

    neighbours: np.ndarray

    @property
    def num_cells(self) -> int:
        return len(self.neighbours)

    def edges(self) -> np.ndarray:
        """(E, 2) adjacent pairs ``i < j``, each once."""
        rows = np.repeat(np.arange(self.num_cells), self.neighbours.shape[1])
        cols = self.neighbours.ravel()
        keep = cols > rows
        return np.stack([rows[keep], cols[keep]], axis=1)

    def ring(self, cell: int, rings: int = 1) -> np.ndarray:
        """The cell and every cell within ``rings`` steps of it, the cell first."""
        patch = [cell]
        frontier = {cell}
        for _ in range(rings):
            nxt = {int(n) for c in frontier for n in self.neighbours[c] if n >= 0} - set(patch)
            patch.extend(sorted(nxt))
            frontier = nxt
        return np.array(patch, dtype=np.int64)


def cell_graph(cells: np.ndarray) -> CellGraph:
    """The vertex-sharing adjacency of cells given by their vertex indices (C, nv)."""
    from scipy import sparse  # here, not at the top: a command that finds no peaks does not load it

    cells = np.asarray(cells, dtype=np.int64)
    c, nv = cells.shape
    incidence = sparse.csr_matrix((np.ones(c * nv), (np.repeat(np.arange(c), nv), cells.ravel())))
    adjacency = (incidence @ incidence.T).tocsr()
    adjacency.setdiag(0)
    adjacency.eliminate_zeros()
    degree = np.diff(adjacency.indptr)
    out = np.full((c, int(degree.max(initial=0))), -1, dtype=np.int64)
    slot = np.arange(adjacency.nnz) - np.repeat(adjacency.indptr[:-1], degree)
    out[np.repeat(np.arange(c), degree), slot] = adjacency.indices
    return CellGraph(out)
