"""The interacting-token system: tokens distributed over MPI ranks, and their velocity.

Rank r of P owns the contiguous block :func:`token_block` of the n tokens (global order =
rank order), so gathering the blocks in rank order gives the global token array.  The
velocity of the local tokens is the field of the whole measure ``sum_j w_j delta_{x_j}``
(weights 1/n for tokens), evaluated by a :class:`~meanfield.nonlocal_field.NonlocalEvaluator`
with the local tokens as both targets and (this rank's part of the) sources -- the same
evaluator and call the PDE scheme uses for its cell-centroid measure.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..layers import Layer
from ..model import AttentionModel

#: A velocity field of a discrete measure: (targets, source points, source weights) -> X.
Field = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

#: The default step of a layer is ``DT_FACTOR / layer_lipschitz_bound(layer)``.
DT_FACTOR = 0.25


def token_block(n: int, rank: int, size: int) -> slice:
    """The contiguous block of the n tokens that rank ``rank`` of ``size`` owns.

    The first ``n % size`` ranks own one token more than the others.
    """
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (rank < extra))


def lipschitz_bound(model: AttentionModel) -> float:
    """A crude bound of the attention field's Lipschitz constant on the sphere.

    ``sum_h |w_h| ||V_h|| (2 + 2 beta ||Q_h^T K_h||)`` for softmax (the projection contributes
    ~2 ||V||, the softmax weights' gradient 2 beta ||A|| ||V||), multiplied by
    ``exp(beta ||A||)`` for unnormalised attention, whose weights are not normalised
    (spectral norms).
    """
    total = 0.0
    for h in model.heads:
        a = model.beta * np.linalg.norm(h.interaction, 2)
        growth = 1.0 if model.softmax else float(np.exp(a))
        total += abs(h.weight) * np.linalg.norm(h.V, 2) * (2.0 + 2.0 * a) * growth
    return total


def layer_lipschitz_bound(layer: Layer) -> float:
    """:func:`lipschitz_bound` of the layer's attention (if any) plus its feed-forward block's."""
    attention = 0.0 if layer.attention is None else lipschitz_bound(layer.attention)
    return attention + (0.0 if layer.ffn is None else layer.ffn.lipschitz_bound())


def default_dt(layer: Layer) -> float:
    """The default RK4 step of a layer, ``DT_FACTOR / layer_lipschitz_bound(layer)``."""
    return DT_FACTOR / max(layer_lipschitz_bound(layer), 1e-12)


def attention_field(evaluator) -> Field:
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

    def __init__(self, field: Field, weights: np.ndarray) -> None:
        self.field = field
        self.weights = np.ascontiguousarray(weights, dtype=float)

    def velocity(self, x: np.ndarray) -> np.ndarray:
        """X[mu](x_i) at this rank's tokens, mu = sum_j w_j delta_{x_j} over all ranks."""
        return self.field(x, x, self.weights)
