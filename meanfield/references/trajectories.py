"""Many trajectories of one autonomous ODE at once, each with its own error-controlled step.

``scipy.integrate.solve_ivp`` integrates one system: stacking n trajectories into it makes
every trajectory take the smallest step any of them needs.  Where the right-hand side is only
piecewise smooth (a ReLU block: each trajectory crosses the kinks at its own time) the stacked
solve crawls.  :func:`integrate_each` advances all trajectories together in vectorised stages
of the Dormand-Prince 8(5,3) pair (the tableau and error norm of ``scipy.integrate.DOP853``)
but accepts, rejects and sizes the step of each trajectory separately, with scipy's step
controller (safety 0.9, factors in [0.2, 10]).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.integrate import DOP853

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
#: Most vectorised steps (accepted or not) before giving up.
MAX_ITERATIONS = 100_000


def _error_norms(K: np.ndarray, h: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """scipy's DOP853 error norm, per trajectory; K (stages + 1, n, k), h (n,), scale (n, k)."""
    err5 = np.tensordot(DOP853.E5, K, axes=1) / scale
    err3 = np.tensordot(DOP853.E3, K, axes=1) / scale
    e5, e3 = (err5**2).sum(axis=1), (err3**2).sum(axis=1)
    denominator = np.sqrt((e5 + 0.01 * e3) * scale.shape[1])
    return np.where(denominator > 0, h * e5 / np.where(denominator > 0, denominator, 1.0), 0.0)


def integrate_each(rhs: Callable[[np.ndarray], np.ndarray], u0: np.ndarray, duration: float,
                   rtol: float = 1e-12, atol: float = 1e-13) -> np.ndarray:
    """Integrate ``u' = rhs(u)`` from each row of ``u0`` for ``duration``; returns the rows at the end.

    Parameters
    ----------
    rhs
        Row-wise right-hand side, (n, k) -> (n, k), called on subsets of the rows.
    u0
        (n, k) initial values.
    duration
        Integration time, >= 0.
    rtol, atol
        Tolerances of the local error, per trajectory (as scipy's).

    Raises
    ------
    RuntimeError
        When some trajectory still has not arrived after :data:`MAX_ITERATIONS` steps.
    """
    u = np.array(u0, dtype=float)
    n = len(u)
    if duration <= 0 or n == 0:
        return u
    tau = np.zeros(n)
    h = np.full(n, duration / 100.0)
    f = rhs(u)
    A, B, stages = DOP853.A, DOP853.B, DOP853.n_stages
    for _ in range(MAX_ITERATIONS):
        active = np.flatnonzero(tau < duration)
        if active.size == 0:
            return u
        y, remaining = u[active], duration - tau[active]
        step = np.minimum(h[active], remaining)
        K = np.empty((stages + 1, active.size, u.shape[1]))
        K[0] = f[active]
        for s in range(1, stages):
            K[s] = rhs(y + step[:, None] * np.tensordot(A[s, :s], K[:s], axes=1))
        y_new = y + step[:, None] * np.tensordot(B, K[:stages], axes=1)
        K[stages] = rhs(y_new)
        error = _error_norms(K, step, atol + rtol * np.maximum(np.abs(y), np.abs(y_new)))
        with np.errstate(divide="ignore"):
            growth = SAFETY * error ** (-1.0 / (DOP853.error_estimator_order + 1))
        accepted = error < 1.0
        done = active[accepted]
        u[done], f[done] = y_new[accepted], K[stages][accepted]
        last = step[accepted] >= remaining[accepted]
        tau[done] = np.where(last, duration, tau[done] + step[accepted])
        h[active] = step * np.where(accepted, np.minimum(MAX_FACTOR, growth), np.maximum(MIN_FACTOR, growth))
    raise RuntimeError(f"integrate_each: {np.count_nonzero(tau < duration)} trajectories did not arrive in "
                       f"{MAX_ITERATIONS} steps")
