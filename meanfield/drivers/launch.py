"""Starting and continuing a run: the steps around the controller shared by PDE and particle runs.

:func:`start_run` opens a new run directory (refusing unsafe targets, setting an overwritten
run aside until the first checkpoint), writes the config, metadata and static arrays, and
drives the simulation from t = 0.  :func:`continue_run` reopens a run directory, restores the
simulation from its checkpoint, cuts the output files back to that checkpoint and drives the
simulation on.  Both are collective; files are touched by rank 0 only.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..collective import on_root
from ..config import Config, load_config
from ..engine.callbacks import Callback
from ..engine.controller import Controller, ControllerOptions
from ..engine.handlers import Handler, run_handlers
from ..engine.progress import LogEvery, log, run_logging
from ..engine.simulation import Simulation
from ..problem import Problem
from ..rundir import layout
from ..rundir.checkpoint import Checkpoint, CheckpointError
from ..rundir.directory import RunDirectory, check_target
from ..rundir.environment import run_environment
from ..rundir.files import load_npz, save_npz, write_text
from ..rundir.names import run_name
from ..rundir.recovery import resume_point, set_aside_damaged
from ..threads import blas_libraries
from ..wording import counted

if TYPE_CHECKING:
    from ..memory import Estimate

#: Seconds of wall time from some fixed moment.
Clock = Callable[[], float]


def resolve_config(source: Config | Any, overrides: list[str] | None, comm) -> Config:
    """A validated :class:`Config`: read and checked on rank 0, the same object on every rank.

    Reading on rank 0 alone means a config file that only rank 0 can see still runs, and a
    bad one gives the same error on every rank.
    """
    if isinstance(source, Config):
        return source
    return on_root(comm, lambda: load_config(source, overrides))


def resolve_problem(source: Problem | Config | Any, overrides: list[str] | None, comm) -> Problem:
    """The run's :class:`Problem`, built once from the config of :func:`resolve_config` (on every
    rank, from the same config: a bad one gives the same error everywhere); a Problem is the
    run's already (``overrides`` then do not apply)."""
    if isinstance(source, Problem):
        return source
    return Problem(resolve_config(source, overrides, comm))


def recorded_config(config: Config) -> Config:
    """The config as a run directory records it: a ``[model.random]`` schedule names the run's own
    weights file (``model.random.weights = "weights.npz"``, beside config.toml), so that a rerun
    or a resume of the directory reads the weights back instead of drawing them."""
    if config.data["model"]["random"] is None:
        return config
    data = copy.deepcopy(config.data)
    data["model"]["random"]["weights"] = layout.WEIGHTS
    return Config(data, config.source)


def configure_process(threads: int | None) -> int:
    """Threads per rank (``[nonlocal] threads``, else ``MEANFIELD_NUM_THREADS``, else 1) and an
    allocator that keeps freed memory; call once before building a simulation.  Returns the
    thread count (recorded in metadata.json)."""
    from ..threads import configure_threads, retain_freed_memory

    count = configure_threads(threads)
    retain_freed_memory()
    return count


def check_new_target(run_dir: Path, overwrite: bool, comm) -> None:
    """Refuse an unsafe run directory before any expensive work (collective, rank 0 looks)."""
    on_root(comm, lambda: check_target(run_dir, overwrite=overwrite))


def run_estimate(problem: Any, ranks: int, tokens: int | None = None) -> Estimate | None:
    """The memory estimate of a run on ``ranks`` ranks (:mod:`meanfield.memory`): ``tokens``, a
    particle run of that many tokens (a batch of prompts: the batched engine's peak), else a PDE
    run (``None`` on a mesh file)."""
    from ..memory import batch_estimate, problem_estimate

    p = problem.particles
    if tokens is None or p.prompts == 1:
        return problem_estimate(problem, ranks, tokens)
    from ..particles.prompts import prompt_memory

    return batch_estimate(prompt_memory(problem, ranks)[1], p.prompts, p.n, ranks)


def check_size(problem: Any, comm, tokens: int | None = None) -> None:
    """Refuse a run bigger than this node's available memory before anything is built (collective;
    :func:`run_estimate`)."""
    from ..memory import check_memory, ranks_on_node

    here = ranks_on_node(comm)
    on_root(comm, lambda: check_memory(run_estimate(problem, comm.size, tokens), here))


def _segment(command: str, t_start: float, environment: dict[str, Any]) -> dict[str, Any]:
    return {"command": command, "started": environment["started"], "ranks": environment["ranks"],
            "host": environment["host"], "t_start": t_start}


def start_run(sim: Simulation, problem: Problem, run_dir: Path, outputs: Sequence[Handler], *, overwrite: bool = False,
              quiet: bool = False, facts: dict[str, Any] | None = None, clock: Clock = time.perf_counter,
              callbacks: Sequence[Callback] = ()) -> None:
    """Run ``sim`` from its initial state into a new run directory (collective).

    Parameters
    ----------
    sim
        The simulation at t = 0.
    problem
        The problem ``sim`` solves (its config is written to config.toml).
    run_dir
        The run directory (refused unless missing, empty, or a run with ``overwrite``).
    outputs
        The handlers of the driver's output files (:func:`~meanfield.engine.handlers.file_outputs`).
    facts
        Extra metadata entries (solver facts known at start).
    clock
        The controller's wall clock (:class:`~meanfield.engine.controller.ControllerOptions`).
    callbacks
        Called on rank 0 at every output (:mod:`meanfield.engine.callbacks`).
    """
    comm, config = sim.comm, problem.config
    handlers = run_handlers(outputs, checkpoint_every=problem.output.checkpoint_every, callbacks=callbacks)
    environment = run_environment(comm)
    static = sim.static_arrays()
    facts = {**(facts or {}), **sim.facts(), "blas": blas_libraries()}  # the threads each BLAS really uses
    drawn = problem.random_weights() if comm.rank == 0 else None  # before an overwritten run is set aside

    def prepare() -> RunDirectory:
        rundir = RunDirectory.create(run_dir, overwrite=overwrite)
        try:
            if drawn is not None:
                save_npz(run_dir / layout.WEIGHTS, **drawn.arrays())
            write_text(run_dir / layout.CONFIG, recorded_config(config).to_toml())
            if static is not None:
                save_npz(run_dir / layout.MESH, **static)
            for handler in handlers:
                handler.start(run_dir, static, 0)
            rundir.update_metadata(kind=sim.run_type, name=run_name(run_dir), status="running", error=None,
                                   config_source=config.source, **environment, **facts,
                                   segments=[_segment("run", 0.0, environment)])
        except BaseException:
            rundir.rollback()
            rundir.close()
            raise
        return rundir

    _drive(sim, problem, run_dir, on_root(comm, prepare, broadcast=False), handlers, 0, quiet, clock)


def continue_run(sim: Simulation, problem: Problem, run_dir: Path, checkpoint_header: dict[str, Any],
                 outputs: Sequence[Handler], *, command: str = "resume", quiet: bool = False,
                 note: dict[str, Any] | None = None, rebuild_metadata: bool = False,
                 clock: Clock = time.perf_counter, callbacks: Sequence[Callback] = ()) -> None:
    """Continue a run from its checkpoint (collective); ``sim`` solves ``problem``.

    Parameters
    ----------
    problem
        The problem ``sim`` solves (its config is written to config.toml).
    checkpoint_header
        ``t`` and ``next_output`` of the checkpoint (read on rank 0 and broadcast).
    outputs
        The handlers of the driver's output files (:func:`~meanfield.engine.handlers.file_outputs`).
    command
        Recorded in the run's list of segments (``"resume"``).
    note
        More facts for the segment's record (the new end time, overrides).
    rebuild_metadata
        The run's metadata.json is missing: write a new one (the run is recognised by its files).
    clock
        The controller's wall clock (:class:`~meanfield.engine.controller.ControllerOptions`).
    callbacks
        Called on rank 0 at every output (:mod:`meanfield.engine.callbacks`).
    """
    comm, config = sim.comm, problem.config
    handlers = run_handlers(outputs, checkpoint_every=problem.output.checkpoint_every, callbacks=callbacks)
    environment = run_environment(comm)

    def reopen() -> tuple[RunDirectory, Checkpoint, str | None]:
        rundir = RunDirectory.open_existing(run_dir, run_type=sim.run_type if rebuild_metadata else None)
        try:
            point = resume_point(run_dir, sim.run_type, problem.time.output_times)
            checkpoint = point.checkpoint
            if (checkpoint.t, checkpoint.next_output) != (checkpoint_header["t"], checkpoint_header["next_output"]):
                raise CheckpointError(f"{run_dir}: its checkpoint changed since the resume was planned; resume again")
            recovery = point.note(run_dir)
            if recovery is not None:
                recovery += set_aside_damaged(run_dir)
            static = load_npz(run_dir / layout.MESH) if (run_dir / layout.MESH).is_file() else None
            for handler in handlers:
                handler.start(run_dir, static, checkpoint.next_output)
            write_text(run_dir / layout.CONFIG, recorded_config(config).to_toml())
            segment = {**_segment(command, checkpoint.t, environment), **(note or {}), "blas": blas_libraries()}
            if recovery is not None:
                segment.update(resumed_from=point.source, recovery=recovery)
            segments = list(rundir.metadata.get("segments", [])) + [segment]
            rundir.update_metadata(name=run_name(run_dir), status="running", error=None, interrupted_by=None,
                                   stopped_early=None, segments=segments,
                                   **{k: v for k, v in environment.items() if k != "started"})
        except BaseException:
            rundir.close()
            raise
        return rundir, checkpoint, recovery

    opened = on_root(comm, reopen, broadcast=False)  # rank 0's directory, checkpoint, recovery note

    def shared() -> tuple[dict[str, Any], str | None]:
        assert opened is not None  # rank 0, where reopen() returned
        return opened[1].info, opened[2]

    info, recovery = on_root(comm, shared)
    sim.restore(float(checkpoint_header["t"]), opened[1].state if opened is not None else None, info)
    _drive(sim, problem, run_dir, opened[0] if opened is not None else None, handlers,
           int(checkpoint_header["next_output"]), quiet, clock, recovery)


def _drive(sim: Simulation, problem: Problem, run_dir: Path, rundir: RunDirectory | None, handlers: list[Handler],
           next_output: int, quiet: bool, clock: Clock, warning: str | None = None) -> None:
    """The controller's run (collective); ``rundir``: rank 0's run directory (None elsewhere)."""
    problem_time = problem.time.output_times
    options = ControllerOptions(problem.time.wall_limit, quiet, clock, LogEvery.parse(problem.output.log_every))
    try:
        with run_logging(sim.comm, quiet, run_dir / layout.LOG if sim.comm.rank == 0 else None):
            log.info("%s: %s; %s; t = %.6g -> %.6g", run_name(run_dir), sim.describe(), counted(sim.comm.size, "rank"),
                     sim.t, problem_time[-1])
            if warning is not None:
                log.warning("%s", warning)
            Controller(sim, run_dir, rundir, handlers, problem_time, options).run(next_output)
    finally:
        if rundir is not None:
            rundir.close()
