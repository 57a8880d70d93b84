"""The interacting-token system: tokens distributed over MPI ranks, and their velocity.

Rank r of P owns the contiguous block :func:`token_block` of the n tokens (global order =
rank order), so gathering the blocks in rank order gives the global token array.  The
velocity of the local tokens is the field of the whole measure ``sum_j w_j delta_{x_j}``
(weights 1/n for tokens), evaluated by a :class:`~meanfield.nonlocal_field.NonlocalEvaluator`
with the local tokens as both targets and (this rank's part of the) sources -- the same
evaluator and call the PDE scheme uses for its cell-centroid measure.
"""

from __future__ import annotations

import numpy as np

from ..layers import Layer
from ..model import VelocityField

#: The default step of a layer is ``DT_FACTOR / layer.lipschitz_bound()``.
DT_FACTOR = 0.25


def token_block(n: int, rank: int, size: int) -> slice:
    """The contiguous block of the n tokens that rank ``rank`` of ``size`` owns.

    The first ``n % size`` ranks own one token more than the others.
    """
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def default_dt(layer: Layer) -> float:
    """The default RK4 step of a layer, ``DT_FACTOR / layer.lipschitz_bound()``."""
    return DT_FACTOR / max(layer.lipschitz_bound(), 1e-12)


def attention_field(evaluator) -> VelocityField:
    """The attention velocity of a moving discrete measure, from a nonlocal evaluator."""

    def field(targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return evaluator.velocity(targets, sources, weights)

    return field


class ParticleSystem:
    """This rank's tokens' weights and the velocity of the local tokens.

    Parameters
    ----------
    field
        Velocity field of a discrete measure (collective under MPI).
    weights
        This rank's token weights (1/n for n equal tokens).
    """

    def __init__(self, field: VelocityField, weights: np.ndarray) -> None:
        self.field = field
        self.weights = np.ascontiguousarray(weights, dtype=float)

    def velocity(self, x: np.ndarray) -> np.ndarray:
        """X[mu](x_i) at this rank's tokens, mu = sum_j w_j delta_{x_j} over all ranks."""
        return self.field(x, x, self.weights)
