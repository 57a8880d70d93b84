"""Causal (decoder) attention at the density level: M position slices on one mesh.

The mean-field state of a masked (decoder) transformer keeps the token position ``s`` in
[0, 1]: ``mu = ds (x) rho(t, s, x) dx``, each position carrying a probability density that
moves with the field of the positions before it,

    X[rho](s, x) = P_x( int_0^s N[rho(s')](x) ds' / int_0^s Z[rho(s')](x) ds' )   (softmax),
    X[rho](s, x) = P_x( int_0^s N[rho(s')](x) ds' )                               (unnormalised),

with N, Z the non-causal numerator and denominator of one density (both linear in it).  The
positions are discretised as M slices at ``s_k = (k + 1/2) / M`` (midpoint rule): slice k sees
the slices j < k and half of itself, each weighted by ``ds = 1/M``,

    N_k = (1/M) (sum_{j<k} N[rho_j] + N[rho_k] / 2),   Z_k likewise.

The slices' measures share their points (the mesh's quadrature points), so by linearity
``N_k = N[mu_k]`` and ``Z_k = Z[mu_k]`` for the measure ``mu_k = (1/M) (sum_{j<k} w_j + w_k / 2)``
of the prefix-summed weights: :class:`CausalVelocity` evaluates one non-causal field per slice
(M evaluations per stage, not M^2, each exactly a non-causal evaluation: the fast field sums
the slices in its coefficients).  :class:`CausalScheme` stacks M states of one spatial scheme
and steps each slice with its own velocity, so SSP-RK3 advances all slices together (one step
size: the CFL bound is the largest over the slices).  :class:`PrefixSums` accumulates field
values at targets, for sources that differ from slice to slice (tokens).

Positional decay (ALiBi) ``lambda`` adds ``-lambda (s - s')`` to the logits, so slice j enters
slice k's sums with the factor ``e^{-lambda (s_k - s_j)}`` (inside N and Z: under SA the ratio
keeps it).  The prefix becomes a recursively weighted sum, ``P_{k+1} = e^{-lambda/M} (P_k + w_k)``,
still one evaluation per slice.  ``normalise`` (unnormalised attention) divides slice k's
measure by its positional mass ``m_k = (1/M) (sum_{j<k} e^{-lambda (s_k - s_j)} + 1/2)``, the
midpoint rule of ``int_0^s e^{-lambda (s - s')} ds'`` (``= s_k`` exactly at ``lambda = 0``): the
field is then ``int_0^s k_lambda(s, s') N[rho(s')] ds'`` with
``k_lambda(s, s') = lambda e^{-lambda (s - s')} / (1 - e^{-lambda s})``, the model of Duerinckx,
Geshkovski and Rossi, and an s-independent density carries the non-causal solution exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from ..discretisation.base import SpatialScheme
from ..model import VelocityField
from ..nonlocal_field.base import FieldValues
from ..sequence import slice_positions
from ..velocity import velocities


def _at_position(density: Callable[[np.ndarray, float], np.ndarray], s: float, points: np.ndarray) -> np.ndarray:
    return density(points, s)


class PrefixSums:
    """Running sums of scaled field values ``sum_j c_j exp(L_j) (N_j, Z_j)``, kept scaled by a
    common ``exp(-L)`` (the largest shift so far, target by target), so nothing overflows.
    Values with the sums' own shift (the fast field's spectral heads: ``L = kappa_h`` for every
    slice) are added without rescaling."""

    def __init__(self) -> None:
        self.total: FieldValues | None = None

    def plus(self, values: FieldValues, weight: float) -> FieldValues:
        """The sums with ``weight * values`` added (this object unchanged)."""
        if self.total is None:
            return FieldValues(weight * values.N, weight * values.Z, values.log_scale.copy())
        old = self.total
        if np.array_equal(old.log_scale, values.log_scale):
            return FieldValues(old.N + weight * values.N, old.Z + weight * values.Z, old.log_scale)
        shift = np.maximum(old.log_scale, values.log_scale)
        a, b = np.exp(old.log_scale - shift), weight * np.exp(values.log_scale - shift)
        return FieldValues(old.N * a[..., None] + values.N * b[..., None], old.Z * a + values.Z * b, shift)

    def add(self, values: FieldValues, weight: float) -> None:
        """Add ``weight * values`` to the sums."""
        self.total = self.plus(values, weight)


class CausalVelocity:
    """The velocity of the slices of a causal run, one slice after the other (see the module
    docstring).

    A scheme calls it once per right-hand side with the measure of one slice; the slices of
    one stage must be passed in order 0, 1, ..., M-1, after :meth:`start` (an (M+1)-th call
    raises ``RuntimeError``), with the same source points.  Slice k's call returns the field's
    velocity (one evaluation) of the measure ``ds (prefix + own_weight w_k)`` on those points,
    then adds ``w_k`` to the prefix of weights.  When :meth:`start` is given the slices' weights
    of the stage (as :class:`CausalScheme` does, as a function computed at the first call), the
    first call evaluates the fields of all M measures ``sum_j W[k, j] w_j`` (:meth:`kernel`) at
    once, one batched evaluation (:func:`meanfield.velocity.velocities`: one transform of all of
    them for the fast field, one matrix product for the direct one), and each call returns its
    slice's.  A scheme that moves all slices at once calls :meth:`many` instead.

    Parameters
    ----------
    field
        The velocity of one measure (the active layer's attention and feed-forward block).
    slices
        The number M of slices.
    decay
        The positional decay lambda >= 0 (see the module docstring).
    normalise
        Divide each slice's measure by its positional mass (see the module docstring).

    Attributes
    ----------
    own_weight
        The share of its own slice a slice feels: 1/2 (the midpoint rule, the default); 1 gives
        the own slice full weight, a first-order rule (kept to check that order in the tests).
    """

    def __init__(self, field: VelocityField, slices: int, decay: float = 0.0, normalise: bool = False) -> None:
        self.field, self.slices = field, slices
        self.ds = 1.0 / slices
        self.own_weight = 0.5
        self.factor = float(np.exp(-decay * self.ds))
        self.normalise = normalise
        self.start()

    def kernel(self) -> np.ndarray:
        """(M, M) the slices' weights: slice k moves with the field of ``sum_j W[k, j] mu_j``
        (``ds e^{-lambda (s_k - s_j)}`` for j < k, ``own_weight * ds`` for j = k, 0 after; each
        row divided by its sum when normalised), the matrix the adjoint of a causal run
        (:mod:`meanfield.adjoint`) transposes."""
        M = self.slices
        lag = np.subtract.outer(np.arange(M), np.arange(M))
        W = self.ds * np.where(lag > 0, self.factor ** np.maximum(lag, 0), 0.0) + self.ds * self.own_weight * np.eye(M)
        return W / W.sum(axis=1)[:, None] if self.normalise else W

    def start(self, slice_weights: Callable[[], np.ndarray] | None = None) -> None:
        """Forget the prefix: the next call is slice 0 of a new stage.  ``slice_weights``: gives
        the M slices' weights of the stage (n, M), on the points the calls will pass, when a
        call one slice after the other needs them (the class docstring)."""
        self.slice = 0
        self.sources: np.ndarray | None = None
        self.prefix: np.ndarray | None = None
        self.mass = 0.0  # the prefix's positional mass in units of ds
        self.announce = slice_weights
        self.announced: np.ndarray | None = None  # (n, M), from announce at the first call
        self.fields: tuple[np.ndarray, np.ndarray] | None = None  # (targets, (M, m, d) velocities)

    def measure(self, weights: np.ndarray) -> np.ndarray:
        """The weights of the measure that the next slice (with ``weights``) feels."""
        assert self.prefix is not None
        own = self.prefix + self.own_weight * weights
        return own / (self.mass + self.own_weight) if self.normalise else self.ds * own

    def __call__(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The velocity of the next slice at the targets, from its measure (sources, weights)."""
        if self.slice == self.slices:
            raise RuntimeError(f"causal velocity: called for more than {self.slices} slices since start()")
        if self.announce is not None:
            return self._announced_slice(targets, sources, weights)
        if self.sources is None or self.prefix is None:
            self.sources, self.prefix = sources, np.zeros_like(weights)
        elif sources is not self.sources and not np.array_equal(sources, self.sources):
            raise ValueError("causal velocity: the slices' measures must share their points (a scheme's "
                             "quadrature points)")
        self.slice += 1
        X = self.field(targets, sources, self.measure(weights))
        self.prefix = self.factor * (self.prefix + weights)
        self.mass = self.factor * (self.mass + 1.0)
        return X


    def many(self, targets: np.ndarray, sources: np.ndarray, columns: np.ndarray,
             directions: np.ndarray | None = None, mixing: np.ndarray | None = None) -> np.ndarray:
        """The velocities (M, m, d) of all the slices of the stage at once, from their weights
        ``columns`` (n, M) (or ``columns @ mixing.T``), or with ``directions`` (m, [j,] d) their
        components along them (M, m[, j]): a scheme that moves them together
        (:meth:`~meanfield.discretisation.base.SpatialScheme.rhs_and_bound_many`).  The slices'
        prefix sums are a mixing of the columns, which the field applies where it is cheapest
        (the fast field: on the coefficients of the M measures)."""
        if self.slice:
            raise RuntimeError("causal velocity: all slices at once after start(), or one after the other")
        self.slice = self.slices
        kernel = self.kernel()
        return velocities(self.field, targets, sources, columns, directions,
                          kernel if mixing is None else kernel @ mixing)

    def _announced_slice(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The next slice's velocity from the batched evaluation of the stage (made at the first call)."""
        assert self.announce is not None
        if self.announced is None:
            self.announced = self.announce()
        k = self.slice
        if weights.shape != self.announced[:, k].shape or weights.sum() != self.announced[:, k].sum():
            raise ValueError(f"causal velocity: slice {k}'s weights differ from those given to start()")
        if self.fields is None:
            self.sources = sources
            self.fields = (targets, velocities(self.field, targets, sources, self.announced, mixing=self.kernel()))
        elif targets is not self.fields[0] or sources is not self.sources:
            raise ValueError("causal velocity: the slices of a stage must share their targets and source points")
        self.slice += 1
        return self.fields[1][k]


class CausalScheme:
    """M slices of one spatial scheme, stepped together (the time stepper's scheme).

    The state is cell-major: ``state.reshape(num_owned, M, -1)[:, k]`` is slice k's state of
    the underlying scheme, so a state's rows are cells (gathered and scattered in global order
    like a non-causal state).

    Parameters
    ----------
    scheme
        The spatial scheme of one slice, built with ``velocity`` (or a wrapper that calls it).
    velocity
        The slices' velocity.
    """

    def __init__(self, scheme: SpatialScheme, velocity: CausalVelocity) -> None:
        self.scheme, self.velocity, self.slices = scheme, velocity, velocity.slices
        self.positions = slice_positions(self.slices)
        self.comm, self.geometry = scheme.comm, scheme.geometry

    def split(self, state: np.ndarray) -> list[np.ndarray]:
        """The M slice states of a stacked state (copies, contiguous)."""
        rows = state.reshape(self.geometry.num_owned, self.slices, -1)
        return [np.ascontiguousarray(rows[:, k]).ravel() for k in range(self.slices)]

    def error_parts(self, vector: np.ndarray) -> list[np.ndarray]:
        """Each position slice on its own (:mod:`meanfield.timestepping`): a slice whose
        density changes slowly is stepped as accurately as the fastest."""
        return self.split(vector)

    def stack(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """The stacked state of M slice states (inverse of :meth:`split`)."""
        n = self.geometry.num_owned
        return np.stack([p.reshape(n, -1) for p in parts], axis=1).ravel()

    def initial_state(self, density: Callable[[np.ndarray, float], np.ndarray]) -> np.ndarray:
        """Each slice projected from ``density(points, s_k)`` and normalised to mass 1."""
        return self.stack([self.scheme.initial_state(partial(_at_position, density, float(s)))
                           for s in self.positions])

    def rows(self, state: np.ndarray) -> np.ndarray:
        """The stacked state seen as (num_owned, M, per_cell): row c holds cell c of every slice
        (a view; the layout of the scheme's ``*_many`` methods)."""
        return state.reshape(self.geometry.num_owned, self.slices, -1)

    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        """The slices' right-hand sides (stacked) and the largest of their outflow bounds; the
        slices' fields come from one batched evaluation (:class:`CausalVelocity`)."""
        rows = self.rows(state)
        self.velocity.start(partial(self.scheme.measure_many, rows))
        rhs, rate = self.scheme.rhs_and_bound_many(rows)
        return rhs.ravel(), rate

    def postprocess(self, state: np.ndarray) -> np.ndarray:
        """The scheme's postprocessing (limiter) of every slice."""
        return self.scheme.postprocess_many(self.rows(state)).ravel()

    def locate_value(self, state: np.ndarray, index: int) -> str:
        """Human-readable location of entry ``index`` of a stacked state: its cell and slice."""
        per_cell = max(state.size // max(self.geometry.num_owned, 1), 1)
        k = (index % per_cell) // max(per_cell // self.slices, 1)
        return f"{self.scheme.locate(index // per_cell)}, position slice {k} (s = {self.positions[k]:.6g})"

    def cell_averages(self, state: np.ndarray) -> np.ndarray:
        """(M, num_owned) the cell averages of every slice."""
        return np.array([self.scheme.cell_averages(part) for part in self.split(state)])

    def vertex_density(self, state: np.ndarray) -> np.ndarray | None:
        """(M, num_owned, nv) every slice's density at the owned cells' vertices (DG1), or ``None``."""
        parts = [self.scheme.vertex_density(part) for part in self.split(state)]
        return None if parts[0] is None else np.array(parts)

    def whole(self, state: np.ndarray) -> np.ndarray:
        """The state of the whole token distribution (the mean of the slices' states: the
        positions' measures weighted by ds = 1/M), a state of the slices' scheme with mass 1."""
        return state.reshape(self.geometry.num_owned, self.slices, -1).mean(axis=1).ravel()
