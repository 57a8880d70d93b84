"""Choosing an evaluator by name (the ``[nonlocal]`` section of a config)."""

from __future__ import annotations

from ..model import AttentionModel
from .base import NonlocalEvaluator
from .direct import DirectEvaluator

METHODS: tuple[str, ...] = ("direct",)


def make_evaluator(
    model: AttentionModel, comm=None, method: str = "direct", tol: float = 1e-10
) -> NonlocalEvaluator:
    """Build the evaluator named ``method`` for ``model`` on ``comm``.

    Parameters
    ----------
    model
        Attention model.
    comm
        MPI communicator (``None``: serial).
    method
        One of :data:`METHODS`.
    tol
        Requested relative accuracy of the velocity (used by approximate evaluators).
    """
    if method == "direct":
        return DirectEvaluator(model, comm)
    raise ValueError(f"nonlocal.method: must be one of {METHODS}, got {method!r}")
