"""A Lagrangian long-time reference on S^2: tokens that coalesce once a cluster has collapsed.

Tokens (:func:`coalescing_tokens`)
    n tokens of the spherical Fibonacci lattice mapped by rho0
    (:func:`~meanfield.particles.sampling.fibonacci_sphere`), each of mass ``1/n``, moved by
    the exact mean-field velocity of the weighted point set (the config's attention model,
    evaluated by the package's nonlocal evaluators at ``tol``: the fast field while there are
    many points, direct sums once at most ``direct`` are left) with the projected classical
    RK4 (:func:`~meanfield.particles.integrator.projected_rk4_step`) at a fixed step ``dt``.

Coalescence
    A cluster's tokens close in on each other e-fold per unit time, so a few tens of time
    units after formation they are closer than any scale of the problem.  At every output
    (and every ``coalesce_every`` steps) tokens closer than ``coalesce`` (default 1e-9 rad)
    become one token with the sum of their masses at their mass-weighted centre
    (:func:`coalesce`; a KD-tree finds the pairs).  The change of the field is of the order of
    the squared distance, far below the integration error, while the cost of a collapsed
    cluster drops to one point: the long metastable phase is the weighted particle system of
    the clusters, as the hybrid solver's atoms are, but reached by the tokens themselves and
    at a scale 10^6 times finer than the hybrid's merge distance.


Their merges are read with :func:`meanfield.analysis.longtime.merges.point_merges`, the rule
that reads a hybrid run's atoms too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from ..config import Config
from ..layers import Layer
from ..nonlocal_field import make_evaluator
from ..particles.integrator import projected_rk4_step
from ..particles.sampling import fibonacci_sphere
from ..problem import Problem

#: Tokens closer than this (rad) coalesce.
COALESCE = 1e-9
#: Direct sums from this many points down.
DIRECT = 400


def coalesce(points: np.ndarray, masses: np.ndarray, ids: np.ndarray,
             distance: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points closer than ``distance`` (chains included) as one point: the mass sum at the
    mass-weighted centre, with the id of the heaviest member (the first on a tie).

    Returns ``(points, masses, ids)``, the groups in the order of their first members.
    """
    chord = 2.0 * np.sin(distance / 2.0)
    pairs = cKDTree(points).query_pairs(chord, output_type="ndarray")
    if not len(pairs):
        return points, masses, ids
    n = len(points)
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    _, first, label = np.unique(label, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    label = rank[label]
    mass = np.bincount(label, masses)
    total = np.zeros((len(mass), points.shape[1]))
    np.add.at(total, label, masses[:, None] * points)
    heaviest = np.lexsort((np.arange(n), -masses, label))  # by group, heaviest (then first) member first
    starts = np.flatnonzero(np.r_[True, np.diff(label[heaviest]) != 0])
    return total / np.linalg.norm(total, axis=1, keepdims=True), mass, ids[heaviest[starts]]


@dataclass(frozen=True)
class TokenFrame:
    """The tokens at one output: time, points (m, 3), masses (m,), ids (m,) (a coalesced token
    keeps the id of its heaviest member, as a merged atom does)."""

    t: float
    points: np.ndarray
    masses: np.ndarray
    ids: np.ndarray


def coalescing_tokens(config: Config, n: int, times: Sequence[float], **kwargs: Any) -> Iterator[TokenFrame]:
    """n tokens of the config's initial density (Fibonacci lattice, mass 1/n) moved by
    :func:`coalescing_points` with the config's attention model (one layer, S^2)."""
    problem = Problem(config)
    layers = problem.schedule().layers
    if problem.d != 3 or len(layers) != 1:
        raise ValueError("the S^2 token reference needs mesh.sphere = 'S2' and a single layer")
    x = fibonacci_sphere(n, problem.initial())
    return coalescing_points(layers[0], x, np.full(n, 1.0 / n), times, **kwargs)


def coalescing_points(layer: Layer, points: np.ndarray, masses: np.ndarray, times: Sequence[float], *,
                      dt: float | None = None, tol: float = 1e-10, coalesce_distance: float = COALESCE,
                      coalesce_every: int = 20, direct: int = DIRECT) -> Iterator[TokenFrame]:
    """Weighted points moved by a layer's attention field, coalescing (module docstring).

    Parameters
    ----------
    layer
        The layer (its attention model; no feed-forward block).
    points, masses
        (n, d) initial points on the sphere and (n,) masses; ids are ``0..n-1``.
    times
        Sorted output times >= 0 (the first frame is at ``times[0]``).
    dt
        RK4 step (default ``0.25 / L``, L the layer's Lipschitz bound); each interval between
        outputs is cut into equal steps no longer than dt.
    tol
        Accuracy of the fast field.
    coalesce_distance, coalesce_every
        Coalescence distance (rad) and the steps between two coalescences (besides every output).
    direct
        Direct sums at most this many points.
    """
    if layer.attention is None or layer.ffn is not None:
        raise ValueError("the token reference needs an attention layer without a feed-forward block")
    step = 0.25 / layer.lipschitz_bound() if dt is None else float(dt)
    fast, exact = make_evaluator(layer.attention, None, "fast", tol), make_evaluator(layer.attention, None, "direct")
    x, m = np.asarray(points, float), np.asarray(masses, float)
    ids = np.arange(len(m))
    t, steps = 0.0, 0

    def velocity(y: np.ndarray) -> np.ndarray:
        return (exact if len(y) <= direct else fast).velocity(y, y, m)

    for target in times:
        count = int(np.ceil((target - t) / step - 1e-9)) if target > t else 0
        for _ in range(count):
            x, _ = projected_rk4_step(velocity, x, (target - t) / count)
            steps += 1
            if steps % coalesce_every == 0:
                x, m, ids = coalesce(x, m, ids, coalesce_distance)
        t = float(target)
        x, m, ids = coalesce(x, m, ids, coalesce_distance)
        yield TokenFrame(t, x.copy(), m.copy(), ids.copy())
