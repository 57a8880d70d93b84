"""Long-time dynamics on S^1 (issue 12): a Lagrangian reference, cluster events, merge tables.

* :mod:`.tokens`: quantile tokens moved by the exact S^1 field (Fourier-Bessel series,
  DOP853): the high-accuracy reference for formation, merges and the metastable state;
* :mod:`.events`: clusters of weighted point sets (tokens or atoms) over time, their merges
  and metastable states.

Serial and pure numpy/scipy.
"""

from .events import DELTA, MIN_MASS, ClusterHistory, Event, State, cluster_history, group_points
from .tokens import CircleField, TokenSolution, iterate_tokens, quantile_tokens, solve_tokens

__all__ = [
    "DELTA",
    "MIN_MASS",
    "CircleField",
    "ClusterHistory",
    "Event",
    "State",
    "TokenSolution",
    "cluster_history",
    "group_points",
    "iterate_tokens",
    "quantile_tokens",
    "solve_tokens",
]
