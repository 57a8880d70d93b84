"""Classical RK4 for tokens on the sphere, with projection after each step.

The velocity ``X(x) = P_x(...)`` with ``P_x v = v - <x, v> x`` is defined on all of R^d and
``d|x|^2/dt = 2 <x, v> (1 - |x|^2)`` vanishes on the sphere, so the sphere is invariant for
the exact flow and RK4 leaves it by O(dt^5) per step.  After each step the tokens are
renormalised (a projection method, which keeps order 4); the largest drift ``|1 - |x||``
seen before renormalising is recorded, as a check that the step is small enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

#: Velocity of the local tokens, (n_local, d) -> (n_local, d); collective under MPI.
Velocity = Callable[[np.ndarray], np.ndarray]


@dataclass
class StepReport:
    """What :func:`advance` did: steps taken, their size and the largest drift off the sphere."""

    steps: int
    dt: float
    max_drift: float


def rk4_step(velocity: Velocity, x: np.ndarray, dt: float) -> np.ndarray:
    """One classical Runge-Kutta step of x' = velocity(x), without renormalisation."""
    k1 = velocity(x)
    k2 = velocity(x + 0.5 * dt * k1)
    k3 = velocity(x + 0.5 * dt * k2)
    k4 = velocity(x + dt * k3)
    return x + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def advance(velocity: Velocity, x: np.ndarray, t0: float, t1: float, dt: float) -> tuple[np.ndarray, StepReport]:
    """Integrate from t0 to t1 with equal RK4 steps no longer than ``dt``, renormalising each.

    Returns the tokens at t1 and a :class:`StepReport` (drift of this rank's tokens).
    """
    steps = int(np.ceil((t1 - t0) / dt - 1e-9)) if t1 > t0 else 0
    h = (t1 - t0) / steps if steps else 0.0
    drift = 0.0
    for _ in range(steps):
        x = rk4_step(velocity, x, h)
        norms = np.linalg.norm(x, axis=1)
        drift = max(drift, float(np.abs(1.0 - norms).max(initial=0.0)))
        x = x / norms[:, None]
    return x, StepReport(steps, h, drift)
