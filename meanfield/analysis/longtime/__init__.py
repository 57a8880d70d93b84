"""Clusters of weighted point sets over long times: events, comparison, files, plots.

* :mod:`.events`: clusters of weighted point sets (tokens or atoms) over time, their merges
  and metastable states;
* :mod:`.merges`: merges of weighted point sets on any sphere by the distance of heavy points
  (the S^2 reference's tokens, a hybrid run's atoms);
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
