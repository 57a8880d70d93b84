"""Peaks and basins of a field on the cell graph: steepest ascent, then persistence.

Definition
----------
1. *Steepest ascent*: every cell points to the highest of itself and its neighbours (ties:
   the higher cell index counts as higher, so the order is strict); following the pointers
   ends at a local maximum, whose *basin* is every cell that ends there (on S^1: the arc
   between two consecutive local minima).
2. *Persistence*: basins are merged as the level sinks from the top (0-dimensional
   persistence, elder rule).  Where two regions first meet, at the saddle value s, the one
   with the lower peak h survives as a separate region if its peak is a cluster peak:
   ``h >= threshold`` and ``h - s >= prominence * h``; otherwise its peak is dropped and its
   region joins the region across that saddle.  The prominence test removes round-off and
   sampling wiggles, and two real clusters approaching each other merge when the dip between
   them falls below ``prominence`` of the lower peak.  The threshold test hands low bumps
   (and the stray tokens between clusters of a particle run) to the neighbouring cluster.
3. The *clusters* are the surviving peaks, and their regions partition the sphere: every
   cell belongs to a cluster, unless the global maximum itself is below the threshold (then
   there is no cluster).

The defaults, named once for every cluster count of the package (``meanfield clusters``, the
point sets of ``meanfield longtime``, ``meanfield plot``): the threshold is :data:`LEVEL` times
the uniform density ``1/|S|`` and the prominence :data:`PROMINENCE`.
"""

from __future__ import annotations

import numpy as np

from .graph import CellGraph

#: Least peak density of a cluster, in multiples of the uniform density ``1/|S|`` (the threshold).
LEVEL = 1.0
#: Least relative depth ``(h - s) / h`` of the dip that separates two clusters.
PROMINENCE = 0.01


def strict_rank(values: np.ndarray) -> np.ndarray:
    """Rank of each cell in the strict order (value, then index)."""
    rank = np.empty(len(values), dtype=np.int64)
    rank[np.lexsort((np.arange(len(values)), values))] = np.arange(len(values))
    return rank


def ascent_roots(values: np.ndarray, graph: CellGraph) -> np.ndarray:
    """The local maximum that steepest ascent reaches from each cell, (cells,)."""
    rank = strict_rank(values)
    cand = np.concatenate([np.arange(len(values))[:, None], graph.neighbours], axis=1)
    ranks = np.where(cand >= 0, rank[cand], -1)
    parent = cand[np.arange(len(values)), ranks.argmax(axis=1)]
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return parent
        parent = grand


def saddles(values: np.ndarray, graph: CellGraph, roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Adjacent basins and the highest pass between them.

    Returns
    -------
    pairs
        (B, 2) roots of adjacent basins, ``a < b``.
    heights
        (B,) the saddle: the largest ``min(f_i, f_j)`` over adjacent cells i, j across the two.
    """
    e = graph.edges()
    ra, rb = roots[e[:, 0]], roots[e[:, 1]]
    cross = ra != rb
    pairs = np.sort(np.stack([ra[cross], rb[cross]], axis=1), axis=1)
    passes = np.minimum(values[e[cross, 0]], values[e[cross, 1]])
    if not len(pairs):
        return pairs.reshape(0, 2), passes
    unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
    heights = np.full(len(unique), -np.inf)
    np.maximum.at(heights, inverse.ravel(), passes)
    return unique, heights


def significant_owner(values: np.ndarray, roots: np.ndarray, pairs: np.ndarray, heights: np.ndarray,
                      threshold: float, prominence: float) -> dict[int, int]:
    """Map every basin root to the surviving peak whose region holds it (module docstring)."""
    rank = strict_rank(values)
    basins = np.unique(roots)
    parent = {int(r): int(r) for r in basins}  # union-find over basins
    top = {int(r): int(r) for r in basins}  # peak of each component (at its root)
    owner = {int(r): int(r) for r in basins}
    members = {int(r): [int(r)] for r in basins}  # basins owned by each peak

    def find(r: int) -> int:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    for k in np.argsort(-heights, kind="stable"):
        a, b = int(pairs[k, 0]), int(pairs[k, 1])
        ca, cb = find(a), find(b)
        if ca == cb:
            continue
        if rank[top[ca]] < rank[top[cb]]:  # ca is the younger component
            ca, cb, a, b = cb, ca, b, a
        young = top[cb]
        if values[young] < threshold or values[young] - heights[k] < prominence * values[young]:
            target = owner[a]
            for basin in members[young]:
                owner[basin] = target
            members[target].extend(members.pop(young))
        parent[cb] = ca
    return owner


def cluster_labels(values: np.ndarray, graph: CellGraph, threshold: float,
                   prominence: float) -> tuple[np.ndarray, np.ndarray]:
    """Clusters of a field on the cell graph (module docstring).

    Parameters
    ----------
    values
        (cells,) the field (density averages or samples), >= 0.
    threshold
        Least peak height of a cluster.
    prominence
        Least relative depth ``(h - s) / h`` of a significant peak, in [0, 1).

    Returns
    -------
    labels
        (cells,) cluster index of each cell (-1 everywhere when there is no cluster).
    peaks
        (P,) the peak cell of each cluster, tallest first.
    """
    roots = ascent_roots(values, graph)
    owner = significant_owner(values, roots, *saddles(values, graph, roots), threshold, prominence)
    rank = strict_rank(values)
    peaks = np.array(sorted({p for p in owner.values() if values[p] >= threshold}, key=lambda p: -rank[p]),
                     dtype=np.int64)
    index = np.full(len(values), -1, dtype=np.int64)
    index[peaks] = np.arange(len(peaks))
    lookup = np.zeros(len(values), dtype=np.int64)
    lookup[list(owner)] = list(owner.values())
    return index[lookup[roots]], peaks
