"""Clusters of weighted point sets on S^1 over long times: events, comparison, files, plots.

* :mod:`.events`: clusters of weighted point sets (tokens or atoms) over time, their merges
  and metastable states;
* :mod:`.compare`: a history (hybrid run) against a reference: merge times, late clusters;
* :mod:`.files`, :mod:`.plots`: the CSV files and pictures of histories and merge tables.

Serial and pure numpy/scipy.
"""

from .compare import HistoryComparison, compare_histories
from .events import DELTA, LINK_DENSITY, MIN_MASS, PointSetHistory, State, group_points, point_set_history

__all__ = [
    "DELTA",
    "LINK_DENSITY",
    "MIN_MASS",
    "PointSetHistory",
    "HistoryComparison",
    "State",
    "point_set_history",
    "compare_histories",
    "group_points",
]
