"""Losses between the solution at time T and a target, each with its first variation.

A loss ``D(rho, nu)`` is evaluated on the cells of the solution (cell averages ``rho_c``, cell
measures ``|c|``, centroids ``x_c``: the measure ``sum_c |c| rho_c delta_{x_c}``, the measure
the finite-volume scheme and the adjoint's pairing use) and returns, beside its value, its
first variation at the cells ``g_c = (1/|c|) dD/drho_c``: the adjoint's terminal condition
``Phi(T) = g`` (MODEL.md, "Training").  The target ``nu`` is a :class:`Measure` (points and
weights, replicated on every rank), or for observables their target values.

- :class:`MMD`: ``D = int int k d(rho - nu) d(rho - nu)`` with ``k(x, y) = e^{kappa <x, y>}``,
  ``g(x) = 2 int k(x, y) d(rho - nu)(y)``: kernel sums (:func:`~meanfield.attention.exp_sums`).
- :class:`ObservableErrors`: ``D = sum_k (<phi_k, rho> - c_k)^2``, ``g = sum_k 2 (<phi_k, rho> - c_k) phi_k``.
- :class:`Sinkhorn`: the Sinkhorn divergence ``S_eps(rho, nu) = OT_eps(rho, nu) - (OT_eps(rho, rho) +
  OT_eps(nu, nu)) / 2`` for the cost ``|x - y|^2`` (log-domain Sinkhorn), ``g = f_{rho nu} -
  f_{rho rho}``, the dual potentials as functions (``f(x) = -eps log sum_j e^{(g_j - |x - y_j|^2)/eps} nu_j``).
- :class:`CircleW2`: on S^1, the exact squared 2-Wasserstein distance for the arc length,
  ``W_2^2(rho, nu)`` (POT's ``binary_search_circle``), ``g`` its Kantorovich potential at the cells.

Every loss also evaluates on a measure alone (:meth:`Loss.of_measure`): the token-level loss of
``meanfield fit --check-particles``.  Registered by name in :data:`LOSSES`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..attention import exp_sums
from ..config import ConfigError
from ..nonlocal_field.parallel import allgather_rows, allreduce_sum


@dataclass(frozen=True)
class Measure:
    """A discrete measure ``sum_j w_j delta_{y_j}`` on the sphere: points (m, d) and weights (m,)."""

    points: np.ndarray
    weights: np.ndarray

    @property
    def d(self) -> int:
        return int(self.points.shape[1])


@dataclass
class Cells:
    """The solution on this rank's owned cells: centroids (n, d), measures (n,), cell averages (n,)."""

    centroids: np.ndarray
    areas: np.ndarray
    density: np.ndarray
    comm: object = None

    @property
    def masses(self) -> np.ndarray:
        return self.areas * self.density

    def gathered(self) -> Measure:
        """Every rank's cells as one measure (on every rank, in rank order)."""
        points = allgather_rows(self.comm, np.ascontiguousarray(self.centroids, dtype=float))
        weights = allgather_rows(self.comm, np.ascontiguousarray(self.masses, dtype=float))
        return Measure(points, weights)

    def integral(self, values: np.ndarray) -> np.ndarray:
        """``<values_k, rho>`` over all ranks for values (n, K)."""
        return allreduce_sum(self.comm, np.ascontiguousarray(self.masses @ values))


@dataclass(frozen=True)
class Target:
    """What a pair's solution is sent to: a measure, or the observables' values (or both)."""

    label: str
    measure: Measure | None = None
    values: np.ndarray | None = None


class Loss:
    """A loss ``D(rho(T), target)`` (module docstring); subclasses register in :data:`LOSSES`."""

    name = ""

    def check(self, target: Target, d: int) -> None:
        """Refuse (``ConfigError`` naming ``--loss``) a target this loss cannot compare with."""
        if target.measure is None:
            raise ConfigError(f"--loss {self.name}: needs a target measure (an expression, a run or tokens), "
                              f"{target.label} gives numbers")

    def __call__(self, cells: Cells, target: Target) -> tuple[float, np.ndarray]:
        """The value and the first variation (n,) at this rank's cells (collective)."""
        raise NotImplementedError

    def of_measure(self, measure: Measure, target: Target) -> float:
        """The loss of a measure (replicated on every rank), e.g. of tokens."""
        raise NotImplementedError


def _kernel_sums(kappa: float, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum_j e^{kappa <x_i, y_j>} w_j`` for every row of x (m,)."""
    sums, log_scale = exp_sums(kappa * x, y, w[:, None])
    return sums[:, 0] * np.exp(np.where(np.isfinite(log_scale), log_scale, 0.0))


class MMD(Loss):
    """Squared maximum mean discrepancy with the kernel ``e^{kappa <x, y>}``."""

    name = "mmd"

    def __init__(self, kappa: float = 1.0) -> None:
        if not kappa > 0:
            raise ConfigError(f"fit.kappa: must be a number > 0, got {kappa!r}")
        self.kappa = float(kappa)

    def _potential(self, x: np.ndarray, rho: Measure, nu: Measure) -> np.ndarray:
        return _kernel_sums(self.kappa, x, rho.points, rho.weights) - _kernel_sums(self.kappa, x, nu.points, nu.weights)

    def __call__(self, cells: Cells, target: Target) -> tuple[float, np.ndarray]:
        assert target.measure is not None
        rho, nu = cells.gathered(), target.measure
        local = self._potential(cells.centroids, rho, nu)  # int k(x, .) d(rho - nu) at this rank's cells
        at_nu = self._potential(nu.points, rho, nu)
        value = float(allreduce_sum(cells.comm, np.array([cells.masses @ local]))[0]) - float(nu.weights @ at_nu)
        return value, 2.0 * local

    def of_measure(self, measure: Measure, target: Target) -> float:
        assert target.measure is not None
        nu = target.measure
        return float(measure.weights @ self._potential(measure.points, measure, nu)
                     - nu.weights @ self._potential(nu.points, measure, nu))


class ObservableErrors(Loss):
    """Squared errors of observables: ``sum_k (<phi_k, rho> - c_k)^2``, ``c_k`` the target's
    values, or the observables of the target measure."""

    name = "observables"

    def __init__(self, observables: Sequence[Any]) -> None:
        """``observables``: callables points (m, d) -> values (m,) with a ``label``
        (:class:`meanfield.own_observables.Observable`)."""
        if not observables:
            raise ConfigError("--observable: the observables loss needs at least one observable")
        self.observables = list(observables)

    def check(self, target: Target, d: int) -> None:
        if target.values is not None and len(target.values) != len(self.observables):
            raise ConfigError(f"--loss observables: {target.label} gives {len(target.values)} values for "
                              f"{len(self.observables)} observables")

    def targets(self, target: Target) -> np.ndarray:
        if target.values is not None:
            return np.asarray(target.values, dtype=float)
        assert target.measure is not None
        return self._phi(target.measure.points).T @ target.measure.weights

    def _phi(self, points: np.ndarray) -> np.ndarray:
        return np.stack([o(points) for o in self.observables], axis=1)

    def __call__(self, cells: Cells, target: Target) -> tuple[float, np.ndarray]:
        phi = self._phi(cells.centroids)
        errors = cells.integral(phi) - self.targets(target)
        return float(errors @ errors), 2.0 * phi @ errors

    def of_measure(self, measure: Measure, target: Target) -> float:
        errors = self._phi(measure.points).T @ measure.weights - self.targets(target)
        return float(errors @ errors)


class Sinkhorn(Loss):
    """The Sinkhorn divergence for the cost ``|x - y|^2`` and blur ``epsilon``.

    Log-domain Sinkhorn iterations on the dual potentials, the symmetric problems ``OT(a, a)``
    by averaged updates (Feydy et al., "Interpolating between optimal transport and MMD using
    Sinkhorn divergences", 2019).  POT's solvers were measured on ``OT(a, a)`` (25 points on S^1,
    ``eps = 0.05``): ``sinkhorn_log`` after 100 000 iterations (135 s) and ``sinkhorn_stabilized``
    after 20 000 (1.7 s) still return two potentials 0.029 apart (the symmetric problem's are
    equal), their mean within 1e-8 of the averaged update's; ``sinkhorn_epsilon_scaling`` is 6e-2
    off.  The averaged update converges in tens of iterations; on ``OT(a, b)`` POT and this loop
    agree to 1e-12.
    """

    name = "ot"

    def __init__(self, epsilon: float = 0.05, tol: float = 1e-12, max_iter: int = 100_000) -> None:
        if not epsilon > 0:
            raise ConfigError(f"fit.epsilon: must be a number > 0, got {epsilon!r}")
        self.epsilon, self.tol, self.max_iter = float(epsilon), tol, max_iter

    def _transport(self, a: Measure, b: Measure, symmetric: bool) -> tuple[float, Callable[[np.ndarray], np.ndarray]]:
        """``OT_eps(a, b)`` and the potential f of a as a function of points."""
        from scipy.special import logsumexp

        eps = self.epsilon
        with np.errstate(divide="ignore"):
            log_a, log_b = np.log(a.weights), np.log(b.weights)

        def cost(x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return np.maximum(2.0 - 2.0 * x @ y.T, 0.0)

        c = cost(a.points, b.points)

        def c_transform(potential: np.ndarray, log_w: np.ndarray, c: np.ndarray) -> np.ndarray:
            return -eps * logsumexp(log_w[None, :] + (potential[None, :] - c) / eps, axis=1)

        f, g = np.zeros(len(log_a)), np.zeros(len(log_b))
        for _ in range(self.max_iter):
            if symmetric:
                new_f = 0.5 * (f + c_transform(f, log_b, c))
                new_g = new_f
            else:
                new_f = c_transform(g, log_b, c)
                new_g = c_transform(new_f, log_a, c.T)
            change = max(np.abs(new_f - f).max(), np.abs(new_g - g).max())
            f, g = new_f, new_g
            if change <= self.tol * eps:
                break
        g = c_transform(f, log_a, c.T)  # the potentials consistent with each other

        def potential(points: np.ndarray) -> np.ndarray:
            return c_transform(g, log_b, cost(points, b.points))

        return float(a.weights @ potential(a.points) + b.weights @ g), potential

    def divergence(self, a: Measure, b: Measure) -> tuple[float, Callable[[np.ndarray], np.ndarray]]:
        """``S_eps(a, b)`` and its first variation in a as a function of points."""
        ab, f_ab = self._transport(a, b, False)
        aa, f_aa = self._transport(a, a, True)
        bb, _ = self._transport(b, b, True)
        return ab - 0.5 * (aa + bb), lambda x: f_ab(x) - f_aa(x)

    def __call__(self, cells: Cells, target: Target) -> tuple[float, np.ndarray]:
        assert target.measure is not None
        value, variation = self.divergence(cells.gathered(), target.measure)
        return value, variation(cells.centroids)

    def of_measure(self, measure: Measure, target: Target) -> float:
        assert target.measure is not None
        return self.divergence(measure, target.measure)[0]


class CircleW2(Loss):
    """The squared 2-Wasserstein distance on S^1 for the arc length (geodesic cost), exact.

    With angles as coordinates ``u = theta / 2 pi`` on the circle ``[0, 1[``, Delon, Salomon and
    Sobolevski's formula ``W_2^2 = (2 pi)^2 inf_s int_0^1 |F_rho^{-1}(q) - F_nu^{-1}(q + s)|^2 dq``
    (``F^{-1}`` extended by ``F^{-1}(q + 1) = F^{-1}(q) + 1``) gives the value and the optimal shift
    ``s`` (POT's ``binary_search_circle``).  For measures of atoms the cost in ``s`` is piecewise
    linear, so the optimal shift lines a breakpoint of ``F_rho`` up with one of ``F_nu``: cut
    there, the problem is the transport between two measures on a line, monotone, whose first
    variation in the masses is its Kantorovich potential: from atom to atom along the cut order
    (lifted angles ``x_t``, cumulative masses ``q_t``)

        f_{t+1} - f_t = (x_{t+1} - G(q_t))^2 - (x_t - G(q_t))^2,   G(q) = F_nu^{-1}(q + s),

    up to a constant (masses are conserved).  The value is piecewise linear in the masses with
    breakpoints where two cumulative masses meet, so the derivative is exact between them.
    """

    name = "w2"

    def check(self, target: Target, d: int) -> None:
        super().check(target, d)
        if d != 2:
            raise ConfigError(f"--loss w2: the exact 2-Wasserstein distance is on S^1 only, this run is on S^{d - 1} "
                              "(use --loss ot there)")

    @staticmethod
    def _transport(a: Measure, b: Measure) -> tuple[float, np.ndarray]:
        """``W_2^2(a, b)`` and the potential at a's points (in a's order)."""
        import ot

        u, v = ot.utils.get_coordinate_circle(a.points), ot.utils.get_coordinate_circle(b.points)
        value, log = ot.binary_search_circle(u, v, a.weights, b.weights, p=2, log=True)
        shift = float(np.asarray(log["optimal_theta"]).ravel()[0])
        order = np.argsort(u, kind="stable")
        cumulative = np.cumsum(a.weights[order])
        targets = np.argsort(v, kind="stable")
        v_sorted, v_cumulative = v[targets], np.cumsum(b.weights[targets])

        def quantile(q: np.ndarray | float) -> np.ndarray:
            """``F_nu^{-1}(q + shift)``, extended periodically."""
            q = np.asarray(q, dtype=float) + shift
            turns = np.ceil(q) - 1.0
            index = np.searchsorted(v_cumulative, q - turns, side="left")
            return turns + v_sorted[np.clip(index, 0, len(v_sorted) - 1)]

        n = len(order)
        gaps = (cumulative[:, None] + shift - v_cumulative[None, :]) % 1.0
        first = (int(np.argmin(np.minimum(gaps, 1.0 - gaps).min(axis=1))) + 1) % n  # the atom after the cut
        cut = np.roll(np.arange(n), -first)
        x = u[order][cut] + (cut < first)
        g = quantile(cumulative[cut][:-1] + (cut[:-1] < first))
        f = np.concatenate([[0.0], np.cumsum((x[1:] - g) ** 2 - (x[:-1] - g) ** 2)])
        potential = np.empty(n)
        potential[order[cut]] = f
        scale = (2.0 * np.pi) ** 2
        return scale * float(np.asarray(value).ravel()[0]), scale * potential

    def __call__(self, cells: Cells, target: Target) -> tuple[float, np.ndarray]:
        assert target.measure is not None
        value, potential = self._transport(cells.gathered(), target.measure)
        comm: Any = cells.comm
        start = 0 if comm is None or comm.size == 1 else comm.exscan(len(cells.density)) or 0  # this rank's first cell
        return value, potential[start: start + len(cells.density)]

    def of_measure(self, measure: Measure, target: Target) -> float:
        assert target.measure is not None
        return self._transport(measure, target.measure)[0]


#: Loss names (``--loss``, ``fit.loss``) -> their classes.
LOSSES: dict[str, type[Loss]] = {cls.name: cls for cls in (MMD, ObservableErrors, Sinkhorn, CircleW2)}
