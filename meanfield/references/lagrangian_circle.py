"""A high-accuracy Lagrangian reference on S^1 for long times: quantile tokens, exact field.

Tokens ``theta_i`` at the quantiles ``(i + 1/2) / n`` of rho0 (:func:`~meanfield.particles.sampling.quantile_circle`),
each of mass ``1 / n``, move with the exact mean-field velocity of the weighted point set
``mu_n = sum_j w_j delta_{theta_j}`` (Q = K = V = I, ``MODEL.md``):

    Z(theta)  = sum_j w_j e^{beta cos(theta - theta_j)},
    v(theta)  = Z'(theta) / (beta Z(theta))    (softmax, SA),
    v(theta)  = Z'(theta) / beta               (unnormalised, USA).

Why it is accurate
    The flow on S^1 keeps tokens ordered, so token i stays at the label ``q_i = (i + 1/2) / n``
    of the mass coordinate and the field of ``mu_n`` is the midpoint rule (equal weights in q,
    the periodic trapezoid rule) for ``int_0^1 K(theta - Theta(q, t)) dq``, whose integrand is
    smooth and 1-periodic in q: the error decays spectrally in n while the flow map
    ``Theta(., t)`` is resolved.  Once clusters have formed, ``Theta(., t)`` is close to a
    step function (each cluster a flat run of labels) and a cluster's mass is its number of
    tokens over n: the masses are accurate to ``O(1/n)`` (the labels of the separatrices
    between clusters are resolved to one token), the only first-order error left; the
    positions of collapsed clusters are then exact up to that mass error and the time
    integration (``benchmarks/bench_long_time_s1.py`` measures the self-convergence of the
    merge times in n and in the tolerance).  The total mass is ``n * (1/n) = 1`` exactly.

Field (:class:`CircleField`)
    The kernel's Fourier series ``e^{beta cos u} = I_0(beta) + 2 sum_{k>=1} I_k(beta) cos(k u)``
    (modified Bessel functions, scaled by ``e^{-beta}`` via ``scipy.special.ive``; SA does not
    see the scale, USA multiplies it back), truncated at the first mode L with
    ``k I_k(beta) / I_0(beta) < tol`` (I_k decreases in k): with ``C_k = sum_j w_j e^{ik theta_j}``,

        Z(theta)  = a_0 C_0 + sum_{k=1}^{L} a_k Re(e^{ik theta} conj C_k),   a_k = 2 I_k(beta),
        Z'(theta) = - sum_{k=1}^{L} k a_k Im(e^{ik theta} conj C_k),

    an ``O(n L)`` evaluation (L ~ 50 at beta = 12 and tol = 1e-16) exact to the truncation and
    round-off.

Time integration
    scipy's DOP853 (Dormand-Prince 8(5,3), adaptive) with tight ``rtol``/``atol`` (defaults
    1e-11, 1e-13 rad); outputs from its 7th-order dense output.  The angles are unwrapped
    (not reduced mod 2 pi) while integrating.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import integrate, special

from ..model import is_normalised_exp
from ..particles.sampling import quantile_circle

#: Default truncation tolerance of the kernel series, relative to I_0(beta).
SERIES_TOL = 1e-16
#: Default DOP853 tolerances (angles in radians).
RTOL, ATOL = 1e-11, 1e-13


class CircleField:
    """The attention velocity on S^1 of a weighted point set (Q = K = V = I), Fourier-Bessel series.

    Parameters
    ----------
    beta
        Inverse temperature, > 0.
    attention
        ``"softmax"`` or ``"unnormalized"``.
    tol
        Truncation tolerance: the series keeps modes ``k <= L``, L the first k with
        ``k I_k(beta) / I_0(beta) < tol``.
    """

    def __init__(self, beta: float, attention: str = "softmax", tol: float = SERIES_TOL) -> None:
        normalised = is_normalised_exp(attention)
        if not beta > 0:
            raise ValueError(f"beta: must be > 0, got {beta!r}")
        self.beta, self.normalised = float(beta), normalised
        k = np.arange(int(4 * beta) + 64)
        ratio = k * special.ive(k, self.beta) / special.ive(0, self.beta)
        self.modes = int(np.flatnonzero((ratio < tol) & (k > 0))[0])
        k = np.arange(self.modes + 1)
        self.a = 2.0 * special.ive(k, self.beta)  # e^{-beta} 2 I_k
        self.a[0] /= 2.0
        self.ka = k * self.a

    def velocity(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Angular velocity at the angles ``targets`` of the measure ``sum_j weights_j delta_{sources_j}``."""
        same = targets is sources
        powers = self._powers(sources)
        moments = powers @ np.asarray(weights, float)  # C_k
        if not same:
            powers = self._powers(targets)
        z = (self.a * np.conj(moments)) @ powers
        dz = (self.ka * np.conj(moments)) @ powers
        z, dz = z.real, -dz.imag
        return dz / (self.beta * z) if self.normalised else np.exp(self.beta) * dz / self.beta

    def _powers(self, theta: np.ndarray) -> np.ndarray:
        """``e^{ik theta}``, k = 0..L, shape (L + 1, n), by repeated products (error ~ k eps)."""
        first = np.exp(1j * np.asarray(theta, float))
        out = np.empty((self.modes + 1, len(first)), complex)
        out[0] = 1.0
        out[1] = first
        for k in range(2, self.modes + 1):
            np.multiply(out[k - 1], first, out=out[k])
        return out


def direct_velocity(beta: float, attention: str, targets: np.ndarray, sources: np.ndarray,
                    weights: np.ndarray) -> np.ndarray:
    """The same velocity by the O(n m) pairwise sum (for tests and small sets)."""
    u = np.asarray(sources, float)[None, :] - np.asarray(targets, float)[:, None]
    e = np.exp(beta * (np.cos(u) - 1.0)) * weights
    num = (e * np.sin(u)).sum(axis=1)
    return num / e.sum(axis=1) if is_normalised_exp(attention) else np.exp(beta) * num


@dataclass(frozen=True)
class TokenSolution:
    """Token angles at output times (all kept in memory; see :func:`iterate_tokens` for long runs).

    Attributes
    ----------
    times
        (T,) output times.
    angles
        (T, n) unwrapped token angles (mod 2 pi gives the position).
    weights
        (n,) token masses (``1 / n``).
    """

    times: np.ndarray
    angles: np.ndarray
    weights: np.ndarray

    def moments(self, k: int) -> np.ndarray:
        """``int e^{ik theta} dmu_n`` at every output time, shape (T,)."""
        return np.exp(1j * k * self.angles) @ self.weights


def quantile_tokens(density: Callable[[np.ndarray], np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Increasing angles in [0, 2 pi) of the n quantile tokens of ``density`` (points (m, 2) -> values)
    and their weights ``1/n``."""
    points = quantile_circle(n, density)
    return np.mod(np.arctan2(points[:, 1], points[:, 0]), 2.0 * np.pi), np.full(n, 1.0 / n)


def iterate_tokens(
    angles: np.ndarray,
    weights: np.ndarray,
    beta: float,
    times: Sequence[float] | np.ndarray,
    *,
    attention: str = "softmax",
    rtol: float = RTOL,
    atol: float = ATOL,
    tol: float = SERIES_TOL,
) -> Iterator[tuple[float, np.ndarray]]:
    """Move weighted tokens on S^1 and yield ``(t, angles)`` at each output time (module docstring).

    Parameters
    ----------
    angles, weights
        (n,) initial angles and masses.
    beta, attention
        The model (Q = K = V = I).
    times
        Output times, sorted, >= 0 (a time 0 output yields the initial angles).
    rtol, atol
        DOP853 tolerances.
    tol
        Truncation tolerance of the kernel series (:class:`CircleField`).
    """
    out = np.asarray(times, float)
    if len(out) == 0 or np.any(np.diff(out) <= 0) or out[0] < 0:
        raise ValueError("times: must be non-empty, strictly increasing and >= 0")
    field = CircleField(beta, attention, tol)
    w = np.asarray(weights, float)
    y0 = np.asarray(angles, float).copy()
    i = 0
    while i < len(out) and out[i] == 0.0:
        yield 0.0, y0.copy()
        i += 1
    if i == len(out):
        return
    solver = integrate.DOP853(lambda _t, y: field.velocity(y, y, w), 0.0, y0, float(out[-1]),
                              rtol=rtol, atol=atol)
    while i < len(out):
        message = solver.step()
        if solver.status == "failed":
            raise RuntimeError(f"DOP853 failed at t = {solver.t}: {message}")
        if solver.t >= out[i]:
            dense = solver.dense_output()
            while i < len(out) and out[i] <= solver.t:
                yield float(out[i]), (solver.y.copy() if out[i] == solver.t else dense(out[i]))
                i += 1


def solve_tokens(
    density: Callable[[np.ndarray], np.ndarray],
    beta: float,
    times: Sequence[float] | np.ndarray,
    n: int,
    *,
    attention: str = "softmax",
    rtol: float = RTOL,
    atol: float = ATOL,
    tol: float = SERIES_TOL,
) -> TokenSolution:
    """n quantile tokens of ``density`` moved to the output ``times`` (:func:`iterate_tokens`), kept in memory."""
    theta, w = quantile_tokens(density, n)
    frames = list(iterate_tokens(theta, w, beta, times, attention=attention, rtol=rtol, atol=atol, tol=tol))
    return TokenSolution(np.array([t for t, _ in frames]), np.array([a for _, a in frames]), w)
