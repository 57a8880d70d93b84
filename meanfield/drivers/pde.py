"""The PDE run: the discrete PDE (:mod:`meanfield.discrete_pde`) as a simulation the run controller drives.

:func:`run` is the entry point behind ``meanfield run``.  Everything that can be checked
cheaply (config, target directory, mesh file, initial data) is checked before anything is
written, so bad input leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Config
from ..discrete_pde import DiscretePDE
from ..discretisation.ordering import scatter_rows
from ..engine.callbacks import Callback
from ..engine.handlers import Handler, file_outputs, own_observable_columns
from ..engine.simulation import Simulation
from ..problem import Problem
from ..rundir.layout import BY_POSITION
from ..rundir.results import PDERunResult, load_pde_run
from ..rundir.writers import OutputWriter, pde_run_file
from ..timestepping import StepStats
from .launch import check_new_target, check_size, configure_process, resolve_problem, start_run


class PDESimulation(DiscretePDE, Simulation):
    """The discrete PDE as the run controller drives it (see :class:`Simulation`): the
    :class:`~meanfield.discrete_pde.DiscretePDE` of a problem (its state, steps, layer landings
    and parts) with the controller's outputs, snapshots, checkpoints and facts.  Every output and
    checkpoint goes through its positions and atoms components, so the run without a mask or
    atoms has no causal or atom branches.

    Parameters
    ----------
    problem
        The resolved problem.
    comm
        MPI communicator.
    """

    run_type = "pde"

    # -- stepping ------------------------------------------------------------------------
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
        return self.cell_averages(self.state), *self.owned_cells()

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

    def snapshot(self) -> dict[str, np.ndarray] | None:
        """``density`` (C,) and, DG1, ``vertex_density`` (C, nv); a causal run's are (M, C) and
        (M, C, nv), one row per position slice, with ``<observable>_by_position`` (M,) arrays
        (:meth:`position_observables`)."""
        arrays = self.positions.arrays(self.state, self.gather)
        arrays.update({f"{name}{BY_POSITION}": values for name, values in self.position_observables().items()})
        arrays.update(self.atoms_component.arrays())
        return {k: v for k, v in arrays.items() if v is not None} if self.comm.rank == 0 else None

    def static_arrays(self) -> dict[str, np.ndarray] | None:
        return self.mesh_arrays()

    # -- checkpoints -----------------------------------------------------------------------
    def checkpoint_state(self) -> dict[str, np.ndarray] | None:
        rows = self.state.reshape(self.scheme.geometry.num_owned, -1)
        state = self.gather(rows)
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

    return [*own_observable_columns(problem.output.own_observables), *file_outputs(run_file)]


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
