"""Long-time studies on S^1 (``meanfield longtime``): reference and hybrid histories, merge tables.

:mod:`.study` reduces the Lagrangian reference (:mod:`meanfield.references.lagrangian_circle`)
and hybrid runs to cluster histories (:mod:`meanfield.analysis.longtime`) and tabulates merge
and metastable times against beta.
"""

from .study import BetaRow, LongTimeStudy, beta_table, long_time_study, reference_history, run_history

__all__ = [
    "BetaRow",
    "LongTimeStudy",
    "beta_table",
    "long_time_study",
    "reference_history",
    "run_history",
]
