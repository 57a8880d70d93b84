"""Exact solutions of the model where they are known in closed form (pure numpy).

* Prescribed solid-body rotation: the initial density rotated back along the flow.
* The uniform density, a steady state of Q = K = V = I attention.
* The linear regime of a small harmonic perturbation of the uniform density with
  Q = K = V = I: ``rho = 1/|S| + a e^{gamma_l t} Y_l`` with the growth rates of MODEL.md.
* The feed-forward flow alone (every layer has ``attention = "none"``): the push-forward of
  rho0 along the characteristics of the layers' blocks F (:func:`feed_forward_solution`).

Used as references by convergence studies and tests.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import special

from ..initial import real_harmonic
from ..layers import FeedForward, LayerSchedule
from ..problem import Problem
from ..sphere import normalize, sphere_area
from .trajectories import integrate_each

#: Relative and absolute tolerances of the characteristics' integration (DOP853, per trajectory).
ODE_RTOL, ODE_ATOL = 1e-12, 1e-13

#: An exact density: ``(t, points (n, d)) -> values (n,)``.
ExactDensity = Callable[[float, np.ndarray], np.ndarray]


def growth_rate(d: int, degree: int, beta: float, softmax: bool) -> float:
    """The exact linear growth rate gamma_l of MODEL.md about the uniform density (Q = K = V = I).

    Parameters
    ----------
    d
        Ambient dimension: 2 (S^1, the Fourier mode ``degree``) or 3 (S^2, the spherical
        harmonics of ``degree``).
    degree
        The mode's degree l >= 1.
    beta
        Inverse temperature.
    softmax
        Softmax (SA) rather than unnormalised (USA) attention.
    """
    if d == 2:
        lam, lam0 = special.ive(degree, beta), special.ive(0, beta)  # common factor 2 pi e^beta cancels
        area_term = lam0 if softmax else np.exp(-beta)
        return float(degree**2 * lam / (beta * area_term))
    lam, lam0 = special.spherical_in(degree, beta), special.spherical_in(0, beta)
    return float(degree * (degree + 1) * lam / (beta * (lam0 if softmax else 1.0)))


def rotation_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix by ``angle`` about ``axis`` (Rodrigues)."""
    a = axis / np.linalg.norm(axis)
    cross = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + np.sin(angle) * cross + (1.0 - np.cos(angle)) * cross @ cross


def backward_characteristics(ffn: FeedForward, x: np.ndarray, duration: float) -> tuple[np.ndarray, np.ndarray]:
    """Follow the flow of ``F = ffn.velocity`` backward for ``duration`` from the points x.

    Solves ``y' = -F(y)``, ``y(0) = x`` together with ``L' = div_S F(y)``, ``L(0) = 0``, for
    every point with its own DOP853 step (:func:`~meanfield.references.trajectories.integrate_each`, at
    tolerances :data:`ODE_RTOL`, :data:`ODE_ATOL`: a ReLU block's kinks cost each trajectory
    a few short steps, not all of them).  Returns ``y(duration)`` (the points the flow carries
    to x in that time) and ``L(duration)`` (the integral of the divergence along the way).
    """
    d = x.shape[1]

    def rhs(u: np.ndarray) -> np.ndarray:
        y = normalize(u[:, :d])
        return np.column_stack([-ffn.velocity(y), ffn.divergence(y)])

    u = integrate_each(rhs, np.column_stack([x, np.zeros(len(x))]), duration, ODE_RTOL, ODE_ATOL)
    return normalize(u[:, :d]), u[:, d]


def feed_forward_solution(schedule: LayerSchedule, rho0: Callable[[np.ndarray], np.ndarray]) -> ExactDensity:
    """The push-forward of rho0 by the feed-forward flow of a schedule without attention.

    Liouville along the characteristic ``X`` that ends at x at time t:
    ``rho(t, x) = rho0(X(0)) exp(-int_0^t div_S F(X(s)) ds)``, F the block of the layer active
    at time s.  The characteristic is followed backward through the layers (each one's part
    of ``[0, t]``) by :func:`backward_characteristics`.
    """
    if any(layer.attention is not None for layer in schedule.layers):
        raise ValueError("feed_forward_solution: a layer has attention; the flow is not local")

    def density(t: float, x: np.ndarray) -> np.ndarray:
        y, divergence = np.asarray(x, float), np.zeros(len(x))
        ends = [*schedule.boundaries, np.inf]
        for start, end, layer in reversed(list(zip(schedule.starts, ends, schedule.layers))):
            duration = min(end, t) - start
            if duration > 0 and layer.ffn is not None:
                y, integral = backward_characteristics(layer.ffn, y, duration)
                divergence += integral
        return rho0(y) * np.exp(-divergence)

    return density


def exact_solution(problem: Problem) -> ExactDensity | None:
    """The exact density of the problem, or ``None`` when none is known."""
    d, velocity = problem.d, problem.velocity
    rho0 = problem.initial()
    if not velocity.is_attention:
        rate = velocity.rotation_rate
        if d == 2:
            def rotated(t: float, x: np.ndarray) -> np.ndarray:
                c, s = np.cos(rate * t), np.sin(rate * t)
                return rho0(x @ np.array([[c, -s], [s, c]]))  # rows: R(-omega t) x
            return rotated
        axis = np.asarray(velocity.rotation_axis, float)
        return lambda t, x: rho0(x @ rotation_matrix(axis, rate * t))
    schedule = problem.schedule()
    if all(layer.attention is None for layer in schedule.layers):
        return feed_forward_solution(schedule, rho0)
    model, ffn = schedule.layers[0].attention, schedule.layers[0].ffn
    if schedule.is_layered or ffn is not None or model is None or not model.is_identity:
        return None
    if rho0.kind == "uniform":
        return lambda t, x: np.full(len(x), 1.0 / sphere_area(d))
    if rho0.kind == "harmonic" and model.kind.exponential:  # the growth rate of the kernel exp
        p = rho0.params
        gamma = growth_rate(d, p["degree"], model.beta, model.kind.normalised)

        def linear(t: float, x: np.ndarray) -> np.ndarray:
            y = real_harmonic(x, p["degree"], p["order"], p["phase"])
            return 1.0 / sphere_area(d) + p["amplitude"] * np.exp(gamma * t) * y
        return linear
    return None
