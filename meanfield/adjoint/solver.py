"""The backward solve: the forward trajectory, checkpointed, and the adjoint run back along it.

:class:`AdjointSolver` drives a :class:`~meanfield.drivers.pde.PDESimulation` forward to the requested
times (:meth:`AdjointSolver.forward`), keeping its step sequence (start, step size, layer) and
the state at every ``stride``-th step; when more states are kept than ``stride``, the stride
doubles and every other state is dropped, so about ``2 sqrt(steps)`` states are held.  The
backward sweep (:meth:`AdjointSolver.backward`) takes the segments between kept states from
the last to the first, recomputes each segment's steps from its first state (the same
operations as the forward steps, so the same states to round-off), keeps their Runge-Kutta
stage states (at most ``stride`` steps' worth), and runs the adjoint of SSP-RK3 back over them:
for ``u1 = u + dt L(u)``, ``u2 = 3/4 u + 1/4 (u1 + dt L(u1))``, ``v = 1/3 u + 2/3 (u2 + dt L(u2))``,

    P2 = 2/3 (Pv + dt A(u2) Pv),   P1 = 1/4 (P2 + dt A(u1) P2),
    Pu = 1/3 Pv + 3/4 P2 + P1 + dt A(u0) P1,

with ``A`` the adjoint operator of :mod:`.operator`.  For the finite-volume scheme (no
limiter) this is the exact discrete adjoint of the forward map for the forward run's step
sizes: the Taylor test agrees to second order in the perturbation's size.  For DG1 it is a
consistent first-order discretisation of the continuous adjoint (the limiter is not
differentiated).  Memory: about ``2 sqrt(steps)`` states plus ``3 stride`` stage states (with their
field evaluations) and the linearisation data of one stage; cost: one forward run to recompute the
segments plus, per step, three linearisations (one field evaluation each per slice, none for finite volumes:
the recomputed stage's own evaluation at the facet midpoints is the one it needs) and three
adjoint sums (every column at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..drivers.pde import PDESimulation
from ..times import MATCH_TOL, same_time, time_tol
from ..velocity import Evaluation, LayerVelocity
from .operator import AdjointOperator, Linearisation


@dataclass
class Step:
    """One forward step: its start, size, end and the layer that moved it."""

    t: float
    dt: float
    end: float
    layer: int


@dataclass
class Trajectory:
    """The forward run's steps and the states kept at every ``stride``-th step (index -> state)."""

    steps: list[Step] = field(default_factory=list)
    kept: dict[int, np.ndarray] = field(default_factory=dict)
    stride: int = 1

    def keep(self, index: int, state: np.ndarray) -> None:
        """Keep the state before step ``index`` if it falls on the stride; thin when too many are kept."""
        if index % self.stride:
            return
        self.kept[index] = state.copy()
        if len(self.kept) > max(self.stride, 4):
            self.stride *= 2
            self.kept = {i: s for i, s in self.kept.items() if i % self.stride == 0}


@dataclass
class Sensitivity:
    """A parameter whose derivative the backward sweep accumulates: the layer velocities of
    the schedules with the parameter moved by ``+h`` and ``-h``."""

    name: str
    h: float
    plus: LayerVelocity
    minus: LayerVelocity


class AdjointSolver:
    """Forward recording and backward adjoint sweep of a PDE simulation (module docstring).

    Parameters
    ----------
    sim
        A freshly built :class:`~meanfield.drivers.pde.PDESimulation` at t = 0 (no atoms).
    kernel
        (M, M) the slices' weights (``None``: the simulation's own, see
        :meth:`meanfield.causal.CausalVelocity.kernel`).
    """

    def __init__(self, sim: PDESimulation, kernel: np.ndarray | None = None) -> None:
        self.sim = sim
        problem = sim.problem
        if kernel is None:
            kernel = sim.positions.kernel()
        f = problem.field
        self.field = LayerVelocity(sim.schedule, sim.comm, f.method, f.tol, fixed_points=True,
                                   direct_sums=f.direct_sums)
        plain = None if problem.velocity.is_attention else problem.velocity.rotation(problem.d)
        self.operator = AdjointOperator(sim.scheme, self.field, kernel, plain, f.method, f.tol, f.direct_sums)
        self.stepping = sim.atoms_component.stepping
        self.trajectory = Trajectory()
        self.initial = sim.state.copy()

    # -- forward -----------------------------------------------------------------------------
    def forward(self, times: Sequence[float], progress: Callable[[float], None] | None = None) \
            -> dict[float, np.ndarray]:
        """Run forward to the largest of ``times``, landing on each; returns the state at each time.
        ``progress(t)`` is called after each step (e.g. :class:`~meanfield.engine.progress.SweepProgress`)."""
        sim, trajectory = self.sim, self.trajectory
        states = {}
        for target in sorted(set(float(t) for t in times)):
            while target - sim.t > time_tol(target):
                boundary = sim.next_landing(sim.t)
                end = target if boundary is None or boundary >= target else boundary
                index = len(trajectory.steps)
                trajectory.keep(index, sim.state)
                t, layer = sim.t, sim.schedule.index_from(sim.t)
                dt = sim.step(end)
                trajectory.steps.append(Step(t, dt, sim.t, layer))
                if progress is not None:
                    progress(sim.t)
            states[target] = sim.state.copy()
        return states

    # -- backward ----------------------------------------------------------------------------
    def _stages(self, state: np.ndarray, dt: float) -> tuple[list[np.ndarray], np.ndarray, list[Evaluation | None]]:
        """The stage states (u, u1, u2) of one SSP-RK3 step of size dt from ``state``, its result
        (the operations of :meth:`meanfield.timestepping.SSPRK3.step`), and the field's
        evaluation at each stage (``None`` where the right-hand side made none of one measure)."""
        post, field = self.stepping.postprocess, self.sim.field
        evaluations: list[Evaluation | None] = []

        def rhs(u: np.ndarray) -> np.ndarray:
            field.last = None
            out = self.stepping.rhs_and_bound(u)[0]
            evaluations.append(field.last)
            return out

        u1 = post(state + dt * rhs(state))
        u2 = post(0.75 * state + 0.25 * (u1 + dt * rhs(u1)))
        new = post(state / 3.0 + (2.0 / 3.0) * (u2 + dt * rhs(u2)))
        return [state, u1, u2], new, evaluations

    def backward(self, finals: Mapping[float, np.ndarray], sensitivities: Sequence[Sensitivity] = (),
                 progress: Callable[[float], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Run the adjoint back to t = 0 (collective).

        Parameters
        ----------
        finals
            Time T -> (M, num_owned, P) the adjoint's values ``Phi(T)`` per slice, cell and
            column (every time one of :meth:`forward`'s; the columns of the other times are
            zero there: a column belongs to one time).
        sensitivities
            Parameters whose derivatives to accumulate.
        progress
            Called with the number of forward steps swept back so far, after each segment's
            recomputation and each step (e.g. :class:`~meanfield.engine.progress.SweepProgress`).

        Returns
        -------
        phi0, derivatives
            (M, num_owned, P) ``Phi`` at t = 0, and (len(sensitivities), P) the derivatives of
            the columns' values with respect to each parameter.
        """
        steps = self.trajectory.steps
        first = next(iter(finals.values()))
        phi = np.zeros_like(first)
        derivatives = np.zeros((len(sensitivities), first.shape[-1]))
        pending = dict(finals)

        def activate(t: float) -> None:
            for T in list(pending):
                if same_time(t, T, MATCH_TOL):
                    phi[...] += pending.pop(T)

        kept = sorted(self.trajectory.kept)
        bounds = [*kept[1:], len(steps)]
        for start, stop in reversed(list(zip(kept, bounds))):
            if not np.any(phi) and all(T <= steps[start].t for T in pending):
                continue  # nothing to carry back through this segment
            state = self.trajectory.kept[start]
            stages = []
            for n in range(start, stop):
                self.sim.field.enter(steps[n].layer)
                current, state, evaluations = self._stages(state, steps[n].dt)
                stages.append((current, evaluations))
            for n in reversed(range(start, stop)):
                step = steps[n]
                activate(step.end)
                if np.any(phi):
                    phi[...] = self._reverse_step(step, stages[n - start], phi, sensitivities, derivatives)
                if progress is not None:
                    progress(len(steps) - n)
        activate(0.0)
        if pending:
            raise ValueError(f"times {sorted(pending)} are not ends of the forward steps")
        return phi, derivatives

    def _reverse_step(self, step: Step, recomputed: tuple[list[np.ndarray], list[Evaluation | None]],
                      phi: np.ndarray, sensitivities: Sequence[Sensitivity], derivatives: np.ndarray) -> np.ndarray:
        self.field.enter(step.layer)
        op, dt = self.operator, step.dt
        stages, evaluations = recomputed
        lin2 = op.linearise(self.sim.positions.split(stages[2]), evaluations[2])
        p2 = (2.0 / 3.0) * (phi + dt * op.apply(lin2, phi))
        lin1 = op.linearise(self.sim.positions.split(stages[1]), evaluations[1])
        p1 = 0.25 * (p2 + dt * op.apply(lin1, p2))
        lin0 = op.linearise(self.sim.positions.split(stages[0]), evaluations[0])
        for s, sens in enumerate(sensitivities):
            for lin, weight, p in ((lin2, 2.0 / 3.0, phi), (lin1, 0.25, p2), (lin0, 1.0, p1)):
                derivatives[s] += weight * dt * op.pairing(lin, p, self._velocity_change(sens, step, lin))
        return phi / 3.0 + 0.75 * p2 + p1 + dt * op.apply(lin0, p1)

    def _velocity_change(self, sens: Sensitivity, step: Step, lin: Linearisation) -> np.ndarray:
        """(M, F, d) the derivative of each slice's velocity at the facets with respect to the
        parameter, by central differences of the two moved schedules' fields."""
        out = []
        for velocity in (sens.plus, sens.minus):
            velocity.enter(velocity.schedule.index_from(step.t))
            out.append(np.array([self.operator.velocity(lin.points, w, velocity) for w in lin.weights]))
        return (out[0] - out[1]) / (2.0 * sens.h)
