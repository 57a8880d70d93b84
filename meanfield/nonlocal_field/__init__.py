"""The nonlocal attention field: evaluators of N, Z and X behind one interface.

Knows nothing of meshes, files or the CLI; the PDE scheme and the particle solver both
evaluate the field through :func:`make_evaluator`.
"""

from .auto import AutoEvaluator
from .base import DEFAULT_TOL, FieldValues, NonlocalEvaluator, PointGroup
from .direct import DirectEvaluator, direct_sums
from .fast import FastEvaluator
from .select import METHODS, make_evaluator

__all__ = [
    "DEFAULT_TOL",
    "FieldValues",
    "NonlocalEvaluator",
    "PointGroup",
    "DirectEvaluator",
    "direct_sums",
    "FastEvaluator",
    "AutoEvaluator",
    "METHODS",
    "make_evaluator",
]
