"""Long-time dynamics on S^1: a Lagrangian reference, cluster events, merge tables.

* :mod:`.tokens`: quantile tokens moved by the exact S^1 field (Fourier-Bessel series,
  DOP853): the high-accuracy reference for formation, merges and the metastable state;
* :mod:`.events`: clusters of weighted point sets (tokens or atoms) over time, their merges
  and metastable states;
* :mod:`.compare`: a history (hybrid run) against the reference: merge times, late clusters;
* :mod:`.study`: reference and hybrid-run histories, the merge table against beta,
  :func:`long_time_study` (``meanfield longtime``); :mod:`.files`, :mod:`.plots`.

Serial and pure numpy/scipy.
"""

from .compare import HistoryComparison, compare_histories
from .events import DELTA, LINK_DENSITY, MIN_MASS, ClusterHistory, Event, State, cluster_history, group_points
from .study import BetaRow, LongTimeStudy, beta_table, long_time_study, reference_history, run_history
from .tokens import CircleField, TokenSolution, iterate_tokens, quantile_tokens, solve_tokens

__all__ = [
    "DELTA",
    "BetaRow",
    "HistoryComparison",
    "LongTimeStudy",
    "beta_table",
    "long_time_study",
    "reference_history",
    "run_history",
    "LINK_DENSITY",
    "MIN_MASS",
    "CircleField",
    "ClusterHistory",
    "Event",
    "State",
    "TokenSolution",
    "cluster_history",
    "compare_histories",
    "group_points",
    "iterate_tokens",
    "quantile_tokens",
    "solve_tokens",
]
