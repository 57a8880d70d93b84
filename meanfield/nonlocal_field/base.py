"""The one interface every nonlocal-field evaluator implements.

An evaluator is built for a model and an MPI communicator.  ``evaluate`` takes this rank's
targets and this rank's weighted sources (the rank-local part of a discrete measure
``mu = sum_j w_j delta_{y_j}``) and returns, for each head and each local target, the sums

    N_h(x) = sum_j w_j exp(beta <Q_h x, K_h y_j>) V_h y_j,   Z_h(x) = sum_j w_j exp(beta <Q_h x, K_h y_j>)

scaled by ``exp(-log_scale)`` so that nothing overflows.  How sources reach other ranks
(gathering them, or reducing their moments) is the evaluator's business.

Point groups.  :meth:`NonlocalEvaluator.evaluate_groups` takes the measure as several groups of
weighted sources and evaluates it at several groups of targets, each group with its own
``fixed`` promise.  A small group that moves (atoms: point masses that are both sources and
targets) can then join fixed mesh points without invalidating what an evaluator keeps for
the fixed groups; :meth:`NonlocalEvaluator.evaluate` is the one-group case.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..choices import FIELD_TOL
from ..model import AttentionModel
from .parallel import allreduce_sum

#: About how many values (targets times measures) :meth:`FieldValues.velocity` forms at a time
#: (measured on S^2 level 4 with 64 measures: 16384-65536 alike, 30% faster than all at once).
VELOCITY_BLOCK = 16384

#: Default accuracy of the fast field (:data:`meanfield.choices.FIELD_TOL`).
DEFAULT_TOL = FIELD_TOL


@dataclass
class FieldValues:
    """Scaled sums of a nonlocal evaluation, per head.

    Attributes
    ----------
    N
        Shape (heads, targets, d): ``exp(-log_scale) * N_h(x)``.
    Z
        Shape (heads, targets): ``exp(-log_scale) * Z_h(x)``.
    log_scale
        Shape (heads, targets): the shift taken out of the exponent.
    """

    N: np.ndarray
    Z: np.ndarray
    log_scale: np.ndarray

    @classmethod
    def empty(cls, heads: int, targets: int, d: int) -> FieldValues:
        """Uninitialised values; ``N`` is stored component-major (``N[h].T`` is contiguous),
        the layout :meth:`velocity` works in."""
        return cls(np.empty((heads, d, targets)).transpose(0, 2, 1), np.empty((heads, targets)),
                   np.empty((heads, targets)))

    def velocity(self, model: AttentionModel, targets: np.ndarray, directions: np.ndarray | None = None) -> np.ndarray:
        """The attention velocity X[mu] at the targets, shape (targets, d); with ``directions``
        (targets, d) or (targets, j, d), its components along them, shape (targets,) or
        (targets, j), without forming X.

        The attention kind combines N and Z (:meth:`~meanfield.attention.Attention.factor`):
        softmax heads divide N by Z (the scale cancels; targets where a head sees no mass get
        zero velocity from it), unnormalised heads multiply the scaled N back by
        ``exp(log_scale)``.  The heads' sum is projected once (P_x is linear).  Values of k
        measures at the same m targets, stored one after the other as k m targets, take the m
        ``targets`` (and ``directions``) once.  Formed component by component, a block of whole
        measures at a time (about :data:`VELOCITY_BLOCK` values: the temporaries stay in a
        core's cache); the velocity is a transposed view of a (d, targets) array.
        """
        kind, d = model.kind, model.d
        xT = np.ascontiguousarray(targets.T)  # (d, m)
        m, total = xT.shape[1], self.Z.shape[1]
        lead = () if directions is None else directions.shape[1:-1]  # () or (j,): directions per target
        XT = np.empty((d, total) if directions is None else (total,) + lead)
        if m == 0:
            return XT.T if directions is None else XT  # no targets (a rank without points)
        k = total // m
        out = XT.reshape((d, k, m) if directions is None else (k, m, -1))
        nT = None if directions is None else np.ascontiguousarray(directions.reshape(m, -1, d).transpose(2, 0, 1))
        along = None if nT is None else np.einsum("dm,dmj->mj", xT, nT)  # x . n: the radial part's share
        Z, log_scale = self.Z.reshape(-1, k, m), self.log_scale.reshape(-1, k, m)
        N = [self.N[h].T.reshape(d, k, m) for h in range(len(model.heads))]
        count = max(VELOCITY_BLOCK // m, 1)
        x = xT[:, None, :]
        for start in range(0, k, count):
            block = slice(start, start + count)
            X = out[:, block] if nT is None else np.empty((d,) + out[block].shape[:2])
            for h, head in enumerate(model.heads):
                factor = kind.factor(head.weight, Z[h][block], log_scale[h][block])
                if h == 0:
                    np.multiply(N[h][:, block], factor, out=X)
                else:
                    X += N[h][:, block] * factor
            radial = np.einsum("dkm,dm->km", X, xT)
            if nT is None:
                for i in range(d):
                    X[i] -= radial * x[i]
            else:
                np.subtract(np.einsum("dkm,dmj->kmj", X, nT), radial[:, :, None] * along, out=out[block])
        return XT.T if directions is None else XT

    def partition_function(self) -> np.ndarray:
        """Unscaled Z_h(x), shape (heads, targets)."""
        return np.exp(self.log_scale) * self.Z


def mixed(columns: np.ndarray, mixing: np.ndarray | None) -> np.ndarray:
    """The weights ``columns @ mixing.T`` of measures combined from ``columns`` (n, c) by
    ``mixing`` (k, c); ``columns`` itself without a mixing."""
    return columns if mixing is None else columns @ np.asarray(mixing, dtype=float).T


def components(vectors: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """The components ``v . n`` of vectors (..., m, d) along the directions (m, d), shape (..., m),
    or along j directions at each point (m, j, d), shape (..., m, j)."""
    if directions.ndim == 2:
        return np.einsum("...md,md->...m", vectors, directions)
    return np.einsum("...md,mjd->...mj", vectors, directions)


@dataclass(frozen=True)
class PointGroup:
    """Points (n, d) on the unit sphere, with weights (n,) when they are sources.

    ``fixed`` promises that ``points`` is the same array, unchanged, as in the previous call
    that passed it with ``fixed=True`` (mesh points); evaluators may then reuse what they
    derived from the points.  The weights may change between calls.
    """

    points: np.ndarray
    weights: np.ndarray | None = None
    fixed: bool = False


def array_key(a: np.ndarray) -> tuple:
    """Identity of an array a caller promised to be fixed: object, buffer, shape and end rows.

    Guards a cache against a different array that happens to reuse a freed object's id.
    """
    return (id(a), a.ctypes.data, a.shape, a[:1].tobytes(), a[-1:].tobytes())


class NonlocalEvaluator(ABC):
    """Evaluates the attention sums of a distributed discrete measure at local targets.

    Parameters
    ----------
    model
        The attention model (heads, beta, attention kind).
    comm
        MPI communicator over which the sources are distributed; ``None`` for serial use
        without mpi4py.
    """

    #: Short name used in configs and metadata.
    name: str = ""

    def __init__(self, model: AttentionModel, comm=None) -> None:
        self.model = model
        self.comm = comm

    @abstractmethod
    def evaluate_groups(
        self, targets: Sequence[PointGroup], sources: Sequence[PointGroup]
    ) -> list[FieldValues]:
        """Evaluate N, Z (scaled) of the measure made of all ``sources`` groups (every rank's)
        at each group of this rank's ``targets``; one :class:`FieldValues` per target group.

        Collective: every rank passes the same number of groups in the same order.
        """

    def evaluate(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        weights: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> FieldValues:
        """Evaluate N, Z (scaled) at this rank's targets (one group of each kind).

        Parameters
        ----------
        targets
            Shape (m, d), points on the unit sphere owned by this rank.
        sources
            Shape (n_local, d), this rank's source points.
        weights
            Shape (n_local,), this rank's source weights (masses).
        fixed_sources
            Promise that ``sources`` is the same array, unchanged, as in the previous call
            with ``fixed_sources=True`` (mesh quadrature points); evaluators may then reuse
            what they derived from the points and only refresh the weights.
        fixed_targets
            The same promise for ``targets`` (mesh points where a scheme needs the velocity).
        """
        group = PointGroup(np.asarray(sources, dtype=float), np.asarray(weights, dtype=float), fixed_sources)
        return self.evaluate_groups([PointGroup(np.asarray(targets, dtype=float), None, fixed_targets)], [group])[0]

    def partition_sums(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        columns: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> np.ndarray:
        """The unscaled partition functions of k measures on the same sources, at once:
        ``[h, i, c] = sum_j columns[j, c] exp(beta <Q_h x_i, K_h y_j>)``, shape (heads, m, k)
        (collective; the weights may be signed).

        Parameters as :meth:`evaluate`, with ``columns`` (n_local, k) this rank's weights of
        the k measures.  This default evaluates one measure after the other; evaluators that
        share the work between the columns (one transform of all of them, one matrix product)
        override it.
        """
        columns = np.asarray(columns, dtype=float)
        out = np.empty((len(self.model.heads), np.asarray(targets).shape[0], columns.shape[1]))
        for c in range(columns.shape[1]):
            values = self.evaluate(targets, sources, np.ascontiguousarray(columns[:, c]),
                                   fixed_sources=fixed_sources, fixed_targets=fixed_targets)
            out[:, :, c] = values.partition_function()
        return out

    def velocities(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        columns: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
        directions: np.ndarray | None = None,
        mixing: np.ndarray | None = None,
    ) -> np.ndarray:
        """The velocities X of k measures on the same sources at once, shape (k, m, d)
        (collective): ``columns`` (n_local, k) holds this rank's weights of each (a causal
        run's position slices, :class:`meanfield.masks.Causal`); with ``directions`` (m, d), their
        components along them, shape (k, m) (a scheme's normal velocities at its facets,
        :meth:`FieldValues.velocity`), or along j directions at each target (m, j, d), shape
        (k, m, j) (a scheme's tangent frames); the result may be a transposed view.  With
        ``mixing`` (k, c) the measures' weights are ``columns @ mixing.T``, combinations of the c
        columns given (a causal run's prefix sums of its slices), formed where it is cheapest.
        This default evaluates one measure after the other; evaluators that share the work
        between the measures (one transform of all of them, one matrix product) override it."""
        targets = np.asarray(targets, dtype=float)
        columns = mixed(np.asarray(columns, dtype=float), mixing)
        k = columns.shape[1]
        X = np.stack([self.velocity(targets, sources, np.ascontiguousarray(columns[:, c]),
                                    fixed_sources=fixed_sources, fixed_targets=fixed_targets)
                      for c in range(k)]).reshape(k, *targets.shape)
        return X if directions is None else components(X, directions)

    def linear_sums(
        self,
        targets: np.ndarray,
        sources: np.ndarray,
        vectors: np.ndarray,
        scalars: np.ndarray | None,
        matrix: np.ndarray,
        *,
        fixed_sources: bool = False,
        fixed_targets: bool = False,
    ) -> np.ndarray:
        """Kernel sums of sources whose values are linear in the target, k at once:
        ``[h, i, c] = sum_j exp(beta <Q_h x_i, K_h y_j>) (<A x_i, b_jc> - s_jc)``, shape
        (heads, m, k) (collective; the adjoint's nonlocal term, :mod:`meanfield.adjoint.sums`).

        Parameters
        ----------
        vectors
            (n_local, d, k): this rank's ``b_jc``.
        scalars
            (n_local, k): this rank's ``s_jc`` (``None``: zero).
        matrix
            (d, d): ``A``.

        This default takes the ``(d + 1) k`` partition functions of :meth:`partition_sums`
        and combines them at the targets.
        """
        n, d, k = vectors.shape
        columns = vectors.reshape(n, d * k)
        if scalars is not None:
            columns = np.concatenate([columns, scalars], axis=1)
        sums = self.partition_sums(targets, sources, columns, fixed_sources=fixed_sources,
                                   fixed_targets=fixed_targets)
        moved = np.asarray(targets, dtype=float) @ np.asarray(matrix, dtype=float).T
        out = np.einsum("hmdk,md->hmk", sums[..., : d * k].reshape(sums.shape[:2] + (d, k)), moved)
        return out - sums[..., d * k:] if scalars is not None else out

    def velocity(
        self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray, **kwargs
    ) -> np.ndarray:
        """Convenience: the velocity X[mu] at the targets."""
        return self.evaluate(targets, sources, weights, **kwargs).velocity(self.model, targets)

    def energy(self, sources: Sequence[PointGroup]) -> float:
        """Interaction energy ``sum_h weight_h / (2 beta) sum_ij w_i w_j exp(beta <Q_h x_i, K_h x_j>)``
        of the measure made of the ``sources`` groups (all ranks'); collective.

        This default evaluates the field at the source points themselves; evaluators that can
        do better (from the measure's moments) override it.
        """
        targets = [PointGroup(g.points, None, g.fixed) for g in sources]
        values = self.evaluate_groups(targets, sources)
        head_w = np.array([h.weight for h in self.model.heads])
        local = sum(float(head_w @ (v.partition_function() @ g.weights)) for v, g in zip(values, sources))
        return float(allreduce_sum(self.comm, np.array([local]))[0]) / (2.0 * self.model.beta)

    def diagnostics(self) -> dict:
        """Facts about the last evaluation worth recording in run metadata (this rank's)."""
        return {"method": self.name}

    def collective_diagnostics(self) -> dict:
        """:meth:`diagnostics` with the rank-local ``error_estimate`` maximised over ranks.

        Collective: every rank of the communicator must call it.
        """
        out = self.diagnostics()
        if self.comm is not None and "error_estimate" in out:
            from mpi4py import MPI

            local = out["error_estimate"]
            worst = self.comm.allreduce(-1.0 if local is None else float(local), op=MPI.MAX)
            out["error_estimate"] = None if worst < 0 else worst
        return out
