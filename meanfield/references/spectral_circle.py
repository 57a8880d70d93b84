"""A high-accuracy reference solution on S^1: Fourier pseudo-spectral, Q = K = V = I.

On the circle, with ``x = (cos theta, sin theta)`` and Q = K = V = I, the attention velocity
of a density rho is tangential with angular component (``MODEL.md``)

    Z(theta)  = int e^{beta cos(theta - phi)} rho(phi) dphi,
    v(theta)  = Z'(theta) / (beta Z(theta))      (softmax, SA),
    v(theta)  = Z'(theta) / beta                 (unnormalised, USA),

because ``d/dtheta e^{beta cos(theta - phi)} = beta sin(phi - theta) e^{beta cos(theta - phi)}`` is
beta times the integrand of the tangential component of N.  The continuity equation reads
``rho_t + (rho v)_theta = 0``.

Discretisation
    rho is held at N equispaced angles ``theta_j = 2 pi j / N``.  Z is a convolution with
    Fourier multipliers ``2 pi I_k(beta)`` (computed as ``2 pi ive(k, beta)``, i.e. Z scaled by
    e^{-beta}, which v(SA) does not see and v(USA) multiplies back); derivatives are spectral
    (the Nyquist mode's derivative is set to zero); the product ``rho v`` is formed on the grid
    (pseudo-spectral, no dealiasing: v is band-limited to a few tens of modes since
    ``I_k(beta)`` decays like ``(beta/2)^k / k!``, so aliasing only touches modes near N/2,
    which :attr:`CircleSolution.tail` monitors).  Classical RK4 with the step
    ``courant * (2 pi / N) / max|v|`` (RK4 is stable on the imaginary axis up to 2.83, i.e.
    ``courant <= 0.9`` for the largest wavenumber N/2), capped at ``dt_max`` and at
    ``courant / max_k gamma_k`` (the fastest linear growth, which is large for USA: about
    770 at beta = 9), landing on the output times.  Mass (the k = 0 mode) is conserved to round-off.

Accuracy
    Spectral in space while the solution is resolved (``tail`` near round-off), fourth order in
    time.  Checked against the exact linear growth rates ``gamma_k`` of ``MODEL.md``, mass
    conservation and self-convergence (``tests/test_clusters_reference.py``).  Resolution
    needed: a cluster of width sigma needs ``N >~ 30 / sigma`` (N = 8192 resolves sigma ~ 4e-3 rad,
    heights ~ 100x uniform for a cluster of mass 0.2).

The long-time phase needs clusters far narrower than any grid resolves; there a
Lagrangian reference is better: tokens at the quantiles of rho0 are a midpoint rule in the
mass coordinate q, whose integrand ``K(theta - Theta(q))`` is 1-periodic and smooth in q, so the
particle field converges spectrally in n and the density follows as ``1 / Theta'(q)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from ..model import is_normalised_exp
from .exact import growth_rate


@dataclass(frozen=True)
class CircleSolution:
    """A spectral solution on S^1 at output times.

    Attributes
    ----------
    times
        (T,) output times.
    values
        (T, N) density at the angles ``theta_j = 2 pi j / N``.
    beta, attention
        The model.
    steps
        RK4 steps taken.
    """

    times: np.ndarray
    values: np.ndarray
    beta: float
    attention: str
    steps: int

    @property
    def modes(self) -> int:
        return self.values.shape[1]

    @property
    def angles(self) -> np.ndarray:
        return 2.0 * np.pi * np.arange(self.modes) / self.modes

    def coefficients(self, i: int) -> np.ndarray:
        """Complex Fourier coefficients c_k, k = 0..N/2, with ``rho = sum_k c_k e^{ik theta}`` (+ c.c.)."""
        c = np.fft.rfft(self.values[i]) / self.modes
        c[1:] *= 2.0  # real series: rho = Re sum_{k >= 0} c_k e^{ik theta} with the doubled c_k
        if self.modes % 2 == 0:
            c[-1] /= 2.0
        return c

    def evaluate(self, i: int, theta: float | np.ndarray, derivative: int = 0) -> np.ndarray:
        """The trigonometric interpolant (or its derivative) at output i and angles ``theta``."""
        c = self.coefficients(i)
        k = np.arange(len(c))
        return np.real(np.exp(1j * np.outer(np.atleast_1d(theta), k)) @ (c * (1j * k) ** derivative))

    def integrals(self, i: int, a: float, b: float, center: float) -> tuple[float, float]:
        """Exact ``int_a^b rho`` and ``int_a^b (theta - center)^2 rho`` of the interpolant (a < b, any winding)."""
        c = self.coefficients(i)
        ik = 1j * np.arange(1, len(c))

        def primitive(theta: float) -> tuple[complex, complex]:
            u, e = theta - center, c[1:] * np.exp(ik * theta)
            return np.sum(e / ik), np.sum(e * (u**2 / ik - 2.0 * u / ik**2 + 2.0 / ik**3))

        (m_b, s_b), (m_a, s_a) = primitive(b), primitive(a)
        c0 = np.real(c[0])
        mass = c0 * (b - a) + np.real(m_b - m_a)
        second = c0 * ((b - center) ** 3 - (a - center) ** 3) / 3.0 + np.real(s_b - s_a)
        return float(mass), float(second)

    def tail(self, i: int) -> float:
        """max |c_k| over k > N/3 relative to c_0: near round-off while resolved."""
        c = np.abs(self.coefficients(i))
        return float(c[len(c) * 2 // 3 :].max() / c[0])


def _wavenumbers(n: int) -> np.ndarray:
    k = np.arange(n // 2 + 1, dtype=float)
    if n % 2 == 0:
        k[-1] = 0.0  # Nyquist: the derivative of the real-valued mode is not representable
    return k


class _Rate:
    """The right-hand side ``-(rho v)_theta`` on the grid and the velocity."""

    def __init__(self, n: int, beta: float, attention: str) -> None:
        self.n, self.beta, self.normalised = n, float(beta), is_normalised_exp(attention)
        self.ik = 1j * _wavenumbers(n)
        self.kernel = 2.0 * np.pi * special.ive(np.arange(n // 2 + 1), self.beta)  # e^{-beta} 2 pi I_k

    def velocity(self, rho: np.ndarray) -> np.ndarray:
        zhat = np.fft.rfft(rho) * self.kernel
        z, dz = np.fft.irfft(zhat, self.n), np.fft.irfft(self.ik * zhat, self.n)
        return dz / (self.beta * z) if self.normalised else np.exp(self.beta) * dz / self.beta

    def __call__(self, rho: np.ndarray) -> tuple[np.ndarray, float]:
        v = self.velocity(rho)
        return -np.fft.irfft(self.ik * np.fft.rfft(rho * v), self.n), float(np.abs(v).max())


def solve_circle(
    density: Callable[[np.ndarray], np.ndarray],
    beta: float,
    times: Sequence[float],
    *,
    attention: str = "softmax",
    modes: int = 8192,
    courant: float = 0.4,
    dt_max: float = 0.01,
) -> CircleSolution:
    """Solve the S^1 continuity equation (Q = K = V = I) spectrally; see the module docstring.

    Parameters
    ----------
    density
        Initial density as a function of points (n, 2) on the circle (e.g. an
        :class:`~meanfield.initial.InitialDensity`); normalised to mass 1.
    beta, attention
        Inverse temperature and ``"softmax"`` or ``"unnormalized"``.
    times
        Output times (sorted, >= 0).
    modes
        Grid points N (even).
    courant
        Fraction of the grid-crossing time per step, <= 0.9 for RK4 stability.
    dt_max
        Upper bound of the step.
    """
    if not 0 < courant <= 0.9:
        raise ValueError(f"courant: must be in (0, 0.9], got {courant}")
    output_times = np.asarray(times, float)
    if np.any(np.diff(output_times) < 0) or output_times[0] < 0:
        raise ValueError("times: must be sorted and >= 0")
    theta = 2.0 * np.pi * np.arange(modes) / modes
    rho = np.asarray(density(np.stack([np.cos(theta), np.sin(theta)], axis=1)), float)
    rho = rho / (rho.mean() * 2.0 * np.pi)
    rate = _Rate(modes, beta, attention)
    dt_max = min(dt_max, courant / max(growth_rate(2, k, beta, rate.normalised) for k in range(1, modes // 2 + 1)))
    out, t, steps = [], 0.0, 0
    for t_out in output_times:
        while t < t_out:
            k1, vmax = rate(rho)
            dt = min(t_out - t, dt_max, courant * (2.0 * np.pi / modes) / max(vmax, 1e-300))
            k2, _ = rate(rho + 0.5 * dt * k1)
            k3, _ = rate(rho + 0.5 * dt * k2)
            k4, _ = rate(rho + dt * k3)
            rho = rho + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
            t = t_out if t_out - t - dt < 1e-12 * max(1.0, t_out) else t + dt
            steps += 1
        out.append(rho.copy())
    return CircleSolution(output_times, np.array(out), float(beta), attention, steps)
