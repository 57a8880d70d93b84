"""The whole convergence study behind ``meanfield convergence``: run a ladder, write its files."""

from __future__ import annotations

from pathlib import Path

from ...collective import on_root
from ...config import Config
from ...drivers.launch import check_size, resolve_problem
from ...problem import Problem
from ...rundir.study_directory import prepare_study
from .errors import Row, check_reference, error_rows
from .ladder import AXES, ConvergenceError, ladder_configs, ladder_problems, run_ladder
from .plots import plot, study_title
from .table import write_csv


def convergence_study(
    config: Problem | Config | str | Path | None,
    levels: list[int],
    out: str | Path,
    *,
    reference: str | Path = "exact",
    axis: str = "mesh",
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = True,
    overwrite: bool = False,
) -> list[Row]:
    """Run a ladder and write convergence.csv and convergence.png into ``out`` (collective).

    Parameters
    ----------
    config
        The case (a Config, a TOML path, ``None`` for the default, or its Problem).
    levels
        Ladder levels (S^2: icosphere levels; S^1: 2**level cells; dt ladder: dt / 2**level;
        slices ladder: the slice counts M).
    out
        Directory of the runs and the study's files.
    reference
        ``"exact"``, ``"finest"`` or a run directory.
    axis
        What the ladder refines: ``"mesh"``, ``"dt"`` (halves the fixed ``time.dt``) or
        ``"slices"`` (a causal run's ``positions.slices``).
    comm
        Communicator of the runs (default COMM_WORLD).
    overwrite
        Redo a study already in ``out`` (its runs are replaced).

    Returns
    -------
    list[Row]
        The rows of convergence.csv, on every rank.
    """
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    problem = resolve_problem(config, overrides, comm)
    out = Path(out)

    def check_inputs() -> list[Config]:  # everything a level would refuse, before the study directory is made
        if axis not in AXES:
            raise ConvergenceError(f"axis: must be one of {AXES}, got {axis!r}")
        check_reference(problem, reference, axis)
        return ladder_configs(problem, levels, axis)

    problems = ladder_problems(problem, levels, axis, on_root(comm, check_inputs, ConvergenceError))
    check_size(problems[-1], comm)  # the finest level's size
    on_root(comm, lambda: prepare_study(out, "convergence", overwrite=overwrite))
    ladder = run_ladder(problem, levels, out, axis, comm, quiet, overwrite, problems)

    def report() -> list[Row]:
        rows = error_rows(ladder, reference)
        write_csv(rows, out / "convergence.csv")
        plot(rows, out / "convergence.png", axis, study_title(problem.name, problem.scheme.kind, reference, axis))
        return rows

    return on_root(comm, report, ConvergenceError)
