"""Exact solutions of the model where they are known in closed form (pure numpy).

* Prescribed solid-body rotation: the initial density rotated back along the flow.
* The uniform density, a steady state of Q = K = V = I attention.
* The linear regime of a small harmonic perturbation of the uniform density with
  Q = K = V = I: ``rho = 1/|S| + a e^{gamma_l t} Y_l`` with the growth rates of MODEL.md.

Used as references by convergence studies and tests.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import special

from .initial import real_harmonic
from .problem import Problem
from .sphere import sphere_area

#: An exact density: ``(t, points (n, d)) -> values (n,)``.
ExactDensity = Callable[[float, np.ndarray], np.ndarray]


def growth_rate(d: int, degree: int, beta: float, softmax: bool) -> float:
    """gamma_l of MODEL.md for the mode of ``degree`` (Q = K = V = I)."""
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
    model = problem.model()
    if not model.is_identity:
        return None
    if rho0.kind == "uniform":
        return lambda t, x: np.full(len(x), 1.0 / sphere_area(d))
    if rho0.kind == "harmonic":
        p = rho0.params
        gamma = growth_rate(d, p["degree"], model.beta, model.softmax)

        def linear(t: float, x: np.ndarray) -> np.ndarray:
            y = real_harmonic(x, p["degree"], p["order"], p["phase"])
            return 1.0 / sphere_area(d) + p["amplitude"] * np.exp(gamma * t) * y
        return linear
    return None
