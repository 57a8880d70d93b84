"""Explicit strong-stability-preserving Runge-Kutta time stepping (SSP-RK3).

Shu-Osher form of the three-stage, third-order SSP scheme (SSP coefficient 1)::

    u1 = u + dt L(u)
    u2 = 3/4 u + 1/4 (u1 + dt L(u1))
    u  = 1/3 u + 2/3 (u2 + dt L(u2))

Each stage is a forward-Euler step, so if each satisfies the scheme's bound
``dt * r(stage) <= 1`` the update keeps the density non-negative.  The step is chosen as
``dt = cfl / r(u)``; since r changes within a step, a stage whose bound is exceeded makes
the stepper retry with the smaller step ``cfl / r(stage)`` (adaptive mode), or raise
:class:`~meanfield.discretisation.base.StabilityError` (fixed ``dt``).  Steps are shortened to
land exactly on requested output times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .collective import CollectiveFailure
from .discretisation.base import StabilityError
from .discretisation.geometry import MeshGeometry

MAX_RETRIES = 8


class BlowUpError(CollectiveFailure, RuntimeError):
    """The solution became non-finite (raised on every rank)."""


@dataclass
class StepStats:
    """Counters for the run metadata (and checkpoints: they continue after a resume)."""

    steps: int = 0
    rejected: int = 0
    rate_evaluations: int = 0
    dt_min: float = np.inf
    dt_max: float = 0.0
    last_dt: float = np.nan

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-able counters (``None`` for the undefined ``dt_min`` and ``last_dt`` before any step)."""
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in vars(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> StepStats:
        """Inverse of :meth:`to_dict`."""
        defaults = cls()
        return cls(**{k: getattr(defaults, k) if data.get(k) is None else data[k] for k in vars(defaults)})


class SteppedScheme(Protocol):
    """What the stepper uses of a spatial scheme (:class:`~meanfield.discretisation.base.SpatialScheme`,
    or :class:`~meanfield.atoms.coupling.HybridStepping` with atoms)."""

    comm: Any
    geometry: MeshGeometry

    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]: ...

    def postprocess(self, state: np.ndarray) -> np.ndarray: ...

    def locate_value(self, state: np.ndarray, index: int) -> str: ...


class SSPRK3:
    """SSP-RK3 with an adaptive (CFL) or fixed time step.

    Parameters
    ----------
    scheme
        The spatial scheme.
    cfl
        Fraction of the forward-Euler positivity bound used for the step, in (0, 1].
    dt
        Fixed step (``None``: adaptive).
    dt_max
        Upper bound of the adaptive step (accuracy when the velocity is small).
    """

    def __init__(
        self, scheme: SteppedScheme, cfl: float = 0.5, dt: float | None = None, dt_max: float | None = None
    ) -> None:
        self.scheme = scheme
        self.cfl = cfl
        self.fixed_dt = dt
        self.dt_max = dt_max if dt_max is not None else np.inf
        self.stats = StepStats()

    def _rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        self.stats.rate_evaluations += 1
        return self.scheme.rhs_and_bound(state)

    def _stage_bound_check(self, dt: float, rate: float, t: float, stage: int) -> bool:
        if dt * rate <= 1.0 + 1e-12:
            return True
        if self.fixed_dt is not None:
            raise StabilityError(
                f"time.dt = {dt:g} violates the CFL bound at t = {t:.6g} (stage {stage}): "
                f"dt * max outflow rate = {dt * rate:.3g} > 1; lower time.dt or use the adaptive step"
            )
        return False

    def step(self, state: np.ndarray, t: float, dt_limit: float) -> tuple[np.ndarray, float]:
        """Advance one step of at most ``dt_limit``; returns (new state, dt taken)."""
        L0, r0 = self._rhs_and_bound(state)
        dt = self.fixed_dt if self.fixed_dt is not None else (self.cfl / r0 if r0 > 0 else dt_limit)
        dt = min(dt, dt_limit, self.dt_max)
        self._stage_bound_check(dt, r0, t, 0)
        post = self.scheme.postprocess
        for _ in range(MAX_RETRIES):
            u1 = post(state + dt * L0)
            L1, r1 = self._rhs_and_bound(u1)
            if not self._stage_bound_check(dt, r1, t, 1):
                dt = min(dt, self.cfl / r1)
                self.stats.rejected += 1
                continue
            u2 = post(0.75 * state + 0.25 * (u1 + dt * L1))
            L2, r2 = self._rhs_and_bound(u2)
            if not self._stage_bound_check(dt, r2, t, 2):
                dt = min(dt, self.cfl / r2)
                self.stats.rejected += 1
                continue
            new = post(state / 3.0 + (2.0 / 3.0) * (u2 + dt * L2))
            break
        else:
            raise StabilityError(f"no stable time step found at t = {t:.6g} after {MAX_RETRIES} retries")
        self._check_finite(new, t)
        s = self.stats
        s.steps += 1
        s.dt_min, s.dt_max, s.last_dt = min(s.dt_min, dt), max(s.dt_max, dt), dt
        return new, dt

    def _check_finite(self, state: np.ndarray, t: float) -> None:
        bad = np.flatnonzero(~np.isfinite(state))
        local = None
        if bad.size:
            local = f"{self.scheme.locate_value(state, int(bad[0]))}: value {state[bad[0]]!r}"
        errors = [e for e in self.scheme.comm.allgather(local) if e is not None]
        if errors:
            raise BlowUpError(f"the density became non-finite at t = {t:.6g} (step {self.stats.steps + 1}), "
                              f"first at {errors[0]}")

    def advance(self, state: np.ndarray, t: float, t_end: float, on_step=None) -> np.ndarray:
        """Step from ``t`` to exactly ``t_end``; ``on_step(t, dt)`` is called after each step."""
        while t_end - t > 1e-12 * max(1.0, abs(t_end)):
            state, dt = self.step(state, t, t_end - t)
            t = t_end if t_end - (t + dt) <= 1e-12 * max(1.0, abs(t_end)) else t + dt
            if on_step is not None:
                on_step(t, dt)
        return state
