"""The backward solve: the forward trajectory, recorded, and the adjoint run back along it.

:class:`AdjointSolver` drives a :class:`~meanfield.discrete_pde.DiscretePDE` forward to the requested
times (:meth:`AdjointSolver.forward`), keeping its step sequence (start, step size, layer),
every step's Runge-Kutta stages as the forward step made them (the stage states, the states
before the limiter and the field's evaluation at each stage, recorded by :class:`StageRecorder`)
while they fit a memory budget, and the state at every ``stride``-th step; when more states are
kept than ``stride``, the stride doubles and every other state is dropped, so about
``2 sqrt(steps)`` states are held.  The backward sweep (:meth:`AdjointSolver.backward`) takes the
segments between kept states from the last to the first; a segment with a step whose stages
were not kept is recomputed from its first state (the same operations as the forward steps,
so the same states to round-off) and its stages kept for the sweep (at most ``stride`` steps'
worth).  It then runs the adjoint of SSP-RK3 back over them
(the shared tableau's :meth:`~meanfield.runge_kutta.ShuOsher.transposed_step`): for
``u1 = S(w0)``, ``w0 = u + dt L(u)``, ``u2 = S(w1)``, ``w1 = 3/4 u + 1/4 (u1 + dt L(u1))``,
``v = S(w2)``, ``w2 = 1/3 u + 2/3 (u2 + dt L(u2))`` (``S`` the scheme's postprocessing: DG1's
limiter, the identity for FV), with ``S'(w)*`` the adjoint of its derivative,

    Q2 = S'(w2)* Pv,   P2 = 2/3 (Q2 + dt A(u2) Q2),   Q1 = S'(w1)* P2,   P1 = 1/4 (Q1 + dt A(u1) Q1),
    Q0 = S'(w0)* P1,   Pu = 1/3 Q2 + 3/4 Q1 + Q0 + dt A(u0) Q0,

with ``A`` the adjoint operator of :mod:`.operator` (FV) or :mod:`.dg1` (DG1).  For both schemes
this is the exact discrete adjoint of the forward map for the forward run's step sizes: the
Taylor test agrees to second order in the perturbation's size (where DG1's limiter acts, the map
is only piecewise smooth, and the perturbation must not carry a cell across its kinks).

Memory and cost.  A step's stages are 3 stage states, 3 states before the limiter (the same
arrays for FV, which has none), its result and the field's values at each stage
(:meth:`StepStages.nbytes`; DG1 on S^2 with one head: 87 numbers, 700 bytes, per cell and step;
FV: about 30).
They are kept for the first steps while the total fits ``stage_budget`` bytes on every rank
(:func:`meanfield.memory.stage_budget`: a quarter of the memory available to the process,
shared by the ranks on the node, or ``MEANFIELD_ADJOINT_MEMORY``); from the first step that does
not fit, none is kept, and the backward sweep recomputes the segments from that step on (about
``2 sqrt(steps)`` states plus ``6 stride`` stage states and their evaluations held for one
segment).  :meth:`Trajectory.memory` and :meth:`Trajectory.describe` report the decision.  Cost
of the backward sweep: the recomputation of those segments (none when every step's stages were
kept, one forward run when none was) plus, per step, three linearisations (no field evaluation
with one density: the stage's own evaluation is the one it needs; one per slice in a causal run)
and three adjoint sums (every column at once).

The adjoint's rows are the operator's (``operator.points``): one per owned cell for FV, one per
owned cell and vertex for DG1 (a final condition there is the DG1 function of its values).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..discrete_pde import DiscretePDE
from ..discretisation.dg1 import DG1Scheme
from ..memory import format_bytes
from ..runge_kutta import SSP_RK3
from ..times import MATCH_TOL, same_time, time_tol
from ..timestepping import SteppedScheme
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
class StepStages:
    """What the adjoint of one SSP-RK3 step needs of the forward step: the stage states
    ``u0, u1, u2``, then the three stages' results before the postprocessing (limiter)
    ``w0, w1, w2``, the field's evaluation at each stage (``None`` where the right-hand side made
    none of one measure) and the step's result."""

    states: list[np.ndarray]
    evaluations: list[Evaluation | None]
    end: np.ndarray

    def nbytes(self) -> int:
        """Bytes of the arrays it holds apart from ``u0`` (the step before's result) and the
        evaluations' fixed targets and sources; an array held twice (FV: ``w_i`` is ``u_{i+1}``)
        counts once."""
        arrays = [*self.states[1:], self.end]
        for e in self.evaluations:
            if e is not None:
                arrays += [e.weights, e.values.N, e.values.Z, e.values.log_scale]
        return sum(a.nbytes for a in {id(a): a for a in arrays}.values())


class StageRecorder:
    """The stepped scheme, recording every right-hand side's state and field evaluation and
    every postprocessing's input: what :class:`~meanfield.timestepping.SSPRK3` steps while
    :meth:`AdjointSolver.forward` records."""

    def __init__(self, scheme: SteppedScheme, field: LayerVelocity) -> None:
        self.scheme, self.field = scheme, field
        self.rates: list[tuple[np.ndarray, Evaluation | None]] = []
        self.posts: list[np.ndarray] = []

    def __getattr__(self, name: str):
        return getattr(self.scheme, name)

    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        self.field.last = None
        out = self.scheme.rhs_and_bound(state)
        self.rates.append((state, self.field.last))
        return out

    def postprocess(self, state: np.ndarray) -> np.ndarray:
        self.posts.append(state)
        return self.scheme.postprocess(state)

    def take(self, end: np.ndarray) -> StepStages:
        """The accepted step's stages, ``end`` its result, and a clean record for the next step.
        A step evaluates ``L(u0)`` once, then tries stages until one attempt is accepted: its
        right-hand sides are the last two, its postprocessings the last three."""
        (u0, e0), (u1, e1), (u2, e2) = self.rates[0], *self.rates[-2:]
        stages = StepStages([u0, u1, u2, *self.posts[-SSP_RK3.stages:]], [e0, e1, e2], end)
        self.rates, self.posts = [], []
        return stages


@dataclass
class Trajectory:
    """The forward run's steps, the states kept at every ``stride``-th step (index -> state),
    and the stages of the first steps, as many as fit ``budget`` bytes (index -> stages)."""

    steps: list[Step] = field(default_factory=list)
    kept: dict[int, np.ndarray] = field(default_factory=dict)
    stride: int = 1
    stages: dict[int, StepStages] = field(default_factory=dict)
    budget: float = 0.0
    #: How ``budget`` was chosen (:func:`meanfield.memory.stage_budget`).
    budget_origin: str = ""
    stage_bytes: int = 0
    #: Whether the stages still fit: once one step's do not, no later step's are kept.
    storing: bool = True

    def keep(self, index: int, state: np.ndarray) -> None:
        """Keep the state before step ``index`` if it falls on the stride; thin when too many are kept."""
        if index % self.stride:
            return
        self.kept[index] = state.copy()
        if len(self.kept) > max(self.stride, 4):
            self.stride *= 2
            self.kept = {i: s for i, s in self.kept.items() if i % self.stride == 0}

    def keep_stages(self, index: int, stages: StepStages, comm) -> None:
        """Keep step ``index``'s stages if every rank's still fit its budget (collective: the
        ranks must agree, since recomputing a segment is)."""
        from mpi4py import MPI

        if not self.storing:
            return
        size = stages.nbytes()
        self.storing = bool(comm.allreduce(int(self.stage_bytes + size <= self.budget), op=MPI.MIN))
        if self.storing:
            self.stages[index] = stages
            self.stage_bytes += size

    def memory(self) -> dict:
        """The memory decision, for the run's metadata: the budget and its origin, the steps
        whose stages were kept, their bytes (this rank's) and the steps the backward sweep recomputes."""
        return {"budget_bytes": self.budget, "budget": self.budget_origin, "steps": len(self.steps),
                "stages_kept": len(self.stages), "stage_bytes": self.stage_bytes,
                "steps_recomputed": self.recomputed()}

    def recomputed(self) -> int:
        """Steps the backward sweep recomputes: those of the segments (between kept states) with
        a step whose stages were not kept."""
        bounds = sorted(self.kept)
        return sum(stop - start for start, stop in zip(bounds, [*bounds[1:], len(self.steps)])
                   if any(n not in self.stages for n in range(start, stop)))

    def describe(self) -> str:
        """One line: ``stages of 12 of 12 steps kept (1.2 MB; budget 8 GB: 0.25 of ...); 0 steps recomputed``."""
        return (f"stages of {len(self.stages)} of {len(self.steps)} steps kept ({format_bytes(self.stage_bytes)}; "
                f"budget {format_bytes(self.budget)}: {self.budget_origin}); {self.recomputed()} steps recomputed")


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
        :meth:`meanfield.discrete_pde.DiscretePDE.slice_kernel`).
    stage_budget
        Bytes per rank that the forward run's kept stages may hold (``None``: the default of
        :func:`meanfield.memory.stage_budget`; ``0``: keep none, recompute every segment).
    """

    def __init__(self, pde: DiscretePDE, kernel: np.ndarray | None = None, stage_budget: float | None = None) -> None:
        from ..memory import ranks_on_node
        from ..memory import stage_budget as default_budget

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
        budget, origin = (default_budget(ranks_on_node(pde.comm)) if stage_budget is None
                          else (float(stage_budget), f"{format_bytes(stage_budget)} given"))
        self.trajectory = Trajectory(budget=budget, budget_origin=origin)
        self.initial = pde.state.copy()

    # -- forward -----------------------------------------------------------------------------
    def forward(self, times: Sequence[float], progress: Callable[[float], None] | None = None) \
            -> dict[float, np.ndarray]:
        """Run forward to the largest of ``times``, landing on each; returns the state at each time.
        ``progress(t)`` is called after each step (e.g. :class:`~meanfield.engine.progress.SweepProgress`).
        Each step's stages are kept while they fit the budget (:meth:`Trajectory.keep_stages`)."""
        pde, trajectory = self.pde, self.trajectory
        states = {}
        stepper = pde.stepper
        recorder = StageRecorder(stepper.scheme, pde.field)
        stepper.scheme = recorder
        try:
            for target in sorted(set(float(t) for t in times)):
                while target - pde.t > time_tol(target):
                    boundary = pde.next_landing(pde.t)
                    end = target if boundary is None or boundary >= target else boundary
                    index = len(trajectory.steps)
                    trajectory.keep(index, pde.state)
                    t, layer = pde.t, pde.schedule.index_from(pde.t)
                    dt = pde.step(end)
                    trajectory.steps.append(Step(t, dt, pde.t, layer))
                    trajectory.keep_stages(index, recorder.take(pde.state), pde.comm)
                    if progress is not None:
                        progress(pde.t)
                states[target] = pde.state.copy()
        finally:
            stepper.scheme = recorder.scheme
        return states

    # -- backward ----------------------------------------------------------------------------
    def _stages(self, state: np.ndarray, dt: float) -> StepStages:
        """The :class:`StepStages` of one SSP-RK3 step of size dt from ``state``, recomputed (the
        operations of :meth:`meanfield.timestepping.SSPRK3.step`)."""
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
        return StepStages([*states[:-1], *before], evaluations, states[-1])

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
            stages = self._segment(start, stop)
            for n in reversed(range(start, stop)):
                step = steps[n]
                activate(step.end)
                if sources is not None:
                    added = sources(n, stages[n - start].end)
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

    def _segment(self, start: int, stop: int) -> list[StepStages]:
        """The stages of steps ``start`` to ``stop - 1``: the kept ones, or else all recomputed
        from the state kept before ``start`` (collective)."""
        kept = [self.trajectory.stages.get(n) for n in range(start, stop)]
        if all(stages is not None for stages in kept):
            return [stages for stages in kept if stages is not None]
        state, out = self.trajectory.kept[start], []
        for step in self.trajectory.steps[start:stop]:
            self.pde.field.enter(step.layer)
            out.append(self._stages(state, step.dt))
            state = out[-1].end
        return out

    def _reverse_step(self, step: Step, recorded: StepStages, phi: np.ndarray, sensitivities: Sequence[Sensitivity],
                      derivatives: np.ndarray) -> np.ndarray:
        self.field.enter(step.layer)
        op, dt, split = self.operator, step.dt, self.pde.split
        stages, evaluations = recorded.states, recorded.evaluations
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
