"""Parameter sweeps (``meanfield sweep``): one run per point of a grid of config values.

A sweep takes a config, a grid (``key -> values``; the points are the Cartesian product, the
first key slowest) and optionally seeds (particle sweeps: ``particles.seed + k``, k < seeds,
varied fastest) or draws (configs of ``[model.random]``: ``model.random.seed + k``, k < draws, an
ensemble of weight draws, PDE or particles, for ``meanfield collect --ensemble``), and writes into its directory::

    study.json                      the sweep's definition (base config, grid): a rerun or a
                                    job-array task must bring the same one
    sweep.csv                       index, the grid's keys, directory, status (one row per point)
    .sweep.lock                     taken while sweep.csv is rewritten
    003-beta=4,particles.seed=1/    point 3's run directory (its index, then key=value for each
                                    grid key: the last part of the key unless that is ambiguous,
                                    a seed with what it seeds)

A sweep is extended by running it again with more values of its grid keys (the same keys,
every earlier value still there): its points keep their numbers and directories, completed
ones included, and the new combinations are numbered on after them, pending.  study.json then
lists the grid of every extension (``grids``) besides the whole grid.

Every point is an ordinary run directory (:mod:`meanfield.rundir.layout`); the grid, its points
and their names are :mod:`meanfield.studies.grid`.  Running a sweep again skips its completed
points, resumes the interrupted, killed or failed ones from their checkpoints
(:func:`meanfield.resume`) and starts the others; a point whose run is in progress elsewhere
(its lock is held) is left alone.  ``array_index`` runs exactly one point: a SLURM
job array runs a sweep with one task per point, all sharing the directory (sweep.csv is
rewritten under a lock after each point).  Under ``mpirun`` every point uses all ranks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..collective import is_collective, on_root
from ..config import Config, ConfigError, load_config
from ..drivers.launch import check_size
from ..engine.controller import RunInterrupted
from ..problem import Problem, output_times
from ..rundir.checkpoint import CheckpointError
from ..rundir.directory import RunDirectoryError, classify, effective_status, read_metadata
from ..rundir.files import exclusive_lock, write_text
from ..rundir.layout import CONFIG
from ..rundir.recovery import resume_point
from ..rundir.study_directory import check_study, extend_study, prepare_study, study_definition
from ..rundir.sweeps import KIND, SweepPoint, cell_value, definition_points, plan_points
from .grid import extended_definition, parse_grid

TABLE = "sweep.csv"
#: Serialises the rewrites of sweep.csv by the processes of one sweep (job-array tasks).
TABLE_LOCK = ".sweep.lock"
SEED_KEY = "particles.seed"
DRAW_KEY = "model.random.seed"


@dataclass
class SweepResult:
    """What a sweep call did.

    Attributes
    ----------
    path
        The sweep directory.
    points
        All points of the sweep.
    status
        Each point's status after the call: ``pending`` (no run yet), ``completed``,
        ``running``, ``interrupted``, ``failed`` or ``killed``.
    ran
        Indices of the points this call ran or resumed.
    errors
        Index -> error of the points that failed in this call.
    """

    path: Path
    points: list[SweepPoint]
    status: list[str]
    ran: list[int] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)

    def table(self) -> list[dict[str, Any]]:
        """The rows of sweep.csv."""
        return [{"index": p.index, **{k: cell_value(v) for k, v in p.parameters.items()}, "directory": p.directory,
                 "status": s} for p, s in zip(self.points, self.status)]


def _definition(base: Config, grid: Mapping[str, Sequence[Any]], particles: bool) -> dict[str, Any]:
    return {"config": base.data, "grid": {k: list(v) for k, v in grid.items()},
            "runs": "particles" if particles else "pde"}


@dataclass(frozen=True)
class _Plan:
    path: Path
    points: list[SweepPoint]
    configs: dict[int, Config]
    definition: dict[str, Any]
    #: The stored definition this call extends with new grid values (study.json is rewritten).
    extends: dict[str, Any] | None = None


def _counted_keys(grid: dict[str, Any], option: str, count: int | None, key: str, first: int) -> None:
    """``grid[key] = first, first + 1, ...`` (``count`` values) for ``--seeds`` / ``--draws``."""
    if count is None:
        return
    if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
        raise ConfigError(f"{option}: must be a positive integer, got {count!r}")
    if key in grid:
        raise ConfigError(f"{option}: the grid already varies {key}")
    grid[key] = list(range(first, first + count))


def _plan(config: Config | Mapping | str | Path | None, grid: Mapping[str, Sequence[Any]], seeds: int | None,
          particles: bool, out: str | Path | None, overrides: list[str], array_index: int | None,
          draws: int | None = None) -> _Plan:
    """Check everything a sweep needs and resolve every point's config (rank 0; nothing written)."""
    from ..rundir.names import derived_directory

    source = config.data if isinstance(config, Config) else config
    base = load_config(source, overrides)
    problem = Problem(base)
    grid = {k: list(v) for k, v in grid.items()}
    if seeds is not None and not particles:
        raise ConfigError("--seeds: PDE runs are deterministic; seeds vary particle sweeps (--particles)")
    _counted_keys(grid, "--seeds", seeds, SEED_KEY, problem.particles.seed)
    if draws is not None and problem.random is None:
        raise ConfigError("--draws: draws vary model.random.seed; the config has no [model.random]")
    _counted_keys(grid, "--draws", draws, DRAW_KEY, 0 if problem.random is None else problem.random.seed)
    if not grid:
        raise ConfigError("--grid: a sweep needs at least one --grid KEY=V1,V2,... (or --seeds N, --draws N)")
    for key, values in grid.items():
        if not values:
            raise ConfigError(f"--grid {key}: no values")
    path = Path(out) if out is not None else derived_directory(problem.output.directory, "sweep")
    definition = _definition(base, grid, particles)
    stored = study_definition(path, KIND)
    extended = extended_definition(stored, definition) if stored is not None else None
    extends = stored if extended is not None and extended != stored else None
    if extended is not None:
        definition = extended
    points = definition_points(definition) if extended is not None else plan_points(grid)
    if array_index is not None and not 0 <= array_index < len(points):
        raise ConfigError(f"--array-index: {array_index} is not a point of this sweep (0 to {len(points) - 1})")
    chosen = points if array_index is None else [points[array_index]]
    configs = {point.index: _point_config(source, overrides, point, particles) for point in chosen}
    check_study(path, KIND, definition=extends or definition)
    for point in chosen:
        if point_status(path / point.directory) == "foreign":
            raise RunDirectoryError(f"{path / point.directory}: the sweep point's directory holds something else "
                                    "than a meanfield run; move it away (nothing was written)")
    return _Plan(path, points, configs, definition, extends)


def point_configs(config: Config | Mapping | str | Path | None, grid: Mapping[str, Sequence[Any]], *,
                  seeds: int | None = None, draws: int | None = None, particles: bool = False,
                  out: str | Path | None = None, overrides: list[str] | None = None) -> list[Config]:
    """Every point's config of the sweep :func:`sweep` would run, checked as it checks them
    (``meanfield check sweep``); nothing is written."""
    plan = _plan(config, grid, seeds, particles, out, list(overrides or []), None, draws)
    return [plan.configs[point.index] for point in plan.points]


def _point_config(source: Any, overrides: list[str], point: SweepPoint, particles: bool) -> Config:
    try:
        config = load_config(source, overrides + point.overrides)
        if particles:
            from ..drivers.particles import resolve_counts

            resolve_counts(config, None, None)
    except ConfigError as exc:
        raise ConfigError(f"sweep point {point.directory}: {exc}") from None
    return config


def point_status(path: Path) -> str:
    """``pending`` (no run yet), ``foreign`` (something else is there) or the run's status
    (``killed`` for a run whose process is gone)."""
    found = classify(path)
    if found in ("missing", "empty"):
        return "pending"
    if found != "run":
        return "foreign"
    return effective_status(path, read_metadata(path) or {})


def _resumable(path: Path) -> bool:
    try:
        run_type = (read_metadata(path) or {}).get("kind", "pde")
        resume_point(path, run_type, output_times(load_config(path / CONFIG).data["time"]))
    except (CheckpointError, ValueError, OSError):
        return False
    return True


def _next_step(path: Path, overwrite: bool = False) -> str:
    """What to do with a point: ``skip``, ``resume``, ``restart`` (a run without checkpoint, or
    any run when ``overwrite``) or ``start``."""
    status = point_status(path)
    if status == "running":
        return "skip"
    if status == "pending":
        return "start"
    if overwrite:
        return "restart"
    if status == "completed":
        return "skip"
    return "resume" if _resumable(path) else "restart"


def _statuses(plan: _Plan) -> list[str]:
    return [point_status(plan.path / p.directory) for p in plan.points]


def _write_table(plan: _Plan) -> list[str]:
    """Rewrite sweep.csv from the points' run directories (under the sweep's lock); returns the statuses."""
    import pandas as pd

    with exclusive_lock(plan.path / TABLE_LOCK):
        status = _statuses(plan)
        rows = SweepResult(plan.path, plan.points, status).table()
        write_text(plan.path / TABLE, pd.DataFrame(rows).to_csv(index=False))
    return status


def _point_problem(point: SweepPoint, config: Config) -> Problem:
    """The problem of a sweep point's run, built once (on every rank, before anything is written)."""
    try:
        return Problem(config)
    except ConfigError as exc:
        raise ConfigError(f"sweep point {point.directory}: {exc}") from None


def _run_point(plan: _Plan, point: SweepPoint, problem: Problem, step: str, particles: bool, comm,
               quiet: bool) -> None:
    path = plan.path / point.directory
    if step == "resume":
        from ..drivers.resume import resume

        resume(path, comm=comm, quiet=quiet)
        return
    if particles:
        from ..drivers.particles import run_particles

        run_particles(problem, out=path, comm=comm, quiet=quiet, overwrite=step == "restart")
    else:
        from ..drivers.pde import run

        run(problem, out=path, comm=comm, quiet=quiet, overwrite=step == "restart")


def sweep(
    config: Config | Mapping | str | Path | None,
    grid: Mapping[str, Sequence[Any]] | Sequence[str],
    *,
    seeds: int | None = None,
    draws: int | None = None,
    particles: bool = False,
    out: str | Path | None = None,
    array_index: int | None = None,
    dry_run: bool = False,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = False,
    overwrite: bool = False,
) -> SweepResult:
    """Run the points of a sweep that are not done yet (see the module docstring); collective.

    Parameters
    ----------
    config
        The base config (a Config, a mapping, a TOML path, or ``None`` for the default).
    grid
        ``{"model.beta": [1, 4, 9], ...}`` or ``["model.beta=1,4,9", ...]`` (``--grid``).
    seeds
        Particle sweeps: also vary ``particles.seed`` over ``seed, seed + 1, ...`` (this many).
    draws
        Configs of ``[model.random]``: also vary ``model.random.seed`` over ``seed, seed + 1, ...``
        (this many weight draws; varied fastest, after the seeds).
    particles
        Run the particle system (``particles.n`` tokens) instead of the PDE at every point.
    out
        The sweep directory (default ``runs/<name>-sweep``).
    array_index
        Run only this point (a job-array task; the CLI's default is ``$SLURM_ARRAY_TASK_ID``).
    dry_run
        List the points and their statuses; run and write nothing.
    overrides
        ``section.key=value`` changes of the base config (``--set``).
    comm
        MPI communicator (default COMM_WORLD); each point runs on all its ranks.
    quiet
        No progress or log of the runs on the terminal.
    overwrite
        Run every point again from t = 0, completed ones too (each earlier run is kept until its
        replacement's first checkpoint); points running elsewhere are still left alone.

    Returns
    -------
    SweepResult
        On every rank.  A point that fails is recorded (``errors``, sweep.csv) and the sweep
        goes on; a signal or wall limit (:class:`~meanfield.engine.controller.RunInterrupted`)
        ends it after sweep.csv is written.

    Raises
    ------
    ValueError
        Bad input, before anything is written: an unknown key or bad value at any point, an
        array index outside the sweep, a directory that holds something else.
    """
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    specs = grid if isinstance(grid, Mapping) else parse_grid(list(grid))
    plan = on_root(comm, lambda: _plan(config, specs, seeds, particles, out, list(overrides or []), array_index,
                                           draws))
    if dry_run:
        return SweepResult(plan.path, plan.points, on_root(comm, lambda: _statuses(plan)))

    problems = {point.index: _point_problem(point, plan.configs[point.index]) for point in plan.points
                if point.index in plan.configs}
    for problem in problems.values():  # a point bigger than the machine, before anything is written
        check_size(problem, comm, problem.particles.n if particles else None)
    if plan.extends is not None:
        on_root(comm, lambda: extend_study(plan.path, plan.definition))
    on_root(comm, lambda: prepare_study(plan.path, KIND, definition=plan.definition))
    ran: list[int] = []
    errors: dict[int, str] = {}
    for point in plan.points if array_index is None else [plan.points[array_index]]:
        step = on_root(comm, functools.partial(_next_step, plan.path / point.directory, overwrite))
        if step == "skip":
            continue
        ran.append(point.index)
        try:
            _run_point(plan, point, problems[point.index], step, particles, comm, quiet)
        except RunInterrupted:
            on_root(comm, lambda: _write_table(plan))
            raise
        except Exception as exc:
            if comm.size > 1 and not is_collective(exc):
                raise  # possibly this rank's alone: the CLI ends the job
            errors[point.index] = f"{type(exc).__name__}: {exc}"
        on_root(comm, lambda: _write_table(plan))
    status = on_root(comm, lambda: _write_table(plan))
    return SweepResult(plan.path, plan.points, status, ran, errors)
