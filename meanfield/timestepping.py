"""Explicit strong-stability-preserving Runge-Kutta time stepping (SSP-RK3).

Shu-Osher form of the three-stage, third-order SSP scheme (SSP coefficient 1;
:data:`meanfield.runge_kutta.SSP_RK3`, the tableau the adjoint and the tokens share)::

    u1 = u + dt L(u)
    u2 = 3/4 u + 1/4 (u1 + dt L(u1))
    u  = 1/3 u + 2/3 (u2 + dt L(u2))

Each stage is a forward-Euler step, so if each satisfies the scheme's bound
``dt * r(stage) <= 1`` the update keeps the density non-negative.  Since r changes within a
step, a stage whose bound is exceeded makes the stepper retry with the smaller step
``cfl / r(stage)`` (adaptive mode), or raise
:class:`~meanfield.discretisation.base.StabilityError` (fixed ``dt``).  Steps are shortened to
land exactly on requested output times.

The adaptive step is the smallest of the positivity (CFL) bound ``cfl / r(u)``, ``dt_max``,
the distance to the next landing time, and the step the error controller proposes.  The
controller uses the second-order (Heun) solution that shares SSP-RK3's first two stages,
``u + dt (L0 + L1) / 2``; its difference from the third-order solution,

    e = 2/3 dt (L2 - (L0 + L1) / 2),

estimates the local error of the second-order pair member (``O(dt^3)``), while the
third-order solution is kept.  The error is measured against the change the step makes,

    E = max_parts |e|_max / (tol |u_new - u|_max + FLOOR |u|_max),

part by part (the density, the atoms' positions, each position slice of a causal run; see
``error_parts``): a density made of a uniform part and a small perturbation changes by the
perturbation's growth alone, so the error is measured relative to that, not to the uniform
part that the step leaves as it is.  Maxima are global over ranks (exact, so every rank takes
the same steps).  A step with ``E > 1`` is rejected and retried with a shorter one; after an
accepted step the controller proposes ``dt * min(GROW_MAX, SAFETY / sqrt(E))`` (``E ~ dt^2``).
For the linear growth ``u' = gamma u`` one step has ``E = (gamma dt)^2 / (6 tol)``, and the
third-order solution's relative error in the growth rate is ``(gamma dt)^3 / 24``: about
``2e-5`` at ``tol = 1e-3``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .choices import STEP_TOL
from .collective import CollectiveFailure
from .discretisation.base import StabilityError
from .discretisation.geometry import MeshGeometry
from .runge_kutta import SSP_RK3
from .times import time_tol

#: Default tolerance of the error controller (``time.tol``, :data:`meanfield.choices.STEP_TOL`).
DEFAULT_TOL = STEP_TOL
#: Retries of a step whose stages exceed the CFL bound.
MAX_RETRIES = 8
#: Retries of a step whose error estimate exceeds the tolerance.
MAX_REJECTIONS = 30
#: Safety factor of the proposed step, and the largest and smallest factors between two steps.
SAFETY, GROW_MAX, SHRINK_MIN = 0.9, 5.0, 0.1
#: The error allowed whatever the change of a step, relative to the largest value of the state
#: part: a state that (nearly) stands still is stepped at the CFL bound, not ever shorter.
FLOOR = 1e-12


class BlowUpError(CollectiveFailure, RuntimeError):
    """The solution became non-finite (raised on every rank)."""


@dataclass
class StepStats:
    """Counters for the run metadata (and checkpoints: they continue after a resume)."""

    steps: int = 0
    rejected: int = 0
    rate_evaluations: int = 0
    error_rejected: int = 0
    dt_min: float = np.inf
    dt_max: float = 0.0
    last_dt: float = np.nan
    #: The error controller's proposal for the next step (``inf``: none yet).
    dt_next: float = np.inf
    #: What limited the last step: "cfl", "error", "dt_max", "fixed", or "landing": shortened to
    #: end on an output time or a layer boundary.
    limit: str = ""
    #: Accepted steps by what limited them.
    limits: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able counters (``None`` for the undefined ``dt_min``, ``last_dt`` and ``dt_next``
        before any step)."""
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                for k, v in vars(self).items()} | {"limits": dict(self.limits)}

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

    def error_parts(self, vector: np.ndarray) -> list[np.ndarray]: ...


class SSPRK3:
    """SSP-RK3 with an adaptive (CFL and error) or fixed time step (see the module docstring).

    Parameters
    ----------
    scheme
        The spatial scheme.
    cfl
        Fraction of the forward-Euler positivity bound used for the step, in (0, 1].
    dt
        Fixed step (``None``: adaptive).
    dt_max
        Upper bound of the adaptive step.
    tol
        Tolerance of the adaptive step's error estimate, relative to the change of a step
        (``None``: the CFL bound alone).
    """

    def __init__(self, scheme: SteppedScheme, cfl: float = 0.5, dt: float | None = None,
                 dt_max: float | None = None, tol: float | None = DEFAULT_TOL) -> None:
        self.scheme = scheme
        self.cfl = cfl
        self.fixed_dt = dt
        self.dt_max = dt_max if dt_max is not None else np.inf
        self.tol = tol
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

    def _first_try(self, r0: float, dt_limit: float) -> tuple[float, str]:
        """The step to try first and what limits it."""
        if self.fixed_dt is not None:
            return min(self.fixed_dt, dt_limit, self.dt_max), "fixed"
        candidates = {"cfl": self.cfl / r0 if r0 > 0 else np.inf, "error": self.stats.dt_next,
                      "dt_max": self.dt_max, "landing": dt_limit}
        limit = min(candidates, key=lambda k: candidates[k])
        return candidates[limit], limit

    def step(self, state: np.ndarray, t: float, dt_limit: float) -> tuple[np.ndarray, float]:
        """Advance one step of at most ``dt_limit``; returns (new state, dt taken)."""
        L0, r0 = self._rhs_and_bound(state)
        dt, limit = self._first_try(r0, dt_limit)
        self._stage_bound_check(dt, r0, t, 0)
        retries = rejections = 0
        while True:
            stages = self._stages(state, L0, dt, t)
            if isinstance(stages, float):  # a stage's outflow rate exceeds the CFL bound
                retries += 1
                if retries > MAX_RETRIES:
                    raise StabilityError(f"no stable time step found at t = {t:.6g} after {MAX_RETRIES} retries")
                dt, limit = min(dt, self.cfl / stages), "cfl"
                self.stats.rejected += 1
                continue
            new, rates = stages
            if self.fixed_dt is not None or self.tol is None:
                break
            error = self._error(state, new, SSP_RK3.error_estimate(rates, dt))
            factor = SAFETY / np.sqrt(error) if error > 0 else np.inf
            if np.isnan(error):
                break  # a non-finite state: reported below
            if error <= 1.0:
                proposal = dt * min(GROW_MAX, factor)
                # a step shortened to land on a time says nothing against the longer proposal
                self.stats.dt_next = max(proposal, self.stats.dt_next) if limit == "landing" else proposal
                break
            rejections += 1
            if rejections > MAX_REJECTIONS:
                raise StabilityError(f"no time step meets time.tol = {self.tol:g} at t = {t:.6g} after "
                                     f"{MAX_REJECTIONS} rejected steps (last dt = {dt:.3g}, error {error:.3g})")
            dt, limit = dt * max(SHRINK_MIN, factor), "error"
            self.stats.error_rejected += 1
        self._check_finite(new, t)
        s = self.stats
        s.steps += 1
        s.dt_min, s.dt_max, s.last_dt, s.limit = min(s.dt_min, dt), max(s.dt_max, dt), dt, limit
        s.limits[limit] = s.limits.get(limit, 0) + 1
        return new, dt

    def _stages(self, state: np.ndarray, L0: np.ndarray, dt: float,
                t: float) -> tuple[np.ndarray, list[np.ndarray]] | float:
        """(the new state, the stages' right-hand sides L0, L1, L2) of one step of ``dt``
        (:data:`~meanfield.runge_kutta.SSP_RK3`), or the outflow rate of the first stage that
        exceeds the CFL bound (adaptive mode).  A stage with a non-finite rate and values
        raises :class:`BlowUpError`."""
        post = self.scheme.postprocess
        states, rates = [state], [L0]
        for i in range(1, SSP_RK3.stages):
            u = post(SSP_RK3.stage(i, states, rates, dt))
            L, r = self._rhs_and_bound(u)
            if not self._stage_bound_check(dt, r, t, i):
                return self._finite_rate(u, r, t)
            states.append(u)
            rates.append(L)
        return post(SSP_RK3.stage(SSP_RK3.stages, states, rates, dt)), rates

    def _finite_rate(self, stage: np.ndarray, rate: float, t: float) -> float:
        """``rate``, after checking that a stage whose rate is not finite has finite values
        (:meth:`_check_finite`: a blow-up is reported where it happens, not retried)."""
        if not np.isfinite(rate):
            self._check_finite(stage, t)
        return rate

    def _error(self, state: np.ndarray, new: np.ndarray, estimate: np.ndarray) -> float:
        """The error measure ``E`` of a step (module docstring): the largest over the scheme's
        parts, with global maxima (collective)."""
        from mpi4py import MPI

        parts = zip(*(self.scheme.error_parts(v) for v in (estimate, new - state, state)))
        local = np.array([[float(np.max(np.abs(p), initial=0.0)) for p in triple] for triple in parts])
        maxima = np.empty_like(local)
        self.scheme.comm.Allreduce(local, maxima, op=MPI.MAX)
        assert self.tol is not None
        error, change, size = maxima.T
        scale = self.tol * change + FLOOR * size
        ratios = np.where(error > 0, error / np.where(scale > 0, scale, 1.0), 0.0)
        ratios[(error > 0) & (scale == 0)] = np.inf
        return float(ratios.max(initial=0.0))

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
        while t_end - t > time_tol(t_end):
            state, dt = self.step(state, t, t_end - t)
            t = t_end if t_end - (t + dt) <= time_tol(t_end) else t + dt
            if on_step is not None:
                on_step(t, dt)
        return state
