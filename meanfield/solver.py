"""The PDE run driver: config -> mesh, scheme, field, time loop -> run directory.

:func:`run` is the real entry point behind ``meanfield run``.  Everything that can be checked
cheaply (config, mesh file, initial data) is checked before the run directory is created,
so a bad input leaves nothing behind; a run that blows up records what it had written and
its failure in metadata.json, then raises.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from .config import Config, load_config
from .discretisation.base import SpatialScheme, VelocityField
from .discretisation.dg1 import DG1Scheme
from .discretisation.fv import FiniteVolumeScheme
from .io import DensityWriter, RunDirectory, RunResult, gather_global, load_run, run_environment
from .mesh import load_distributed
from .model import rotation_velocity
from .nonlocal_field import NonlocalEvaluator, make_evaluator
from .observables import measure_observables
from .reporting import log, progress_bar, run_logging
from .timestepping import SSPRK3

SCHEMES: dict[str, type[SpatialScheme]] = {"fv": FiniteVolumeScheme, "dg1": DG1Scheme}


def attention_velocity(evaluator: NonlocalEvaluator) -> VelocityField:
    """The attention field of the scheme's source measure at the scheme's targets.

    Schemes pass the same, unchanged target and source arrays at every call (only the
    weights change), so evaluators may cache what they derive from the points.
    """

    def velocity(targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return evaluator.velocity(targets, sources, weights, fixed_sources=True, fixed_targets=True)

    return velocity


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


@dataclass
class Simulation:
    """Everything a PDE run is made of, built from a config (no files written)."""

    config: Config
    comm: object
    msh: object
    evaluator: NonlocalEvaluator
    scheme: SpatialScheme
    stepper: SSPRK3
    state: np.ndarray
    num_cells: int
    velocity: TimedVelocity


def build_simulation(config: Config, comm=None) -> Simulation:
    """Build mesh, field, scheme and initial state; raises on bad input before any I/O."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    mesh = config.section("mesh")
    msh = load_distributed(comm, mesh["sphere"], mesh["resolution"], mesh["file"])
    model = config.model()
    nl = config.section("nonlocal")
    evaluator = make_evaluator(model, comm, nl["method"], nl["tol"])
    m = config.section("model")
    velocity = TimedVelocity(
        rotation_velocity(m["rotation_rate"], m["rotation_axis"], config.d)
        if m["velocity"] == "rotation" else attention_velocity(evaluator)
    )
    options = config.section("scheme")
    cls = SCHEMES[options["kind"]]
    scheme = cls(msh, velocity, **{key: options[key] for key in cls.options})
    state = scheme.initial_state(config.initial_density())
    t = config.section("time")
    stepper = SSPRK3(scheme, t["cfl"], t["dt"], t["dt_max"])
    num_cells = msh.topology.index_map(msh.topology.dim).size_global
    return Simulation(config, comm, msh, evaluator, scheme, stepper, state, num_cells, velocity)


def run(
    config: Config | Mapping | str | Path | None = None,
    *,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
) -> RunResult:
    """Run the PDE described by a config and return the run read back from its directory.

    Parameters
    ----------
    config
        A :class:`Config`, a mapping, a TOML path, or ``None`` for the embedded default.
    out
        Run directory (default: ``output.dir`` or ``runs/<name>``).
    overrides
        ``section.key=value`` strings (only when ``config`` is not already a Config).
    comm
        MPI communicator (default COMM_WORLD).
    quiet
        No log to the terminal and no progress bar (the run log is still written).
    """
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    if not isinstance(config, Config):
        config = load_config(config, overrides)
    wall0 = time.perf_counter()
    sim = build_simulation(config, comm)
    setup_time = time.perf_counter() - wall0
    path = Path(out) if out is not None else config.output_dir()
    rundir = RunDirectory(comm, path)
    rundir.create(config.to_toml())
    with run_logging(comm, quiet, path / "run.log"):
        return _time_loop(sim, rundir, quiet, setup_time, wall0)


def _time_loop(sim: Simulation, rundir: RunDirectory, quiet: bool, setup_time: float, wall0: float) -> RunResult:
    comm, scheme, stepper, config = sim.comm, sim.scheme, sim.stepper, sim.config
    g = scheme.geometry
    rundir.update_metadata(
        name=config.name, status="running", config_source=config.source, **run_environment(comm),
        cells=sim.num_cells, scheme=scheme.name, evaluator=sim.evaluator.collective_diagnostics(),
    )
    centroids = gather_global(comm, g.centroid[: g.num_owned], g.original_index, sim.num_cells)
    areas = gather_global(comm, g.measure[: g.num_owned], g.original_index, sim.num_cells)
    rundir.write_arrays("mesh.npz", sphere=np.array(config.section("mesh")["sphere"]), centroids=centroids, areas=areas)
    log.info("%s: %s mesh, %d cells, %d rank(s), scheme %s, %s field",
             config.name, config.section("mesh")["sphere"], sim.num_cells, comm.size, scheme.name,
             sim.evaluator.name if config.section("model")["velocity"] == "attention" else "rotation")
    writer = DensityWriter(comm, rundir.path, scheme.output_function(sim.state)) if config.section("output")["xdmf"] else None
    timings = {"setup": setup_time, "time_stepping": 0.0, "output": 0.0}
    times = config.output_times()
    state, t = sim.state, 0.0
    bar = progress_bar(comm, float(times[-1]), quiet)
    status, error = "failed", None
    try:
        for k, t_out in enumerate(times):
            tic = time.perf_counter()
            state = stepper.advance(state, t, float(t_out), on_step=lambda tn, dt: bar.update(tn - bar.n))
            t = float(t_out)
            timings["time_stepping"] += time.perf_counter() - tic
            timings["velocity"] = sim.velocity.seconds
            timings["transport"] = timings["time_stepping"] - sim.velocity.seconds
            tic = time.perf_counter()
            _write_output(sim, rundir, writer, state, k, t, wall0)
            timings["output"] += time.perf_counter() - tic
            rundir.update_metadata(timings=timings, steps=vars(stepper.stats), last_output_time=t)
        status = "completed"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.error("run stopped at t = %.6g: %s", t, error)
        raise
    finally:
        bar.close()
        if writer is not None:
            writer.close()
        timings["total"] = time.perf_counter() - wall0
        rundir.update_metadata(status=status, error=error, timings=timings, steps=vars(stepper.stats),
                               evaluator=sim.evaluator.collective_diagnostics())
        log.info("%s %s in %.1f s (%d steps); results in %s", config.name, status, timings["total"],
                 stepper.stats.steps, rundir.path)
    comm.barrier()
    return load_run(rundir.path)


def _write_output(sim: Simulation, rundir: RunDirectory, writer, state: np.ndarray, k: int, t: float, wall0: float) -> None:
    scheme, comm = sim.scheme, sim.comm
    g = scheme.geometry
    rho = scheme.cell_averages(state)
    points, weights = scheme.measure(state)
    from mpi4py import MPI

    row = {"t": t}
    row.update(measure_observables(sim.evaluator, points, weights, fixed_sources=True))
    row["rho_min"] = comm.allreduce(float(rho.min(initial=np.inf)), op=MPI.MIN)
    row["rho_max"] = comm.allreduce(float(rho.max(initial=-np.inf)), op=MPI.MAX)
    row["dt"] = sim.stepper.stats.last_dt
    row["wall"] = time.perf_counter() - wall0
    rundir.append_observables(row)
    density = gather_global(comm, rho, g.original_index, sim.num_cells)
    rundir.write_arrays(f"snapshots/{k:04d}.npz", t=np.array(t), density=density)
    if writer is not None:
        scheme.output_function(state)
        writer.write(t)
    log.info("t = %-8.4g mass = %.15f  rho in [%.3e, %.3e]  E = %.10g  |mean| = %.4f",
             t, row["mass"], row["rho_min"], row["rho_max"], row["energy"], row["order"])
