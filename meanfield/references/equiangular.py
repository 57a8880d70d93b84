"""The equiangular reduction of the token system (``MODEL.md``, "Many prompts and the phase diagram").

If ``<x_i, x_j> = g`` for all ``i != j`` (Q = K = V = I), both flows keep the tokens equiangular and

    SA :  g' = 2 e^{beta g} (1 - g) ((n - 1) g + 1) / (e^beta + (n - 1) e^{beta g})
    USA:  g' = (2 / n) e^{beta g} (1 - g) ((n - 1) g + 1)        (the 1/n of ``MODEL.md``).

For i.i.d. uniform tokens in high d the inner products start near 0 and concentrate on the
solution with ``g(0) = 0`` (Geshkovski, Letrouit, Polyanskiy, Rigollet, 2312.10794, section 6.2),
within ``O(sqrt(log d / d))``.  Solved here with scipy's DOP853 at tight tolerances (independent
of the token engine); :func:`equiangular_time` gives the time at which g reaches a level (the
integral of 1/g', a quadrature independent of the ODE solve), the curve ``g_beta(t) = 1 - delta``
drawn over the phase diagram.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.integrate import solve_ivp

from ..model import is_normalised_exp

#: Tolerances of the ODE solves.
RTOL, ATOL = 1e-12, 1e-14


def equiangular_rate(g: np.ndarray | float, beta: float | np.ndarray, n: int, attention: str = "softmax") -> np.ndarray:
    """The right-hand side g' of the equiangular ODE (module docstring)."""
    g = np.asarray(g, dtype=float)
    core = 2.0 * (1.0 - g) * ((n - 1) * g + 1.0)
    if is_normalised_exp(attention):
        return core / (np.exp(beta * (1.0 - g)) + (n - 1))  # e^{beta g} / (e^beta + (n-1) e^{beta g})
    return core * np.exp(beta * g) / n


def equiangular(times: Sequence[float], beta: float, n: int, attention: str = "softmax",
                g0: float = 0.0) -> np.ndarray:
    """g at ``times`` (>= 0, any order) of the equiangular ODE from ``g(0) = g0``."""
    at = np.asarray(times, dtype=float)
    end = float(at.max(initial=0.0))
    if end == 0.0:
        return np.full(at.shape, float(g0))
    solution = solve_ivp(lambda t, g: equiangular_rate(g, beta, n, attention), (0.0, end), [g0], method="DOP853",
                         rtol=RTOL, atol=ATOL, dense_output=True)
    return np.asarray(solution.sol(at), dtype=float).reshape(at.shape)


def equiangular_time(level: float, beta: float | np.ndarray, n: int, attention: str = "softmax", g0: float = 0.0,
                     t_max: float = 1e4) -> float | np.ndarray:
    """The time at which g reaches ``level`` (in (g0, 1)), ``inf`` where not by ``t_max``; for a
    number ``beta`` a number, for an array of betas an array (one time each).

    The ODE is autonomous and g' > 0 on [g0, 1) (for g0 > -1/(n - 1)), so the time is the integral
    of 1/g' from g0 to ``level``: one adaptive vector quadrature for all betas (scipy's
    ``quad_vec``), where an ODE solve per beta cost about 650 evaluations of g' each.
    """
    from scipy.integrate import quad_vec

    betas = np.asarray(beta, dtype=float)
    t, _ = quad_vec(lambda g: 1.0 / equiangular_rate(g, betas, n, attention), g0, level, epsrel=RTOL, epsabs=0.0,
                    norm="max")
    t = np.where(np.asarray(t) <= t_max, t, np.inf)
    return float(t) if t.ndim == 0 else t
