"""Peaks and basins of a field on a mesh's cell graph (below the solver: atom capture uses them,
and the cluster analysis of :mod:`meanfield.analysis.clusters` builds on them)."""

from .basins import LEVEL, PROMINENCE, ascent_roots, cluster_labels, saddles, significant_owner, strict_rank
from .graph import CellGraph, cell_graph

__all__ = ["LEVEL", "PROMINENCE", "CellGraph", "ascent_roots", "cell_graph", "cluster_labels", "saddles",
           "significant_owner", "strict_rank"]
