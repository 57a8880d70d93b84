"""Choosing an evaluator by name (the ``[nonlocal]`` section of a config)."""

from __future__ import annotations

from ..choices import FIELD_METHODS
from ..model import AttentionModel
from .auto import AutoEvaluator
from .base import DEFAULT_TOL, NonlocalEvaluator
from .direct import DirectEvaluator
from .fast import FastEvaluator

METHODS = FIELD_METHODS

__all__ = ["DEFAULT_TOL", "METHODS", "make_evaluator"]


def make_evaluator(
    model: AttentionModel, comm=None, method: str = "direct", tol: float = DEFAULT_TOL, direct_sums: bool = False
) -> NonlocalEvaluator:
    """Build the evaluator named ``method`` for ``model`` on ``comm``.

    Parameters
    ----------
    model
        Attention model.
    comm
        MPI communicator (``None``: serial).
    method
        One of :data:`METHODS`: ``"direct"`` (exact), ``"fast"`` (harmonic transforms and
        expansions, d = 2 or 3) or ``"auto"`` (whichever a cost model says is cheaper,
        decided at the first evaluation).  The fast field expands the kernel ``exp``: a model
        whose attention kind has another kernel is refused ``"fast"`` and given direct sums
        by ``"auto"``.
    tol
        Requested relative accuracy of the velocity (used by approximate evaluators).
    direct_sums
        Let the fast evaluator sum exactly over a rank's few fixed points instead of a NUFFT
        where that is cheaper (:func:`~meanfield.nonlocal_field.transforms.point_transform`):
        results then agree across rank counts to the NUFFT's accuracy, not to round-off.
    """
    if method == "direct":
        return DirectEvaluator(model, comm)
    if method == "fast":
        if not model.kind.exponential:
            raise ValueError(f"nonlocal.method: 'fast' expands the kernel exp; {model.attention!r} attention "
                             "has another one (use 'direct' or 'auto')")
        return FastEvaluator(model, comm, tol, direct_sums=direct_sums)
    if method == "auto":
        return AutoEvaluator(model, comm, tol, direct_sums)
    raise ValueError(f"nonlocal.method: must be one of {METHODS}, got {method!r}")
