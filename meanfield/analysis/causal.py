"""What the positions of a causal run draw from each other: the attention map a(t; s, s').

In a causal (decoder) run a token at position s and point x attends to the positions s' <= s
with the weights of its softmax: head h gives the slice j the share

    w_kj(x) = c_kj Z_j(x) / sum_i c_ki Z_i(x),   Z_j(x) = int exp(beta <Q_h x, K_h y>) rho_j(y) dy,

with ``c_kj = 1`` for j < k, ``1/2`` for j = k (the midpoint rule of :mod:`meanfield.causal`)
and 0 for j > k.  The attention map averages these shares over slice k's tokens,

    a[k, j] = sum_h |w_h| / sum_h' |w_h'| * int rho_k(x) w_kj(x) dx,

so each row is a probability over the positions at or before it (lower triangular, rows
summing to 1): the mass that position s_k draws from s_j.  For unnormalised attention the
same shares say where a token's attention goes (its field is not divided by the sum).  An
s-independent density gives ``a[k, j] = c_kj / (k + 1/2)``: every earlier position alike,
half as much from one's own.

:func:`attention_map` evaluates it from the slices' cell averages (the midpoint rule on the
cells: sources at the centroids with weights ``area * rho``), one field evaluation per slice
with the run's nonlocal evaluator (direct or fast, as ``nonlocal.method`` picks).
:func:`whole_measure` and :func:`position_slice` turn a causal run into the plain run of the
whole token distribution or of one position, for the analyses made for plain runs (clusters).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ..model import AttentionModel
from ..nonlocal_field import make_evaluator


def attention_shares(model: AttentionModel, points: np.ndarray, areas: np.ndarray, densities: np.ndarray, *,
                     method: str = "auto", tol: float = 1e-10) -> np.ndarray:
    """The attention map a[k, j] of M slices' densities (module docstring).

    Parameters
    ----------
    model
        The attention model (its heads, beta and kind).
    points, areas
        (C, d) cell centroids on the sphere and (C,) cell measures.
    densities
        (M, C) each slice's cell averages (each of mass 1 for a probability density).
    method, tol
        The nonlocal evaluator (``direct``, ``fast`` or ``auto``) and its tolerance.

    Returns
    -------
    (M, M) lower-triangular array whose rows sum to 1 (slices with mass).
    """
    from mpi4py import MPI

    densities = np.atleast_2d(np.asarray(densities, float))
    M = densities.shape[0]
    evaluator = make_evaluator(model, MPI.COMM_SELF, method, tol)
    # log Z_j(x) per head: (M, heads, C); a slice without mass has log Z = -inf
    log_z = np.empty((M, len(model.heads), len(points)))
    for j, rho in enumerate(densities):
        values = evaluator.evaluate(points, points, areas * rho, fixed_sources=True, fixed_targets=True)
        with np.errstate(divide="ignore"):
            log_z[j] = np.log(values.Z) + values.log_scale
    head_weights = np.abs([h.weight for h in model.heads])
    head_weights = head_weights / head_weights.sum()
    shares = np.zeros((M, M))
    for k in range(M):
        log_c = np.zeros(k + 1)
        log_c[k] = np.log(0.5)
        logits = log_c[:, None, None] + log_z[: k + 1]  # (k+1, heads, C)
        with np.errstate(invalid="ignore"):
            w = np.exp(logits - logsumexp(logits, axis=0))  # the softmax over the positions j <= k
        w = np.einsum("jhc,h->jc", np.nan_to_num(w), head_weights)  # (k+1, C): the heads' average
        mass = areas * densities[k]
        total = mass.sum()
        if total > 0:
            shares[k, : k + 1] = (w @ mass) / total
    return shares


def attention_map(result: Any, t: float, *, method: str | None = None) -> np.ndarray:
    """The attention map of a causal run at the output time nearest ``t`` (:func:`attention_shares`).

    Parameters
    ----------
    result
        A causal PDE run (:func:`meanfield.load_run`): ``densities`` (T, M, C), ``positions``,
        ``centroids``, ``areas`` and its config.
    t
        The time (the nearest output is used).
    method
        The nonlocal evaluator (default the run's ``nonlocal.method``).
    """
    from ..config import load_config
    from ..problem import Problem

    if getattr(result, "positions", None) is None:
        raise ValueError(f"{getattr(result, 'path', 'run')}: not a causal run (model.mask = 'causal'): "
                         "no positions to map")
    problem = Problem(load_config(result.config))
    schedule = problem.schedule()
    layer = schedule.layers[schedule.index_until(float(result.times[int(np.argmin(np.abs(result.times - t)))]))]
    if layer.attention is None:
        raise ValueError("the layer at this time has no attention: no attention map")
    return attention_shares(layer.attention, np.asarray(result.centroids), np.asarray(result.areas),
                            result.density(t), method=method or problem.field.method, tol=problem.field.tol)


def whole_measure(result: Any) -> Any:
    """A causal PDE run result as the plain run of the whole token distribution: the mean of the
    slices' densities (each a probability density, so the mean has mass 1; its observables are
    already the whole distribution's).  Any other run (without positions, or of particles)
    is returned as it is."""
    if getattr(result, "positions", None) is None or getattr(result, "densities", None) is None:
        return result
    vertex = result.vertex_densities
    return replace(result, densities=result.densities.mean(axis=1), positions=None, observables_by_position={},
                   vertex_densities=None if vertex is None else vertex.mean(axis=1))


def position_slice(result: Any, k: int) -> Any:
    """A causal run result as the plain run of slice ``k`` (position ``result.positions[k]``)."""
    vertex = result.vertex_densities
    return replace(result, densities=result.densities[:, k], positions=None, observables_by_position={},
                   vertex_densities=None if vertex is None else vertex[:, k])
