"""Classical RK4 (or SSP-RK3) for tokens on the sphere, with projection after each step.

The velocity ``X(x) = P_x(...)`` with ``P_x v = v - <x, v> x`` is defined on all of R^d and
``d|x|^2/dt = 2 <x, v> (1 - |x|^2)`` vanishes on the sphere, so the sphere is invariant for
the exact flow and RK4 leaves it by O(dt^5) per step.  After each step the tokens are
renormalised (a projection method, which keeps order 4); the largest drift ``|1 - |x||``
seen before renormalising is recorded, as a check that the step is small enough.

``particles.integrator = "residual"`` is a transformer's own discrete update: one step
``x <- normalise(x + eta X(x))`` per layer of a ``[model.random]`` schedule (:func:`residual_step`),
first order in eta where the layers' flow is the continuous limit.

``particles.integrator = "ssprk3"`` takes the PDE's three-stage SSP-RK3 instead
(:func:`projected_ssprk3_step`), renormalised after the step exactly as the hybrid PDE
solver treats its atoms (:mod:`meanfield.atoms.coupling`), so a state made only of atoms
and a weighted particle system take the same steps (third order).

Each interval between two output times is cut into equal steps no longer than ``dt``
(:class:`EqualSteps`), so outputs are hit exactly and the step sequence is a function of the
output times alone: a run continued from a checkpoint taken between two steps (which saves
the plan) takes exactly the same steps as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..random_weights import RandomLayers

#: Velocity of the local tokens, (n_local, d) -> (n_local, d); collective under MPI.
Velocity = Callable[[np.ndarray], np.ndarray]


def rk4_step(velocity: Velocity, x: np.ndarray, dt: float) -> np.ndarray:
    """One classical Runge-Kutta step of x' = velocity(x), without renormalisation.

    ``x + dt/6 (k1 + 2 k2 + 2 k3 + k4)`` summed in that order into one new array (augmented
    assignments on it: numpy updates it in place, JAX binds the new array); x and the slopes are
    not written."""
    k1 = velocity(x)
    k2 = velocity(x + 0.5 * dt * k1)
    step = k1 + 2.0 * k2
    k3 = velocity(x + 0.5 * dt * k2)
    step += 2.0 * k3
    step += velocity(x + dt * k3)
    step *= dt / 6.0
    step += x
    return step


def projected_rk4_step(velocity: Velocity, x: np.ndarray, dt: float) -> tuple[np.ndarray, float]:
    """One RK4 step, renormalised onto the sphere; returns the tokens and this rank's largest drift."""
    y = rk4_step(velocity, x, dt)
    norms = np.linalg.norm(y, axis=1)
    return y / norms[:, None], float(np.abs(1.0 - norms).max(initial=0.0))


def _project(y: np.ndarray) -> tuple[np.ndarray, float]:
    norms = np.linalg.norm(y, axis=1, keepdims=True)
    return y / norms, float(np.abs(1.0 - norms).max(initial=0.0))


def projected_ssprk3_step(velocity: Velocity, x: np.ndarray, dt: float) -> tuple[np.ndarray, float]:
    """One SSP-RK3 step (:data:`meanfield.runge_kutta.SSP_RK3`, the PDE's), renormalised onto the
    sphere after the step; returns the tokens and this rank's largest drift."""
    from ..runge_kutta import SSP_RK3  # here: the samplers' import (the references') stays light

    return _project(SSP_RK3.step(velocity, x, dt))


def residual_step(velocity: Velocity, x: np.ndarray, dt: float) -> tuple[np.ndarray, float]:
    """The residual update of a transformer layer, ``x <- normalise(x + dt X(x))`` (one explicit
    Euler step, renormalised); returns the tokens and this rank's largest drift.

    ``X = P_x B`` is the layer's (tangent) velocity; the update with the raw layer output ``B``,
    ``normalise(x + dt B)``, moves along the same direction with the step ``dt / (1 + dt <x, B>)``:
    the two differ by O(dt^2) per layer, as each differs from the continuous flow.
    """
    return _project(x + dt * velocity(x))


#: The projected one-step integrators by ``particles.integrator``.
INTEGRATORS = {"rk4": projected_rk4_step, "ssprk3": projected_ssprk3_step, "residual": residual_step}


@dataclass
class EqualSteps:
    """The plan of one interval ``[t0, t1]``: ``count`` equal steps, ``done`` of them taken."""

    t0: float
    t1: float
    count: int
    done: int = 0

    @classmethod
    def over(cls, t0: float, t1: float, dt: float) -> EqualSteps:
        """Equal steps no longer than ``dt`` from t0 to t1."""
        return cls(t0, t1, max(int(np.ceil((t1 - t0) / dt - 1e-9)), 1))

    @property
    def h(self) -> float:
        return (self.t1 - self.t0) / self.count

    def time(self) -> float:
        """The time after the steps taken (exactly ``t1`` at the end)."""
        return self.t1 if self.done == self.count else self.t0 + self.done * self.h

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass
class StepReport:
    """What :func:`advance` did: steps taken, their size and the largest drift off the sphere."""

    steps: int
    dt: float
    max_drift: float


def advance(velocity: Velocity, x: np.ndarray, t0: float, t1: float, dt: float) -> tuple[np.ndarray, StepReport]:
    """Integrate from t0 to t1 with equal RK4 steps no longer than ``dt``, renormalising each.

    Returns the tokens at t1 and a :class:`StepReport` (drift of this rank's tokens).
    """
    if t1 <= t0:
        return x, StepReport(0, 0.0, 0.0)
    plan = EqualSteps.over(t0, t1, dt)
    drift = 0.0
    while plan.done < plan.count:
        x, step_drift = projected_rk4_step(velocity, x, plan.h)
        plan.done += 1
        drift = max(drift, step_drift)
    return x, StepReport(plan.count, plan.h, drift)


def residual_steps(law: RandomLayers | None, dt: float | None, output_times: np.ndarray) -> list[float]:
    """The steps of ``particles.integrator = "residual"``: one per layer of the random weights'
    law ``law`` (``[model.random]``), whose output times must then be layer boundaries (multiples
    of eta); ``dt`` is ``particles.dt``, which must be unset."""
    from ..config import ConfigError  # here: the tokens' integrators stay below the config (import weight)

    if law is None:
        raise ConfigError("particles.integrator: 'residual' (one step per layer) needs [model.random] layers")
    if dt is not None:
        raise ConfigError("particles.dt: the 'residual' integrator takes one step per layer (model.random.eta); "
                          "leave particles.dt unset")
    layers = output_times / law.eta
    off = np.abs(layers - np.round(layers)) > 1e-9 * np.maximum(1.0, layers)
    if np.any(off):
        raise ConfigError(f"time.outputs: the 'residual' integrator takes one step per layer, so outputs must fall on "
                          f"multiples of model.random.eta = {law.eta:g}; t = {output_times[off][0]:g} "
                          "does not")
    return [law.eta] * law.layers
