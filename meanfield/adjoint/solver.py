"""The backward solve: the forward trajectory, checkpointed, and the adjoint run back along it.

:class:`AdjointSolver` drives a :class:`~meanfield.discrete_pde.DiscretePDE` forward to the requested
times (:meth:`AdjointSolver.forward`), keeping its step sequence (start, step size, layer) and
the state at every ``stride``-th step; when more states are kept than ``stride``, the stride
doubles and every other state is dropped, so about ``2 sqrt(steps)`` states are held.  The
backward sweep (:meth:`AdjointSolver.backward`) takes the segments between kept states from
the last to the first, recomputes each segment's steps from its first state (the same
operations as the forward steps, so the same states to round-off), keeps their Runge-Kutta
stage states (at most ``stride`` steps' worth), and runs the adjoint of SSP-RK3 back over them
(the shared tableau's :meth:`~meanfield.runge_kutta.ShuOsher.transposed_step`): for
``u1 = S(w0)``, ``w0 = u + dt L(u)``, ``u2 = S(w1)``, ``w1 = 3/4 u + 1/4 (u1 + dt L(u1))``,
``v = S(w2)``, ``w2 = 1/3 u + 2/3 (u2 + dt L(u2))`` (``S`` the scheme's postprocessing: DG1's
limiter, the identity for FV), with ``S'(w)*`` the adjoint of its derivative,

    Q2 = S'(w2)* Pv,   P2 = 2/3 (Q2 + dt A(u2) Q2),   Q1 = S'(w1)* P2,   P1 = 1/4 (Q1 + dt A(u1) Q1),
    Q0 = S'(w0)* P1,   Pu = 1/3 Q2 + 3/4 Q1 + Q0 + dt A(u0) Q0,

with ``A`` the adjoint operator of :mod:`.operator` (FV) or :mod:`.dg1` (DG1).  For both schemes
this is the exact discrete adjoint of the forward map for the forward run's step sizes: the
Taylor test agrees to second order in the perturbation's size (where DG1's limiter acts, the map
is only piecewise smooth, and the perturbation must not carry a cell across its kinks).  Memory:
about ``2 sqrt(steps)`` states plus ``3 stride`` stage states (``6 stride`` with DG1's limiter:
the states before it too, and the stages' field evaluations) and the linearisation data of one
stage; cost: one forward run to recompute the segments plus, per step, three linearisations (one
field evaluation each per slice; none for finite volumes, whose recomputed stage's own evaluation
at the facet midpoints is the one it needs) and three adjoint sums (every column at once).

The adjoint's rows are the operator's (``operator.points``): one per owned cell for FV, one per
owned cell and vertex for DG1 (a final condition there is the DG1 function of its values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..discrete_pde import DiscretePDE
from ..discretisation.dg1 import DG1Scheme
from ..runge_kutta import SSP_RK3
from ..times import MATCH_TOL, same_time, time_tol
from ..velocity import Evaluation, LayerVelocity
from .dg1 import DG1AdjointOperator
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
    #: Layer indices (of the plus and minus schedules) -> whether they differ, found once per layer.
    _differ: dict[tuple[int, int], bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    def moves(self, t: float) -> bool:
        """Whether the two moved schedules differ in the layer in force from ``t`` on."""
        key = (self.plus.schedule.index_from(t), self.minus.schedule.index_from(t))
        if key not in self._differ:
            a, b = self.plus.schedule.layers[key[0]], self.minus.schedule.layers[key[1]]
            self._differ[key] = a is not b and a.to_dict() != b.to_dict()
        return self._differ[key]


class AdjointSolver:
    """Forward recording and backward adjoint sweep of a discrete PDE (module docstring).

    Parameters
    ----------
    pde
        A freshly built :class:`~meanfield.discrete_pde.DiscretePDE` at t = 0 (no atoms).
    kernel
        (M, M) the slices' weights (``None``: the PDE's own, see
        :meth:`meanfield.causal.CausalVelocity.kernel`).
    """

    def __init__(self, pde: DiscretePDE, kernel: np.ndarray | None = None) -> None:
        self.pde = pde
        problem = pde.problem
        if kernel is None:
            kernel = pde.slice_kernel()
        f = problem.field
        self.field = LayerVelocity(pde.schedule, pde.comm, f.method, f.tol, fixed_points=True,
                                   direct_sums=f.direct_sums)
        plain = None if problem.velocity.is_attention else problem.velocity.rotation(problem.d)
        settings = (self.field, kernel, plain, f.method, f.tol, f.direct_sums)
        scheme = pde.scheme
        self.operator = (DG1AdjointOperator(scheme, *settings) if isinstance(scheme, DG1Scheme)
                         else AdjointOperator(scheme, *settings))
        self.stepping = pde.stepping
        self.trajectory = Trajectory()
        self.initial = pde.state.copy()

    # -- forward -----------------------------------------------------------------------------
    def forward(self, times: Sequence[float], progress: Callable[[float], None] | None = None) \
            -> dict[float, np.ndarray]:
        """Run forward to the largest of ``times``, landing on each; returns the state at each time.
        ``progress(t)`` is called after each step (e.g. :class:`~meanfield.engine.progress.SweepProgress`)."""
        pde, trajectory = self.pde, self.trajectory
        states = {}
        for target in sorted(set(float(t) for t in times)):
            while target - pde.t > time_tol(target):
                boundary = pde.next_landing(pde.t)
                end = target if boundary is None or boundary >= target else boundary
                index = len(trajectory.steps)
                trajectory.keep(index, pde.state)
                t, layer = pde.t, pde.schedule.index_from(pde.t)
                dt = pde.step(end)
                trajectory.steps.append(Step(t, dt, pde.t, layer))
                if progress is not None:
                    progress(pde.t)
            states[target] = pde.state.copy()
        return states

    # -- backward ----------------------------------------------------------------------------
    def _stages(self, state: np.ndarray, dt: float) -> tuple[list[np.ndarray], np.ndarray, list[Evaluation | None]]:
        """The stage states (u, u1, u2) of one SSP-RK3 step of size dt from ``state`` followed by
        the three stages' results before the postprocessing (limiter), the step's result (the
        operations of :meth:`meanfield.timestepping.SSPRK3.step`), and the field's evaluation at
        each stage (``None`` where the right-hand side made none of one measure)."""
        post, field = self.stepping.postprocess, self.pde.field
        evaluations: list[Evaluation | None] = []
        states: list[np.ndarray] = [state]
        rates: list[np.ndarray] = []
        before: list[np.ndarray] = []
        for i in range(1, SSP_RK3.stages + 1):
            field.last = None
            rates.append(self.stepping.rhs_and_bound(states[-1])[0])
            evaluations.append(field.last)
            before.append(SSP_RK3.stage(i, states, rates, dt))
            states.append(post(before[-1]))
        return [*states[:-1], *before], states[-1], evaluations

    def backward(self, finals: Mapping[float, np.ndarray], sensitivities: Sequence[Sensitivity] = (), *,
                 sources: Callable[[int, np.ndarray], np.ndarray | None] | None = None,
                 progress: Callable[[float], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Run the adjoint back to t = 0 (collective).

        Parameters
        ----------
        finals
            Time T -> (M, rows, P) the adjoint's values ``Phi(T)`` per slice, row
            (``operator.points``) and column (every time one of :meth:`forward`'s; the columns
            of the other times are zero there: a column belongs to one time); or (M, num_owned,
            P) per cell (DG1: constant in each cell).
        sensitivities
            Parameters whose derivatives to accumulate.
        sources
            ``sources(n, state)``, called with each step's index n and the state at its end, returns
            what to add to the adjoint there (per cell or per row, as ``finals``; or ``None``): the
            derivative of a running cost ``sum_n w_n D(state_n)`` with respect to the state at the end of step n.
        progress
            Called with the number of forward steps swept back so far, after each segment's
            recomputation and each step (e.g. :class:`~meanfield.engine.progress.SweepProgress`).

        Returns
        -------
        phi0, derivatives
            ``Phi`` at t = 0 in the layout of ``finals`` (per row, or per cell: DG1's cell means),
            and (len(sensitivities), P) the derivatives of the columns' values with respect to
            each parameter.
        """
        steps = self.trajectory.steps
        first = next(iter(finals.values()))
        pending = {T: self.operator.rows(np.asarray(final, dtype=float)) for T, final in finals.items()}
        phi = np.zeros_like(next(iter(pending.values())))
        derivatives = np.zeros((len(sensitivities), first.shape[-1]))

        def activate(t: float) -> None:
            for T in list(pending):
                if same_time(t, T, MATCH_TOL):
                    phi[...] += pending.pop(T)

        kept = sorted(self.trajectory.kept)
        bounds = [*kept[1:], len(steps)]
        for start, stop in reversed(list(zip(kept, bounds))):
            if sources is None and not np.any(phi) and all(T <= steps[start].t for T in pending):
                continue  # nothing to carry back through this segment
            state = self.trajectory.kept[start]
            stages = []
            for n in range(start, stop):
                self.pde.field.enter(steps[n].layer)
                current, state, evaluations = self._stages(state, steps[n].dt)
                stages.append((current, evaluations))
            for n in reversed(range(start, stop)):
                step = steps[n]
                activate(step.end)
                if sources is not None:
                    added = sources(n, stages[n + 1 - start][0][0] if n + 1 < stop else state)
                    if added is not None:
                        phi += self.operator.rows(added)
                if np.any(phi):
                    phi[...] = self._reverse_step(step, stages[n - start], phi, sensitivities, derivatives)
                if progress is not None:
                    progress(len(steps) - n)
        activate(0.0)
        if pending:
            raise ValueError(f"times {sorted(pending)} are not ends of the forward steps")
        return (self.operator.cells(phi) if first.shape[1] == self.pde.scheme.geometry.num_owned else phi), derivatives

    def _reverse_step(self, step: Step, recomputed: tuple[list[np.ndarray], list[Evaluation | None]],
                      phi: np.ndarray, sensitivities: Sequence[Sensitivity], derivatives: np.ndarray) -> np.ndarray:
        self.field.enter(step.layer)
        op, dt, split = self.operator, step.dt, self.pde.split
        stages, evaluations = recomputed
        stages_count = SSP_RK3.stages

        def apply(j: int, mu: np.ndarray) -> np.ndarray:
            """``A(u_j) mu`` at stage j, and the parameters' derivatives paired with ``mu``."""
            lin = op.linearise(split(stages[j]), evaluations[j])
            for s, sens in enumerate(sensitivities):
                if sens.moves(step.t):  # else the parameter does not change this layer
                    derivatives[s] += dt * op.pairing(lin, mu, self._velocity_change(sens, step, lin))
            return op.apply(lin, mu)

        def post(i: int, lam: np.ndarray) -> np.ndarray:
            """``S'(w_i)* lam``: the limiter's adjoint at stage i's state before it."""
            return op.limiter_transpose(split(stages[stages_count + i - 1]), lam)

        return SSP_RK3.transposed_step(phi, dt, apply, post)

    def _velocity_change(self, sens: Sensitivity, step: Step, lin: Linearisation) -> np.ndarray:
        """(M, F, d) the derivative of each slice's velocity at the facets with respect to the
        parameter, by central differences of the two moved schedules' fields."""
        out = []
        for velocity in (sens.plus, sens.minus):
            velocity.enter(velocity.schedule.index_from(step.t))
            out.append(np.array([self.operator.velocity(lin.points, w, velocity) for w in lin.weights]))
        return (out[0] - out[1]) / (2.0 * sens.h)
