"""What the positions of a causal run draw from each other: the attention map a(t; s, s').

In a causal (decoder) run a token at position s and point x attends to the positions s' <= s
with the weights of its softmax: head h gives the slice j the share

    w_kj(x) = c_kj Z_j(x) / sum_i c_ki Z_i(x),   Z_j(x) = int exp(beta <Q_h x, K_h y>) rho_j(y) dy,

with ``c_kj = 1`` for j < k, ``1/2`` for j = k (the midpoint rule of :mod:`meanfield.masks.causal_slices`)
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
The mask reads a causal run back as the plain run of the whole token distribution or of each
position (:func:`meanfield.masks.whole_measure`, :meth:`meanfield.masks.Mask.slice_runs`), for
the analyses made for plain runs (clusters).
"""

from __future__ import annotations

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
    densities = np.atleast_2d(np.asarray(densities, float))
    M = densities.shape[0]
    log_z = _log_z(model, points, [areas * rho for rho in densities], method, tol)
    shares = np.zeros((M, M))
    for k in range(M):
        log_c = np.zeros(k + 1)
        log_c[k] = np.log(0.5)
        shares[k, : k + 1] = _shares(model, log_c[:, None, None] + log_z[: k + 1], areas * densities[k])
    return shares


def _log_z(model: AttentionModel, points: np.ndarray, weights: list[np.ndarray], method: str,
           tol: float) -> np.ndarray:
    """log Z(x) per head of each source measure (cell weights): (measures, heads, C); a measure
    without mass has log Z = -inf."""
    from mpi4py import MPI

    evaluator = make_evaluator(model, MPI.COMM_SELF, method, tol)
    log_z = np.empty((len(weights), len(model.heads), len(points)))
    for j, w in enumerate(weights):
        values = evaluator.evaluate(points, points, w, fixed_sources=True, fixed_targets=True)
        with np.errstate(divide="ignore"):  # a fast field's round-off may leave a part without mass at -0
            log_z[j] = np.log(np.maximum(values.Z, 0.0)) + values.log_scale
    return log_z


def _shares(model: AttentionModel, logits: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """The softmax over the first axis of ``logits`` (parts, heads, C) averaged over the heads
    (weights ``|w_h|``) and over the attending tokens (cell masses ``mass``): (parts,), summing
    to 1 (zeros when ``mass`` has none)."""
    head_weights = np.abs([h.weight for h in model.heads])
    head_weights = head_weights / head_weights.sum()
    with np.errstate(invalid="ignore"):
        w = np.exp(logits - logsumexp(logits, axis=0))
    w = np.einsum("jhc,h->jc", np.nan_to_num(w), head_weights)  # (parts, C): the heads' average
    total = mass.sum()
    return (w @ mass) / total if total > 0 else np.zeros(len(logits))


def attention_over_regions(model: AttentionModel, points: np.ndarray, areas: np.ndarray, densities: np.ndarray,
                           k: int, labels: np.ndarray, regions: int, *, method: str = "auto",
                           tol: float = 1e-10) -> np.ndarray:
    """Where slice ``k``'s attention goes on the sphere: the share of it that falls on each region.

    Slice k's tokens attend to the measure ``mu_k = sum_{j<=k} c_kj rho_j`` (module docstring);
    split into the regions' parts ``mu_k^r`` (``Z_k = sum_r Z_k^r``, linear in the measure), a
    token at x gives region r the share ``Z_k^r(x) / Z_k(x)`` (per head, then the heads'
    average); averaged over slice k's tokens.

    Parameters
    ----------
    model, points, areas, densities
        As in :func:`attention_shares`.
    k
        The attending slice.
    labels
        (C,) region of each cell, in ``0 .. regions - 1``, or -1 (a region of its own: the cells
        in no cluster, last in the result).
    regions
        The number of regions (clusters).

    Returns
    -------
    (regions + 1,) shares summing to 1: one per region, the last for the cells labelled -1.
    """
    densities = np.atleast_2d(np.asarray(densities, float))
    c = np.ones(k + 1)
    c[k] = 0.5
    source = areas * (c @ densities[: k + 1])
    parts = np.where(np.asarray(labels) < 0, regions, labels)
    log_z = _log_z(model, points, [np.where(parts == r, source, 0.0) for r in range(regions + 1)], method, tol)
    return _shares(model, log_z, areas * densities[k])


def attention_from(result: Any, t: float, attending: int, labels: np.ndarray, regions: int, *,
                   method: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Whom slice ``attending`` of a causal run attends to at the output time nearest ``t``: its
    row of :func:`attention_map` (shares over the source positions) and
    :func:`attention_over_regions` (shares over the sphere's regions ``labels``)."""
    layer, problem = _attention_layer(result, t)
    points, areas, rho = np.asarray(result.centroids), np.asarray(result.areas), result.density(t)
    method, tol = method or problem.field.method, problem.field.tol
    by_position = attention_shares(layer, points, areas, rho[: attending + 1], method=method, tol=tol)[attending]
    by_region = attention_over_regions(layer, points, areas, rho, attending, labels, regions, method=method, tol=tol)
    return np.pad(by_position, (0, len(rho) - attending - 1)), by_region


def _attention_layer(result: Any, t: float) -> tuple[AttentionModel, Any]:
    """The attention of the layer at the output time nearest ``t`` and the run's problem."""
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
    return layer.attention, problem


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
    attention, problem = _attention_layer(result, t)
    return attention_shares(attention, np.asarray(result.centroids), np.asarray(result.areas),
                            result.density(t), method=method or problem.field.method, tol=problem.field.tol)
