"""The assembled discrete PDE: mesh, nonlocal field, scheme, positions, atoms and SSP-RK3, built once from a problem.

:class:`DiscretePDE` is the equation as the code solves it, with its current state and time:
what the run controller drives (through :class:`~meanfield.drivers.pde.PDESimulation`, which
adds the outputs and checkpoints), what the adjoint differentiates, what the planner measures
and what the studies and benchmarks step and read.  Everything they need is a public method or
attribute here: one step, the layer landings, the stepped right-hand side, the slices of a
state, cell averages, gathering to rank 0, the mesh arrays, and the velocity with observers of
its evaluations.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from .atoms import Atoms
from .atoms.component import AtomsComponent, HybridAtoms, NoAtoms
from .atoms.coupling import AtomCoupling
from .atoms.hybrid import AtomEvents
from .config import MAX_STEPS, ConfigError
from .discretisation.base import SpatialScheme
from .discretisation.ordering import gather_rows
from .discretisation.registry import scheme_class, scheme_options
from .mesh import RawMesh, distribute
from .model import VelocityField
from .nonlocal_field import NonlocalEvaluator
from .nonlocal_field.base import components
from .positions import PositionsComponent, positions_component
from .problem import Problem
from .times import time_tol
from .timestepping import SSPRK3, SteppedScheme, StepStats
from .velocity import LayerVelocity, velocities

#: Called with the velocity of every evaluation: (m, d) of one measure, (k, m, d) of k at once.
VelocityObserver = Callable[[np.ndarray], None]


class TimedVelocity:
    """A velocity field that accumulates the wall time spent evaluating it and shows each result
    to its :attr:`observers` (:meth:`DiscretePDE.observing_velocity`)."""

    def __init__(self, field: VelocityField) -> None:
        self.field = field
        self.seconds = 0.0
        self.calls = 0
        self.observers: list[VelocityObserver] = []

    def _observed(self, X: np.ndarray) -> np.ndarray:
        for observe in self.observers:
            observe(X)
        return X

    def __call__(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        tic = time.perf_counter()
        try:
            X = self.field(targets, sources, weights)
        finally:
            self.seconds += time.perf_counter() - tic
            self.calls += 1
        return self._observed(X)

    def many(self, targets: np.ndarray, sources: np.ndarray, columns: np.ndarray,
             directions: np.ndarray | None = None, mixing: np.ndarray | None = None) -> np.ndarray:
        """The velocities of k measures at once, or their components along ``directions``
        (:func:`meanfield.velocity.velocities`), timed; the observers see the velocities (formed
        in full while there are observers)."""
        tic = time.perf_counter()
        try:
            X = velocities(self.field, targets, sources, columns, None if self.observers else directions, mixing)
        finally:
            self.seconds += time.perf_counter() - tic
            self.calls += 1
        if not self.observers or directions is None:
            return X
        return components(self._observed(X), directions)


class DiscretePDE:
    """The density on a distributed sphere mesh, advanced by SSP-RK3 (module docstring).

    Building it refuses, with a :class:`~meanfield.config.ConfigError`, a model whose initial
    velocity is not finite or would need more than :data:`~meanfield.config.MAX_STEPS` steps,
    and a fixed ``time.dt`` above the first step's stability bound (one velocity evaluation per
    layer; nothing is written).

    Parameters
    ----------
    problem
        The resolved problem.
    comm
        MPI communicator.

    Attributes
    ----------
    problem, comm
        As given.
    state, t
        This rank's state (owned cells; a causal run's stacks its slices, see :meth:`split`) and
        the model time.
    scheme, stepper
        The spatial scheme of one slice and the time stepper (:attr:`stepping` is what it steps).
    schedule, field
        The layer schedule and the velocity of its active layer (attention + feed-forward),
        switched at layer boundaries, which the steps land on (:meth:`next_landing`); the
        field's ``last`` is its last evaluation (the adjoint's recording hook).
    velocity
        The velocity the scheme moves the density with (the field, or a prescribed rotation,
        coupled to the atoms in a hybrid run), timed and observed (:meth:`observing_velocity`).
    raw
        The serial mesh on rank 0 (``None`` elsewhere).
    num_cells
        The mesh's cells (all ranks).
    positions
        The token positions as a component (:mod:`meanfield.positions`): :class:`NoPositions`
        (one density) for a run without a mask, :class:`CausalPositions` (M position slices)
        for a causal run.
    atoms_component
        The atoms as a component (:mod:`meanfield.atoms.component`): :class:`NoAtoms` for a
        plain run, :class:`HybridAtoms` for a hybrid run (``[atoms]`` with ``capture`` or
        ``initial``; see :mod:`meanfield.atoms`).
    """

    def __init__(self, problem: Problem, comm) -> None:
        from .collective import on_root
        from .memory import check_memory, pde_estimate, ranks_on_node
        from .mesh import MeshError

        self.problem, self.comm, self.t = problem, comm, 0.0
        here = ranks_on_node(comm)

        def build() -> RawMesh:
            raw = problem.mesh.build()
            if problem.mesh.file is not None:  # its size is known now, before dolfinx builds anything
                check_memory(pde_estimate(problem.sphere, problem.scheme.kind, len(raw.cells),
                                          f"mesh.file {problem.mesh.file}", comm.size, problem.mask.slices), here)
            return raw

        self.raw = on_root(comm, build, MeshError, broadcast=False)
        msh = distribute(comm, self.raw)
        self.schedule = problem.schedule()
        self.field = LayerVelocity(self.schedule, comm, problem.field.method, problem.field.tol, fixed_points=True,
                                   direct_sums=problem.field.direct_sums)
        v = problem.velocity
        plain: VelocityField = self.field if v.is_attention else v.rotation(problem.d)
        coupling = (AtomCoupling(self.field.groups, plain, comm, problem.d, self.field.direct_groups)
                    if problem.atoms.enabled else None)
        self.velocity = TimedVelocity(plain if coupling is None else coupling)
        name = problem.scheme.kind

        def scheme(velocity: VelocityField) -> SpatialScheme:
            return scheme_class(name)(msh, velocity, **scheme_options(name, problem.scheme))

        self.positions: PositionsComponent = positions_component(problem.mask, self.velocity, scheme)
        self.scheme = self.positions.scheme
        self.num_cells = msh.topology.index_map(msh.topology.dim).size_global
        self.atoms_component: AtomsComponent = (NoAtoms(self.positions.stepping) if coupling is None
                                                else self._hybrid(coupling))
        self.state = self.atoms_component.share(self.positions.initial_state(problem.initial()))
        t = problem.time
        self.stepper = SSPRK3(self.atoms_component.stepping, t.cfl, t.dt, t.dt_max, t.tol)
        self._check_initial_rate()

    def _hybrid(self, coupling: AtomCoupling) -> HybridAtoms:
        """The atoms of a hybrid run (``[atoms]``), coupled to the scheme through ``coupling``."""
        spec = self.problem.atoms
        bounds = [layer.lipschitz_bound() / spec.lipschitz_step for layer in self.schedule.layers]
        events = AtomEvents(self.scheme, spec.capture, spec.rule, spec.merge_distance, spec.absorb_mass,
                            self.gather, None if self.raw is None else self.raw.cells)
        return HybridAtoms(self.scheme, coupling, spec.initial, lambda: bounds[self.field.index], events)

    @property
    def atoms(self) -> Atoms | None:
        """The atoms (replicated on every rank) of a hybrid run, ``None`` for a plain run.  The
        density then carries the mass the initial atoms leave (total mass 1); when they leave
        less than 1e-12 (masses summing to 1 up to round-off) it is zero and the run is all atoms."""
        return self.atoms_component.atoms

    @property
    def stepping(self) -> SteppedScheme:
        """What the time stepper steps: the right-hand side and postprocessing (limiter) of the
        scheme, of its slices in a causal run, coupled to the atoms in a hybrid run (the
        operations the adjoint differentiates)."""
        return self.atoms_component.stepping

    @property
    def evaluator(self) -> NonlocalEvaluator | None:
        """The active layer's attention evaluator (``None`` for a layer without attention)."""
        return self.field.evaluator

    # -- stepping ------------------------------------------------------------------------
    def next_landing(self, t: float) -> float | None:
        """The first layer boundary after ``t`` (``None`` after the last): steps land on it."""
        return self.schedule.next_boundary(t)

    def step(self, t_end: float) -> float:
        """Advance one step of at most ``t_end - t``, landing on ``t_end`` if it reaches it, under
        the layer in force from ``t`` (the atoms captured and merged after it); return its size
        (collective)."""
        self.field.enter(self.schedule.index_from(self.t))
        state, dt = self.stepper.step(self.atoms_component.stepped_state(self.state), self.t, t_end - self.t)
        close = t_end - (self.t + dt) <= time_tol(t_end)
        t = t_end if close else self.t + dt
        self.state = self.atoms_component.after_step(state, self.t, t)
        self.t = t
        return dt

    def _velocity_layers(self) -> range:
        """The layers whose velocities differ: every layer of attention, one for a rotation."""
        return range(len(self.schedule.layers)) if self.problem.velocity.is_attention else range(1)

    def initial_rates(self) -> list[float]:
        """The outflow rate of the initial density under each layer's velocity (one velocity
        evaluation per layer; the step size there is ``cfl / rate``).  A prescribed rotation has
        one entry."""
        rates = []
        for k in self._velocity_layers():
            self.field.enter(k)
            rates.append(float(self.stepper.scheme.rhs_and_bound(self.atoms_component.stepped_state(self.state))[1]))
        self.field.enter(0)
        return rates

    def initial_error_steps(self, horizons: Sequence[float]) -> list[float]:
        """The error controller's step on the initial density under each layer (as
        :meth:`initial_rates`): its proposal after one trial step of at most ``horizons[k]``
        (``inf`` where the error does not limit the step).  This costs a step per layer, and
        leaves the stepper as it was."""
        stats, steps = self.stepper.stats, []
        for k, horizon in zip(self._velocity_layers(), horizons):
            self.field.enter(k)
            self.stepper.stats = StepStats()
            self.stepper.step(self.atoms_component.stepped_state(self.state), 0.0, horizon)
            steps.append(self.stepper.stats.dt_next)
        self.field.enter(0)
        self.stepper.stats = stats
        return steps

    def _check_initial_rate(self) -> None:
        """Refuse a model whose initial velocity is not finite or too fast, and a fixed
        ``time.dt`` above the first step's bound (the class docstring)."""
        t = self.problem.time
        rates = self.initial_rates()
        first = min(t.dt, t.dt_max or np.inf, t.t_final) if t.dt is not None else 0.0
        if first * rates[0] > 1.0 + 1e-12:
            raise ConfigError(f"time.dt: {t.dt:g} is above the stability bound of the first step, dt <= "
                              f"{1.0 / rates[0]:.3g} (dt * max outflow rate = {first * rates[0]:.3g} > 1 on the "
                              "initial density); lower time.dt or leave it out for the adaptive step")
        for k, rate in enumerate(rates):
            where = self.schedule.origins[k]
            if not np.isfinite(rate):
                raise ConfigError(f"{where}: the initial velocity is not finite (outflow rate {rate!r});"
                                  " check the heads' weights, V, beta and the feed-forward block")
            steps = t.t_final * rate / t.cfl
            if steps > MAX_STEPS:
                raise ConfigError(f"{where}: the initial velocity limits the step to dt = {t.cfl / rate:.3g}"
                                  f", {steps:.3g} steps to t_final = {t.t_final:g} (at most "
                                  f"{MAX_STEPS:.0e}); check the heads' weights, V, beta and the feed-forward block")

    @contextmanager
    def observing_velocity(self, observe: VelocityObserver) -> Iterator[None]:
        """Within the block, ``observe`` is called with the velocity of every evaluation the
        scheme makes (:class:`TimedVelocity`): the speeds the planner measures."""
        self.velocity.observers.append(observe)
        try:
            yield
        finally:
            self.velocity.observers.remove(observe)

    # -- the slices of a state -----------------------------------------------------------------
    @property
    def slice_count(self) -> int:
        """The number M of position slices (1 without a mask)."""
        return self.positions.count

    @property
    def slice_positions(self) -> np.ndarray | None:
        """(M,) the slices' positions ``s_k = (k + 1/2) / M``, ``None`` without a mask."""
        return self.positions.s

    def slice_kernel(self) -> np.ndarray:
        """(M, M) the slices' weights (:meth:`~meanfield.positions.PositionsComponent.kernel`; ``[[1]]``
        without a mask)."""
        return self.positions.kernel()

    def split(self, state: np.ndarray) -> list[np.ndarray]:
        """The M states of one slice each (of :attr:`scheme`) in a state."""
        return self.positions.split(state)

    def slice_averages(self, state: np.ndarray) -> np.ndarray:
        """(M, num_owned) the cell averages of each slice of a state."""
        return np.array([self.scheme.cell_averages(part) for part in self.split(state)])

    def cell_averages(self, state: np.ndarray) -> np.ndarray:
        """(num_owned,) the cell averages of a state's whole token distribution (a causal run's
        mean over its slices, mass 1)."""
        return self.scheme.cell_averages(self.positions.whole(state))

    # -- the mesh and rank 0 -------------------------------------------------------------------
    def owned_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(num_owned, d) centroids and (num_owned,) areas of this rank's cells."""
        g = self.scheme.geometry
        return g.centroid[: g.num_owned], g.measure[: g.num_owned]

    def gather(self, rows: np.ndarray) -> np.ndarray | None:
        """(num_owned, ...) rows of this rank -> (C, ...) in global cell order on rank 0 (``None``
        elsewhere; collective)."""
        return gather_rows(self.comm, rows, self.scheme.geometry.original_index, self.num_cells)

    def gather_slices(self, values: np.ndarray) -> np.ndarray | None:
        """(M, num_owned, P) per slice and owned cell -> (M, C, P) in global cell order on rank 0
        (``None`` elsewhere; collective)."""
        rows = self.gather(np.ascontiguousarray(np.moveaxis(values, 0, 1)).reshape(values.shape[1], -1))
        if rows is None:
            return None
        return np.moveaxis(rows.reshape(rows.shape[0], values.shape[0], values.shape[2]), 0, 1)

    def mesh_arrays(self) -> dict[str, np.ndarray] | None:
        """The mesh on rank 0 (``None`` elsewhere; collective): ``sphere``, ``vertices``,
        ``cells``, ``centroids``, ``areas`` in global cell order, DG1's ``vertex_jacobian``, a
        causal run's slice ``positions``."""
        centroids, areas = (self.gather(a) for a in self.owned_cells())
        jacobian = self.scheme.vertex_jacobian()
        vertex_jacobian = None if jacobian is None else self.gather(jacobian)
        if self.comm.rank != 0:
            return None
        assert self.raw is not None and centroids is not None and areas is not None
        out = {"sphere": np.array(self.problem.sphere), "vertices": self.raw.points, "cells": self.raw.cells,
               "centroids": centroids, "areas": areas}
        out.update(self.positions.static_arrays())
        if vertex_jacobian is not None:
            out["vertex_jacobian"] = vertex_jacobian
        return out
