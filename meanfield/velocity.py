"""The velocity of a layer schedule: the active layer's attention field plus its feed-forward block.

Shared by the PDE scheme and the particle solver.  :class:`LayerVelocity` is one callable
with the signature of a measure's velocity field, ``(targets, sources, weights) -> X``; the
simulation switches its layer at layer boundaries (:meth:`LayerVelocity.enter`), never
inside a step.  The attention part is evaluated by a nonlocal evaluator
(:func:`~meanfield.nonlocal_field.make_evaluator`) built for the layer's attention model:
consecutive layers with the same attention model (Q, K, V, heads, beta, kind) keep the
evaluator and everything it cached from the points, so only a change of attention sets the
field up again.  One evaluator is held at a time (a fast evaluator's caches can take
hundreds of MB), so an attention model that comes back after another one is set up anew.
A layer without attention (``attention = "none"``) calls no evaluator at all: its velocity
is the feed-forward block's, local and free of communication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .layers import Layer, LayerSchedule
from .model import VelocityField
from .nonlocal_field import NonlocalEvaluator, make_evaluator
from .nonlocal_field.base import FieldValues, PointGroup, components, mixed
from .observables import measure_observables, moment_observables


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of the attention field: its targets, sources, weights and values (the
    adjoint linearises a finite-volume stage with the forward run's own, :mod:`meanfield.adjoint`)."""

    targets: np.ndarray
    sources: np.ndarray
    weights: np.ndarray
    values: FieldValues


class LayerVelocity:
    """The velocity field of one layer of a schedule at a time (see the module docstring).

    Parameters
    ----------
    schedule
        The layer schedule.
    comm
        MPI communicator of the evaluators (``None``: serial).
    method, tol, direct_sums
        The ``[nonlocal]`` settings of the evaluators.
    fixed_points
        Promise the evaluators that targets and sources are the same arrays at every call
        (mesh points: the PDE), so they may cache what they derive from them.

    Attributes
    ----------
    index
        The active layer's index in ``schedule.layers``.
    evaluator
        The active layer's attention evaluator, ``None`` for a layer without attention.
    last
        The last evaluation of one measure by :meth:`__call__` (``None`` before one, or when
        set so by a caller that wants to know whether a call evaluated).
    """

    def __init__(self, schedule: LayerSchedule, comm=None, method: str = "direct", tol: float = 1e-10,
                 fixed_points: bool = False, direct_sums: bool = False) -> None:
        self.schedule, self.comm, self.method, self.tol = schedule, comm, method, tol
        self.direct_sums = direct_sums
        self.fixed_points = fixed_points
        self.index = -1
        self.evaluator: NonlocalEvaluator | None = None
        self._direct: NonlocalEvaluator | None = None
        self.last: Evaluation | None = None
        self.enter(0)

    @property
    def layer(self) -> Layer:
        """The active layer."""
        return self.schedule.layers[self.index]

    def enter(self, index: int) -> None:
        """Make layer ``index`` the active one (collective when it builds an evaluator)."""
        if index == self.index:
            return
        attention = self.schedule.layers[index].attention
        current = None if self.evaluator is None else self.evaluator.model
        if attention is None:
            self.evaluator = None
        elif current is None or attention.to_dict() != current.to_dict():
            self.evaluator = None  # release the old caches before building the new ones
            self.evaluator = make_evaluator(attention, self.comm, self.method, self.tol, self.direct_sums)
        self.index = index

    def __call__(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The active layer's velocity at the targets: attention of the measure plus feed-forward."""
        ffn = self.layer.ffn
        if self.evaluator is None:
            return np.zeros_like(targets) if ffn is None else ffn.velocity(targets)
        values = self.evaluator.evaluate(targets, sources, weights, fixed_sources=self.fixed_points,
                                         fixed_targets=self.fixed_points)
        self.last = Evaluation(targets, sources, weights, values)
        X = values.velocity(self.evaluator.model, targets)
        return X if ffn is None else X + ffn.velocity(targets)

    def many(self, targets: np.ndarray, sources: np.ndarray, columns: np.ndarray,
             directions: np.ndarray | None = None, mixing: np.ndarray | None = None) -> np.ndarray:
        """The velocities (k, m, d) of k measures on the same sources, weights ``columns`` (n, k),
        in one batched evaluation (:meth:`~meanfield.nonlocal_field.base.NonlocalEvaluator.velocities`);
        with ``directions`` (m, d) or (m, j, d), their components along them, (k, m) or (k, m, j);
        with ``mixing`` (k, c), of the k measures ``columns @ mixing.T``."""
        ffn = self.layer.ffn
        if self.evaluator is None:
            k = columns.shape[1] if mixing is None else len(mixing)
            X = np.zeros((k,) + (targets.shape if directions is None else directions.shape[:-1]))
        else:
            X = self.evaluator.velocities(targets, sources, columns, fixed_sources=self.fixed_points,
                                          fixed_targets=self.fixed_points, directions=directions, mixing=mixing)
        if ffn is None:
            return X
        local = ffn.velocity(targets)
        return X + (local if directions is None else components(local, directions))[None]

    def groups(self, targets: Sequence[PointGroup], sources: Sequence[PointGroup]) -> list[np.ndarray]:
        """The active layer's velocity at each group of targets, of the measure made of all the
        ``sources`` groups (mesh points and atoms, say); collective."""
        return self._groups(self.evaluator, targets, sources)

    def direct_groups(self, targets: Sequence[PointGroup], sources: Sequence[PointGroup]) -> list[np.ndarray]:
        """:meth:`groups` by direct sums whatever ``method`` is: exact and ``O(m n)``, without the
        fixed cost of a fast evaluation, for a few points (atoms alone); collective."""
        if self.evaluator is not None and (self._direct is None or self._direct.model is not self.evaluator.model):
            self._direct = make_evaluator(self.evaluator.model, self.comm, "direct")
        return self._groups(None if self.evaluator is None else self._direct, targets, sources)

    def _groups(self, evaluator: NonlocalEvaluator | None, targets: Sequence[PointGroup],
                sources: Sequence[PointGroup]) -> list[np.ndarray]:
        if evaluator is None:
            out = [np.zeros_like(t.points) for t in targets]
        else:
            values = evaluator.evaluate_groups(targets, sources)
            out = [v.velocity(evaluator.model, t.points) for v, t in zip(values, targets, strict=True)]
        ffn = self.layer.ffn
        return out if ffn is None else [X + ffn.velocity(t.points) for X, t in zip(out, targets, strict=True)]

    def observables(self, points: np.ndarray, weights: np.ndarray, fixed_sources: bool = False,
                    extra: PointGroup | None = None) -> dict[str, float]:
        """The measure observables, with the active layer's attention energy (``nan`` without
        attention) (collective).  ``extra``: more sources of the measure (this rank's atoms)."""
        if self.evaluator is None:
            if extra is not None:
                assert extra.weights is not None
                points, weights = np.concatenate([points, extra.points]), np.concatenate([weights, extra.weights])
            return {**moment_observables(self.comm, points, weights), "energy": float("nan")}
        return measure_observables(self.evaluator, points, weights, fixed_sources, extra)

    def describe(self) -> str:
        """For the log: e.g. ``"auto attention + feed-forward field in 3 layers"``."""
        layers = self.schedule.layers
        parts = ([f"{self.method} attention"] if any(layer.attention is not None for layer in layers) else []) \
            + (["feed-forward"] if any(layer.ffn is not None for layer in layers) else [])
        return " + ".join(parts or ["zero"]) + " field" + (f" in {len(layers)} layers" if len(layers) > 1 else "")


def velocities(field: VelocityField, targets: np.ndarray, sources: np.ndarray, columns: np.ndarray,
               directions: np.ndarray | None = None, mixing: np.ndarray | None = None) -> np.ndarray:
    """The velocities (k, m, d) under ``field`` of k measures on the same sources, weights
    ``columns`` (n, k), or with ``directions`` (m, d) or (m, j, d) their components along them
    (k, m) or (k, m, j) (a scheme's normal velocities, or tangent frames): the field's own
    batched ``many`` when it has one (a :class:`LayerVelocity`, or a wrapper of one), else one
    call per measure (a prescribed rotation).  With ``mixing`` (k, c), of the k measures
    ``columns @ mixing.T`` (:func:`~meanfield.nonlocal_field.base.mixed`)."""
    many = getattr(field, "many", None)
    if many is not None:
        return many(targets, sources, columns, directions, mixing)
    columns = mixed(columns, mixing)
    X = np.stack([field(targets, sources, np.ascontiguousarray(columns[:, c])) for c in range(columns.shape[1])])
    return X if directions is None else components(X, directions)
