"""The PDE: mesh, nonlocal field, scheme and SSP-RK3 as a simulation the run controller drives.

:func:`run` is the entry point behind ``meanfield run``.  Everything that can be checked
cheaply (config, target directory, mesh file, initial data) is checked before anything is
written, so bad input leaves nothing behind.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..atoms import Atoms
from ..atoms.component import AtomsComponent, HybridAtoms, NoAtoms
from ..atoms.coupling import AtomCoupling
from ..atoms.hybrid import AtomEvents
from ..config import MAX_STEPS, Config, ConfigError
from ..discretisation.base import SpatialScheme
from ..discretisation.ordering import gather_rows, scatter_rows
from ..discretisation.registry import scheme_class, scheme_options
from ..engine.callbacks import Callback
from ..engine.handlers import Handler, file_outputs, user_observables
from ..engine.simulation import Simulation
from ..mesh import RawMesh, distribute
from ..model import VelocityField
from ..nonlocal_field import NonlocalEvaluator
from ..positions import PositionsComponent, positions_component
from ..problem import Problem
from ..rundir.layout import BY_POSITION
from ..rundir.results import PDERunResult, load_pde_run
from ..rundir.writers import OutputWriter, pde_run_file
from ..times import time_tol
from ..timestepping import SSPRK3, StepStats
from ..velocity import LayerVelocity, velocities
from .launch import check_new_target, check_size, configure_process, resolve_problem, start_run


class TimedVelocity:
    """A velocity field that accumulates the wall time spent evaluating it."""

    def __init__(self, field: VelocityField) -> None:
        self.field = field
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        tic = time.perf_counter()
        try:
            return self.field(targets, sources, weights)
        finally:
            self.seconds += time.perf_counter() - tic
            self.calls += 1

    def many(self, targets: np.ndarray, sources: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The velocities of k measures at once (:func:`meanfield.velocity.velocities`), timed."""
        tic = time.perf_counter()
        try:
            return velocities(self.field, targets, sources, columns)
        finally:
            self.seconds += time.perf_counter() - tic
            self.calls += 1


class PDESimulation(Simulation):
    """The density on a distributed sphere mesh, advanced by SSP-RK3 (see :class:`Simulation`).

    Parameters
    ----------
    problem
        The resolved problem.
    comm
        MPI communicator.

    Attributes
    ----------
    scheme, stepper, state
        The spatial scheme, the time stepper, this rank's state.
    schedule, field
        The layer schedule and the velocity of its active layer (attention + feed-forward),
        switched at layer boundaries, which the steps land on (:meth:`next_landing`).
    raw
        The serial mesh on rank 0 (``None`` elsewhere).
    positions
        The token positions as a component (:mod:`meanfield.positions`): :class:`NoPositions`
        (one density) for a run without a mask, :class:`CausalPositions` (M position slices)
        for a causal run.  Every output and checkpoint goes through it, so the run without a
        mask has no causal branches.
    atoms_component
        The atoms as a component (:mod:`meanfield.atoms.component`): :class:`NoAtoms` for a
        plain run, :class:`HybridAtoms` for a hybrid run (``[atoms]`` with ``capture`` or
        ``initial``; see :mod:`meanfield.atoms`).  Every step, output and checkpoint goes
        through it, so the plain run has no atom branches.
    atoms
        The atoms (replicated on every rank) of a hybrid run, ``None`` for a plain run.  The
        density then carries the mass the initial atoms leave (total mass 1); when they leave
        less than 1e-12 (masses summing to 1 up to round-off) it is zero and the run is all atoms.
    """

    run_type = "pde"

    def __init__(self, problem: Problem, comm) -> None:
        from ..collective import on_root
        from ..memory import check_memory, pde_estimate, ranks_on_node
        from ..mesh import MeshError

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
                            self._gather, None if self.raw is None else self.raw.cells)
        return HybridAtoms(self.scheme, coupling, spec.initial, lambda: bounds[self.field.index], events)

    @property
    def atoms(self) -> Atoms | None:
        """The atoms of a hybrid run (see the class docstring), ``None`` for a plain run."""
        return self.atoms_component.atoms

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
        """Refuse a model whose velocity on the initial density is not finite or would need more
        than :data:`~meanfield.config.MAX_STEPS` steps, for every layer, and a fixed ``time.dt``
        above the stability bound of the first step (bad input: nothing has been written yet).
        This costs one velocity evaluation per layer."""
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

    @property
    def evaluator(self) -> NonlocalEvaluator | None:
        """The active layer's attention evaluator (``None`` for a layer without attention)."""
        return self.field.evaluator

    # -- stepping ------------------------------------------------------------------------
    def next_landing(self, t: float) -> float | None:
        return self.schedule.next_boundary(t)

    def step(self, t_end: float) -> float:
        self.field.enter(self.schedule.index_from(self.t))
        state, dt = self.stepper.step(self.atoms_component.stepped_state(self.state), self.t, t_end - self.t)
        close = t_end - (self.t + dt) <= time_tol(t_end)
        t = t_end if close else self.t + dt
        self.state = self.atoms_component.after_step(state, self.t, t)
        self.t = t
        return dt

    def step_info(self) -> dict[str, Any]:
        return self.stepper.stats.to_dict()

    # -- observing -----------------------------------------------------------------------
    def observables(self) -> dict[str, float]:
        """The row of observables.csv; a causal run's are those of the whole token distribution
        (the mean of the positions' densities, mass 1)."""
        density = self.positions.whole(self.state)
        rho = self.scheme.cell_averages(density)
        self.field.enter(self.schedule.index_until(self.t))
        row = self._measure_observables(density)
        row.update(self.atoms_component.observables())
        row.update(self._extremes(rho))
        row["dt"] = self.stepper.stats.last_dt
        return row

    def distribution(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This rank's cells: cell averages of the density (a causal run's whole token distribution),
        centroids, areas."""
        g = self.scheme.geometry
        rho = self.scheme.cell_averages(self.positions.whole(self.state))
        return rho, g.centroid[: g.num_owned], g.measure[: g.num_owned]

    def _measure_observables(self, density: np.ndarray) -> dict[str, float]:
        """The field's observables of one density state (the scheme's), with the atoms (collective)."""
        points, weights = self.scheme.measure(density)
        return self.field.observables(points, weights, fixed_sources=True, extra=self.atoms_component.extra_sources())

    def _extremes(self, rho: np.ndarray) -> dict[str, float]:
        """``rho_min`` and ``rho_max`` of cell averages over all ranks (collective)."""
        from mpi4py import MPI

        return {"rho_min": self.comm.allreduce(float(rho.min(initial=np.inf)), op=MPI.MIN),
                "rho_max": self.comm.allreduce(float(rho.max(initial=-np.inf)), op=MPI.MAX)}

    def position_observables(self) -> dict[str, np.ndarray]:
        """A causal run's observables of each position slice: name -> (M,) values (the names of
        :meth:`observables` but ``dt`` and the ``[[output.observables]]``; collective).  Empty
        for a run without a mask."""
        return self.positions.by_position(self.state, self._slice_observables)

    def _slice_observables(self, part: np.ndarray) -> dict[str, float]:
        """The observables of one position slice's state (collective)."""
        self.field.enter(self.schedule.index_until(self.t))
        return {**self._measure_observables(part), **self._extremes(self.scheme.cell_averages(part))}

    def _gather(self, rows: np.ndarray) -> np.ndarray | None:
        return gather_rows(self.comm, rows, self.scheme.geometry.original_index, self.num_cells)

    def snapshot(self) -> dict[str, np.ndarray] | None:
        """``density`` (C,) and, DG1, ``vertex_density`` (C, nv); a causal run's are (M, C) and
        (M, C, nv), one row per position slice, with ``<observable>_by_position`` (M,) arrays
        (:meth:`position_observables`)."""
        arrays = self.positions.arrays(self.state, self._gather)
        arrays.update({f"{name}{BY_POSITION}": values for name, values in self.position_observables().items()})
        arrays.update(self.atoms_component.arrays())
        return {k: v for k, v in arrays.items() if v is not None} if self.comm.rank == 0 else None

    def static_arrays(self) -> dict[str, np.ndarray] | None:
        g = self.scheme.geometry
        centroids = self._gather(g.centroid[: g.num_owned])
        areas = self._gather(g.measure[: g.num_owned])
        jacobian = self.scheme.vertex_jacobian()
        vertex_jacobian = None if jacobian is None else self._gather(jacobian)
        if self.comm.rank != 0:
            return None
        assert self.raw is not None and centroids is not None and areas is not None
        out = {"sphere": np.array(self.problem.sphere), "vertices": self.raw.points, "cells": self.raw.cells,
               "centroids": centroids, "areas": areas}
        out.update(self.positions.static_arrays())
        if vertex_jacobian is not None:
            out["vertex_jacobian"] = vertex_jacobian
        return out

    # -- checkpoints -----------------------------------------------------------------------
    def checkpoint_state(self) -> dict[str, np.ndarray] | None:
        rows = self.state.reshape(self.scheme.geometry.num_owned, -1)
        state = self._gather(rows)
        if state is None:
            return None
        return {"state": state, **self.atoms_component.checkpoint_arrays()}

    def restore(self, t: float, state: dict[str, np.ndarray] | None, info: dict[str, Any]) -> None:
        from ..collective import on_root

        g = self.scheme.geometry
        expected = self.state.reshape(g.num_owned, -1).shape[1]

        def check() -> None:
            assert state is not None
            shape = state["state"].shape
            if shape[0] != self.num_cells or (shape[1] if len(shape) > 1 else 1) != expected:
                raise ValueError(f"checkpoint: its state has shape {shape}, but this {self.problem.scheme.kind} run on "
                                 f"{self.num_cells} cells needs ({self.num_cells}, {expected})")

        on_root(self.comm, check)
        rows = scatter_rows(self.comm, state["state"].reshape(self.num_cells, -1) if state is not None else None,
                            g.original_index)
        self.state = np.ascontiguousarray(rows.reshape(self.state.shape))
        self.atoms_component.restore(state, self.problem.d)
        self.t = t
        self.field.enter(self.schedule.index_until(t))
        self.stepper.stats = StepStats.from_dict(info.get("step", {}))

    # -- facts -----------------------------------------------------------------------------
    def describe(self) -> str:
        field = self.field.describe() if self.problem.velocity.is_attention else "rotation field"
        return (f"{self.problem.sphere} mesh, {self.num_cells} cells, scheme {self.scheme.name}, {field}"
                f"{self.positions.describe()}")

    def facts(self) -> dict[str, Any]:
        evaluator = self.field.evaluator
        return {"cells": self.num_cells, "scheme": self.scheme.name, **self.problem.mask.facts(),
                "evaluator": None if evaluator is None else evaluator.collective_diagnostics()}

    def timings(self) -> dict[str, float]:
        return {"velocity": self.velocity.seconds}

    def status(self) -> str:
        return self.atoms_component.status()

    def event_lines(self) -> list[str]:
        return self.atoms_component.event_lines()


def pde_handlers(problem: Problem) -> list[Handler]:
    """The handlers of a PDE run's output files (observables, snapshots, run.nc with ParaView files if asked)."""

    def run_file(run_dir: Path, static: Mapping[str, np.ndarray] | None) -> OutputWriter | None:
        return None if static is None else pde_run_file(run_dir, static, problem.config.data, problem.output.paraview)

    return [*user_observables(problem.output.trackers), *file_outputs(run_file)]


def build_simulation(config: Problem | Config | Mapping | str | Path | None, comm=None) -> PDESimulation:
    """The PDE simulation of a problem (or config) at t = 0 (collective; nothing is written)."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    return PDESimulation(resolve_problem(config, None, comm), comm)


def run(
    config: Problem | Config | Mapping | str | Path | None = None,
    *,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    overwrite: bool = False,
    callbacks: Sequence[Callback] = (),
) -> PDERunResult:
    """Run the PDE described by a config and return the run read back from its directory.

    Parameters
    ----------
    config
        A :class:`Config`, a mapping, a TOML path, ``None`` for the embedded default, or the
        run's :class:`~meanfield.problem.Problem` already built (a study's).
    out
        Run directory (default: ``output.dir`` or ``runs/<name>``); it must be missing, empty,
        or (with ``overwrite``) an earlier run.
    overrides
        ``section.key=value`` strings (only when ``config`` is not already a Config or Problem).
    comm
        MPI communicator (default COMM_WORLD).
    quiet
        No log to the terminal and no progress bar (the run log is still written).
    overwrite
        Replace an earlier run in ``out``; its files are kept until the new run has written
        its first checkpoint, and restored if the new run fails before that.
    callbacks
        Functions called on rank 0 at every output with a
        :class:`~meanfield.engine.callbacks.OutputState` (live plots, early stopping); one that
        returns ``False`` or raises :class:`meanfield.StopRun` ends the run after that output,
        with status ``completed`` and ``stopped_early`` in metadata.json.

    Raises
    ------
    ValueError
        Bad input (on every rank, before anything is written).
    RuntimeError
        A run-time failure (recorded in metadata.json).
    meanfield.engine.controller.RunInterrupted
        A signal or the wall limit stopped the run after a checkpoint.
    """
    from mpi4py import MPI

    from ..collective import everywhere

    comm = comm or MPI.COMM_WORLD
    problem = resolve_problem(config, overrides, comm)
    run_dir = Path(out) if out is not None else problem.output.directory
    check_new_target(run_dir, overwrite, comm)
    check_size(problem, comm)
    threads = configure_process(problem.field.threads)
    sim = PDESimulation(problem, comm)
    start_run(sim, problem, run_dir, pde_handlers(problem), overwrite=overwrite, quiet=quiet,
              facts={"threads": threads}, callbacks=callbacks)
    return everywhere(comm, lambda: load_pde_run(run_dir))
