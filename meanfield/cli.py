"""Command line: parses arguments and calls the Python API, nothing more.

    meanfield run [CONFIG] [--out DIR] [--overwrite] [--set section.key=value ...] [--quiet]
    meanfield resume RUN_DIR [--t-final T] [--set section.key=value ...] [--quiet]
    meanfield particles CONFIG --n N [--seed S] [--out DIR] [--overwrite] [--set ...] [--quiet]
    meanfield validate CONFIG --n 1000,4000 [--seeds 4] [--out DIR] [--pde RUN_DIR [--force]] [--overwrite] [--quiet]
    meanfield response CONFIG --observable [NAME=]EXPR [--observable ...] --at T1,T2,... [--wrt model.beta ...]
                       [--out DIR] [--set ...] [--overwrite] [--quiet]
    meanfield response CONFIG --retrieval --at T1,... [--modes 1,2,3] [--codewords M]
                       [--observable PSI --source PHI ...] [--out DIR] [--set ...] [--overwrite] [--quiet]
    meanfield convergence CONFIG --levels 3:6 [--dt-ladder] [--reference exact|finest|RUN_DIR] [--out DIR]
    meanfield convergence CONFIG --slices 8,16,32 [--reference finest|RUN_DIR] [--out DIR]
                          [--overwrite] [--quiet]
    meanfield clusters RUN_DIR [--out DIR] [--threshold RHO] [--prominence P] [--factors 2,5,...] [--no-plots]
                       [--overwrite] [--quiet]
    meanfield longtime CONFIG [--betas 4,6,9] [--n N] [--t-final T] [--run RUN_DIR] [--delta D] [--out DIR]
                       [--no-plots] [--overwrite] [--quiet]
    meanfield sweep CONFIG --grid section.key=v1,v2,... [--grid ...] [--seeds N] [--draws N] [--particles [--n N]]
                    [--out DIR] [--array-index I] [--dry-run] [--set ...] [--overwrite] [--quiet]
    meanfield collect DIR... -o TABLE.csv|TABLE.nc [--final] [--densities] [--ensemble KEY [--plot FILE]]
                      [--overwrite] [--quiet]
    meanfield compare RUN_A RUN_B [-o TABLE.csv] [--overwrite] [--quiet]
    meanfield check [CONFIG] [--out DIR] [--ranks N] [--set section.key=value ...]
    meanfield plot RUN_DIR [--out DIR] [--format png|pdf|svg] [--no-movie] [--log|--linear] [--times T1,T2,...]
                   [--vmin V] [--vmax V] [--centre LON,LAT] [--fps F] [--frames] [--overwrite] [--quiet]
    meanfield mesh S2 --level L -o FILE  |  meanfield mesh S1 --cells N -o FILE  [--overwrite] [--quiet]
    meanfield info [RUN_DIR] [--json]

Every command that writes takes ``--overwrite`` (replace its own earlier results; without it
they are refused) and ``--quiet`` (no progress, log or summary on the terminal), except
``resume``, which continues its run and replaces nothing.  Default output folders are named
after the config (:mod:`meanfield.rundir.names`).

run, resume, particles, validate, response, convergence, sweep and mesh estimate the memory per rank
before building anything and refuse a job that does not fit in the memory available
(exit 2); ``--no-memory-check`` (or ``MEANFIELD_MEMORY_CHECK=off``) runs it anyway.

The same command works serially and under ``mpirun -n P``; only rank 0 prints.  Exit codes:
0 done; 1 the run failed (recorded in its metadata.json); 2 bad input (one line on stderr
naming the field, nothing written); 3 stopped at ``time.wall_limit`` after a checkpoint;
128 + n stopped by signal n (SIGTERM: 143, SIGINT: 130, SIGUSR1: 138) after a checkpoint;
141 (128 + SIGPIPE) the reader of standard output went away (``meanfield info RUN | head -4``):
the command stops quietly, as command-line tools do, and nothing is recorded as failed.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import __version__
from .wording import counted


def _rank() -> int:
    if "mpi4py.MPI" not in sys.modules:
        for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
            if var in os.environ:
                return int(os.environ[var])
        return 0
    from mpi4py import MPI

    return MPI.COMM_WORLD.rank


def _echo(*args) -> None:
    if _rank() == 0:
        print(*args, flush=True)


def _error(text: str) -> None:
    if _rank() == 0:
        print(text, file=sys.stderr, flush=True)


#: What sets the size of a mesh of each sphere (``meanfield mesh``), and its default.
MESH_SIZES = {"S2": "the icosphere refinement level", "S1": "the number of segments"}
MESH_DEFAULTS = {"S2": 3, "S1": 256}


# -- subcommands ----------------------------------------------------------------------------
def _cmd_run(args: argparse.Namespace) -> None:
    from .drivers.pde import run

    result = run(args.config, out=args.out, overrides=args.set, quiet=args.quiet, overwrite=args.overwrite)
    _echo(f"results: {result.path}")


def _write_diagnostics(path: Path) -> None:
    """diagnostics.csv and inner_products.png of a particle run, written on rank 0 once it has ended."""
    from mpi4py import MPI

    from .analysis.diagnostics import write_diagnostics
    from .collective import on_root

    on_root(MPI.COMM_WORLD, lambda: write_diagnostics(path), broadcast=False)


def _cmd_resume(args: argparse.Namespace) -> None:
    from .drivers.resume import resume
    from .rundir.results import ParticleRunResult

    result = resume(args.run_dir, t_final=args.t_final, overrides=args.set, quiet=args.quiet)
    if isinstance(result, ParticleRunResult):
        _write_diagnostics(result.path)
    recovery = result.metadata.get("segments", [{}])[-1].get("recovery")
    if recovery is not None:
        _echo(f"note: {recovery}")
    _echo(f"results: {result.path}")


def _cmd_particles(args: argparse.Namespace) -> None:
    from .drivers.particles import run_particles

    result = run_particles(args.config, n=args.n, seed=args.seed, out=args.out, overrides=args.set, quiet=args.quiet,
                           overwrite=args.overwrite)
    _write_diagnostics(result.path)
    _echo(f"results: {result.path}")


def _cmd_validate(args: argparse.Namespace) -> None:
    from .studies.validation import validate

    result = validate(args.config, ns=args.n, seeds=args.seeds, out=args.out, pde=args.pde, pde_fine=args.pde_fine,
                      refine=not args.no_refine, overrides=args.set, quiet=args.quiet, force=args.force,
                      overwrite=args.overwrite)
    _echo(f"results: {result.path}")


def _cmd_response(args: argparse.Namespace) -> None:
    from .config import ConfigError

    if args.retrieval:
        from .studies.retrieval import retrieval

        if args.wrt:
            raise ConfigError("--wrt: not with --retrieval (sensitivities are response.csv's)")
        found = retrieval(args.config, args.at, modes=args.modes or (), codewords=args.codewords,
                          observables=args.observable or (), sources=args.source, out=args.out,
                          overrides=args.set, quiet=args.quiet, overwrite=args.overwrite)
        _echo(f"results: {found.path}/retrieval.csv, {found.path}/retrieval.png")
        return
    from .studies.response import response

    for option in ("modes", "codewords"):
        if getattr(args, option) is not None:
            raise ConfigError(f"--{option}: only with --retrieval")
    if args.source:
        raise ConfigError("--source: only with --retrieval")
    result = response(args.config, args.observable or [], args.at, wrt=args.wrt, out=args.out, overrides=args.set,
                      quiet=args.quiet, overwrite=args.overwrite)
    _echo(f"results: {result.path}/response.csv, {result.path}/influence.nc")


def _cmd_convergence(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from .drivers.launch import resolve_problem
    from .rundir.names import derived_directory
    from .studies.convergence import ConvergenceError, convergence_study, format_table, parse_levels, parse_slices

    if args.slices and args.dt_ladder:
        raise ConvergenceError("--dt-ladder: give either --slices or --dt-ladder, not both")
    axis = "slices" if args.slices else "dt" if args.dt_ladder else "mesh"
    levels = parse_slices(args.slices) if args.slices else parse_levels(args.levels)
    problem = resolve_problem(args.config, args.set, MPI.COMM_WORLD)
    out = args.out or derived_directory(problem.output.directory, "convergence",
                                        *(["slices"] if axis == "slices" else []))
    reference = args.reference or ("exact" if axis == "mesh" else "finest")
    rows = convergence_study(problem, levels, out, reference=reference, axis=axis, quiet=args.quiet,
                             overwrite=args.overwrite)
    if not args.quiet:
        _echo(format_table(rows))
    _echo(f"results: {out}/convergence.csv, {out}/convergence.png")


def _array_index(args: argparse.Namespace) -> int | None:
    """--array-index, else $SLURM_ARRAY_TASK_ID (a job-array task), else None (every point)."""
    from .config import ConfigError

    if args.array_index is not None:
        return args.array_index
    text = os.environ.get("SLURM_ARRAY_TASK_ID")
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"SLURM_ARRAY_TASK_ID: expected an integer, got {text!r}") from None


def _cmd_sweep(args: argparse.Namespace) -> int:
    from .config import ConfigError
    from .studies.sweep import sweep

    if args.n is not None and not args.particles:
        raise ConfigError("--n: the number of tokens of particle sweeps (--particles)")
    overrides = args.set + ([f"particles.n={args.n}"] if args.n is not None else [])
    result = sweep(args.config, args.grid, seeds=args.seeds, draws=args.draws, particles=args.particles, out=args.out,
                   array_index=_array_index(args), dry_run=args.dry_run, overrides=overrides, quiet=args.quiet,
                   overwrite=args.overwrite)
    _echo(f"sweep {result.path}: {counted(len(result.points), 'point')} (job array: sbatch "
          f"--array=0-{len(result.points) - 1})")
    for row, status in zip(result.table(), result.status):
        _echo(f"{row['index']:>6}  {status:<11}  {result.points[row['index']].directory}")
    for index, error in result.errors.items():
        _error(f"error: sweep point {result.points[index].directory} failed: {error}")
    return 1 if result.errors else 0


def _cmd_collect(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from .analysis.collect import check_densities_output, check_table_output, collect, parameters, write_table
    from .analysis.phase import check_picture, picture_path, write_clusters_figure
    from .collective import on_root

    if args.ensemble is not None or args.plot is not None:
        _echo(on_root(MPI.COMM_WORLD, lambda: _collect_ensemble(args)))
        return

    def work() -> str:
        check_table_output(args.output, overwrite=args.overwrite)  # before reading the runs
        if args.densities:
            check_densities_output(args.output)
        if args.clusters:
            check_picture(picture_path(args.output), overwrite=args.overwrite)
        final = args.final or args.densities
        table = collect(args.dirs, final=final, clusters=args.clusters)
        path = write_table(table, args.output, final=final, overwrite=args.overwrite, densities=args.densities)
        done = f"wrote {path}: {counted(table['run'].nunique(), 'run')}, {counted(len(table), 'row')}"
        swept = parameters(table)
        if args.clusters and swept:
            done += f"; {write_clusters_figure(table, swept, picture_path(args.output))}: clusters against {swept[0]}"
        elif args.clusters:
            done += "; no picture: the runs differ in no parameter"
        return done

    _echo(on_root(MPI.COMM_WORLD, work))


def _collect_ensemble(args: argparse.Namespace) -> str:
    """``collect --ensemble KEY [--plot FILE]``: the members' mean and spread per group and time."""
    from .analysis.collect import check_densities_output, check_table_output, collect
    from .analysis.ensemble import check_plot_output, plot_ensemble, write_ensemble
    from .config import ConfigError

    if args.ensemble is None:
        raise ConfigError("--plot: pictures the members of an ensemble; give --ensemble KEY")
    check_table_output(args.output, overwrite=args.overwrite)  # before reading the runs
    if args.densities:
        check_densities_output(args.output)
    if args.plot is not None:
        check_plot_output(args.plot, overwrite=args.overwrite)
    table = collect(args.dirs, final=args.final)
    reduced = write_ensemble(table, args.ensemble, args.output, overwrite=args.overwrite, densities=args.densities)
    line = f"wrote {args.output}: {counted(len(reduced), 'row')} over {counted(table['run'].nunique(), 'run')}"
    return line + (f"; {plot_ensemble(table, args.ensemble, args.plot)}" if args.plot is not None else "")


def _cmd_compare(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from .analysis.compare import check_csv_output, compare
    from .collective import on_root

    def work() -> str:
        if args.output is not None:
            check_csv_output(args.output, overwrite=args.overwrite)  # before reading the runs
        comparison = compare(args.run_a, args.run_b)
        lines = [] if args.quiet else [comparison.format()]
        if args.output is not None:
            lines.append(f"wrote {comparison.write_csv(args.output, overwrite=args.overwrite)}")
        return "\n".join(lines)

    text = on_root(MPI.COMM_WORLD, work)
    if text:
        _echo(text)


def _cmd_check(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from ._fem import dolfinx
    from .collective import on_root
    from .config import ConfigError
    from .drivers.planning import check_config

    ranks = args.ranks if args.ranks is not None else MPI.COMM_WORLD.size
    if ranks < 1:
        raise ConfigError(f"--ranks: must be a positive integer, got {ranks}")
    dolfinx()  # collective (PETSc starts): rank 0 alone may set a run up to measure its first steps

    def check() -> tuple[str, str | None]:
        report = check_config(args.config, args.set, out=args.out, ranks=ranks)
        return report.format(), report.output_warning()

    text, warning = on_root(MPI.COMM_WORLD, check)
    if warning:
        _error(warning)
    _echo(text)


def _cmd_plot(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from .collective import on_root
    from .plotting import plot_run_directory

    times = None if args.times is None else _numbers(args.times, "--times")
    attending = None if args.attending is None else _numbers(args.attending, "--attending")
    centre = None if args.centre is None else _direction(args.centre)

    def draw() -> list[str]:
        return [str(p) for p in plot_run_directory(args.run_dir, args.out, overwrite=args.overwrite,
                                                   movie=not args.no_movie, fmt=args.format, log=args.log,
                                                   times=times, vmin=args.vmin, vmax=args.vmax, center=centre,
                                                   fps=args.fps, frames=args.frames, attending=attending)]

    paths = on_root(MPI.COMM_WORLD, draw)
    for path in paths if not args.quiet else []:
        _echo(f"wrote {path}")
    if args.quiet and paths:
        _echo(f"results: {Path(paths[0]).parent}")


def _cmd_clusters(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from .analysis.clusters import cluster_study
    from .collective import on_root

    given = {k: getattr(args, k) for k in ("threshold", "prominence", "factors", "bandwidth", "resolution")}
    options = {k: v for k, v in given.items() if v is not None}  # the API's defaults otherwise
    on_root(MPI.COMM_WORLD, lambda: cluster_study(args.run_dir, out=args.out, plots=not args.no_plots,
                                                  quiet=args.quiet, overwrite=args.overwrite, **options),
           broadcast=False)


def _cmd_longtime(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from .collective import on_root
    from .config import load_config
    from .problem import Problem
    from .rundir.names import derived_directory
    from .studies.longtime import long_time_study
    from .studies.longtime.study import format_comparison

    given = {k: getattr(args, k) for k in ("betas", "n", "t_final", "run", "delta")}
    options = {k: v for k, v in given.items() if v is not None}  # the API's defaults otherwise

    def work() -> None:
        problem = Problem(load_config(args.config))
        out = args.out or derived_directory(problem.output.directory, "longtime")
        study = long_time_study(problem, out, plots=not args.no_plots, overwrite=args.overwrite, **options)
        for row in study.rows if not args.quiet else []:
            _echo(f"reference beta {row.beta:g}: merges at {', '.join(f'{t:.6g}' for t in row.merges) or 'none'}; "
                  f"final masses {', '.join(f'{m:.4f}' for m in row.final_masses)}")
        if study.comparison is not None and not args.quiet:
            _echo(format_comparison(study.comparison))
        _echo(f"results: {out}")

    on_root(MPI.COMM_WORLD, work)


def _cmd_mesh(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from .collective import on_root
    from .config import ConfigError
    from .mesh import make_mesh_file

    given, other = ("level", "cells") if args.sphere == "S2" else ("cells", "level")
    if getattr(args, other) is not None:
        raise ConfigError(f"--{other}: {args.sphere} meshes take --{given} ({MESH_SIZES[args.sphere]})")
    size = getattr(args, given)

    def write() -> str:
        mesh = make_mesh_file(args.sphere, size if size is not None else MESH_DEFAULTS[args.sphere], args.output,
                              overwrite=args.overwrite)
        return f"wrote {args.output}: {args.sphere}, {len(mesh.cells)} cells, {len(mesh.points)} vertices"

    _echo(on_root(MPI.COMM_WORLD, write))


def _cmd_info(args: argparse.Namespace) -> None:
    import json

    from mpi4py import MPI

    from .collective import on_root
    from .rundir.environment import stack_report
    from .rundir.info import format_description
    from .rundir.results import describe

    if args.run_dir:
        facts = on_root(MPI.COMM_WORLD, lambda: describe(args.run_dir))
        _echo(json.dumps(facts, indent=2) if args.json else format_description(facts))
        return
    _echo(json.dumps(stack_report(MPI.COMM_WORLD), indent=2))


# -- parsers --------------------------------------------------------------------------------
def _numbers(text: str, option: str) -> list[float]:
    """Comma-separated numbers of an option (ValueError naming it)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{option} {text}: expected comma-separated numbers") from None
    if not values:
        raise ValueError(f"{option} {text}: expected at least one number")
    return values


def _direction(text: str):
    """``--centre LON,LAT`` (degrees) as a unit vector of R^3 (ValueError naming the option)."""
    import numpy as np

    values = _numbers(text, "--centre")
    if len(values) != 2 or not -90 <= values[1] <= 90 or not np.isfinite(values[0]):
        raise ValueError(f"--centre {text}: expected LON,LAT in degrees, latitude in [-90, 90]")
    lon, lat = np.radians(values)
    return np.array([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])


def _number_list(kind: type, what: str):
    """An argparse type: comma-separated values of ``kind`` (``what`` names them in errors)."""

    def parse(text: str) -> list:
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}s, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one {what}")
        return values

    return parse


def _add_common(p: argparse.ArgumentParser, out_help: str = "output directory (default: under runs/)") -> None:
    p.add_argument("--out", help=out_help)
    _add_overwrite(p, "replace an earlier run in --out (kept until the new run's first checkpoint)")
    _add_set(p)
    _add_quiet(p)
    _add_memory_check(p)


def _add_overwrite(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--overwrite", action="store_true", help=text)


def _add_quiet(p: argparse.ArgumentParser, text: str = "no progress or log on the terminal") -> None:
    p.add_argument("--quiet", action="store_true", help=text)


def _add_memory_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-memory-check", action="store_true",
                   help="run even when the memory estimate exceeds the available memory (also: "
                        "MEANFIELD_MEMORY_CHECK=off)")


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value (TOML syntax), repeatable")


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run the PDE described by a config file")
    p.add_argument("config", nargs="?", default=None, help="TOML config (default: the embedded S2 clustering case)")
    _add_common(p, "run directory (default: output.dir or runs/<name>)")
    p.set_defaults(handler=_cmd_run)


def _add_resume(sub) -> None:
    p = sub.add_parser("resume", help="continue a run (PDE or particles) from its last checkpoint")
    p.add_argument("run_dir", help="the run directory")
    p.add_argument("--t-final", type=float, default=None, help="a new end time (extends a completed run)")
    _add_set(p)
    _add_quiet(p)
    _add_memory_check(p)
    p.set_defaults(handler=_cmd_resume)


def _add_particles(sub) -> None:
    p = sub.add_parser("particles", help="run the n-token particle system of a config")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=int, default=None, help="number of tokens (default: particles.n)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: particles.seed)")
    _add_common(p, "run directory (default: runs/<name>-particles-n<n>-s<seed>)")
    p.set_defaults(handler=_cmd_particles)


def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="compare particle systems of growing n with the PDE")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=_number_list(int, "integer"), required=True, help="token counts, e.g. 1000,4000,16000")
    p.add_argument("--seeds", type=int, default=4, help="seeds per n (particles.seed + k)")
    p.add_argument("--pde", help="reuse this PDE run directory instead of running the PDE")
    p.add_argument("--pde-fine", help="reuse this PDE run at half the mesh size (reference and floor)")
    p.add_argument("--no-refine", action="store_true", help="do not run the PDE at half the mesh size")
    p.add_argument("--force", action="store_true", help="use --pde runs even if their model, sphere or initial "
                   "density differ from the config's")
    _add_common(p, "study directory (default: runs/<name>-validation)")
    p.set_defaults(handler=_cmd_validate)


def _add_response(sub) -> None:
    p = sub.add_parser("response", help="observables' values, influence functions (the adjoint), predicted "
                       "fluctuations n_var and sensitivities to model parameters")
    p.add_argument("config", help="TOML config (no atoms)")
    p.add_argument("--observable", action="append", metavar="[NAME=]EXPR",
                   help="an observable phi, an expression in x, y, z such as 'z' or 'cos2=x**2 - y**2'; repeatable "
                        "(required without --retrieval; with it, the last token's psi of a pair)")
    p.add_argument("--at", type=_number_list(float, "number"), required=True, metavar="T1,T2,...",
                   help="times in [0, time.t_final] of the values <phi, rho(t)>")
    p.add_argument("--wrt", action="append", default=[], metavar="PARAMETER",
                   help="a model parameter by its config path, e.g. model.beta, model.Q[0][1], "
                        "model.heads[1].weight, model.layers[0].beta: adds the column d_value_d_PARAMETER; repeatable")
    p.add_argument("--retrieval", action="store_true",
                   help="a causal run's retrieval profile R(t; s0) of the last position against every source "
                        "position: retrieval.csv and retrieval.png (default directory runs/<name>-retrieval)")
    p.add_argument("--modes", type=_number_list(int, "integer"), metavar="N1,N2,...",
                   help="with --retrieval on S^1: Fourier modes n, psi = e^{-in theta}, phi = e^{in theta} "
                        "(default 1)")
    p.add_argument("--codewords", type=int, metavar="M",
                   help="with --retrieval on S^1: add DGR's retrieval score for M codewords (mode 0)")
    p.add_argument("--source", action="append", default=[], metavar="EXPR",
                   help="with --retrieval: the source observable phi of the pair whose psi is the --observable "
                        "of the same rank; repeatable (S^1 or S^2)")
    _add_common(p, "output directory (default: runs/<name>-response, runs/<name>-retrieval with --retrieval)")
    p.set_defaults(handler=_cmd_response)


def _add_convergence(sub) -> None:
    p = sub.add_parser("convergence", help="errors and observed orders over a ladder of meshes or time steps")
    p.add_argument("config", help="TOML config of the case")
    ladder = p.add_mutually_exclusive_group(required=True)
    ladder.add_argument("--levels", help="FIRST:LAST (inclusive) or a comma list; S2: icosphere "
                        "levels, S1: 2**level cells, --dt-ladder: time.dt / 2**level")
    ladder.add_argument("--slices", help="a causal run's position slices M, a comma list such as 8,16,32 (one mesh; "
                        "errors of the whole token distribution against 1/M)")
    p.add_argument("--dt-ladder", action="store_true", help="halve the fixed time step at the config's mesh")
    p.add_argument("--reference", default=None,
                   help="'exact', 'finest' or a finer run directory (default: exact; finest with --dt-ladder or "
                   "--slices)")
    _add_common(p, "study directory (default: runs/<name>-convergence)")
    p.set_defaults(handler=_cmd_convergence)


def _add_plot(sub) -> None:
    p = sub.add_parser("plot", help="pictures of a run: S^2 maps or S^1 lines, time series, a movie")
    p.add_argument("run_dir", help="a PDE or particle run directory")
    p.add_argument("--out", help="folder for the pictures (default RUN_DIR/plots)")
    p.add_argument("--format", default="png", help="format of the still pictures (png, pdf, svg)")
    p.add_argument("--no-movie", action="store_true", help="no movie (GIF, and MP4 through ffmpeg: the system's or "
                   "imageio-ffmpeg's)")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--log", action="store_true", default=None, help="log colour scale")
    scale.add_argument("--linear", action="store_false", dest="log", help="linear colour scale")
    p.add_argument("--times", metavar="T1,T2,...", help="the stills at the outputs nearest to these times (S2: one "
                   "map density_tT per time instead of the initial and final ones; S1: their lines in density)")
    p.add_argument("--vmin", type=float, default=None, help="lower end of the colour scale (density axis)")
    p.add_argument("--vmax", type=float, default=None, help="upper end of the colour scale (density axis)")
    p.add_argument("--centre", metavar="LON,LAT", help="S2: the point (degrees) the orthographic view looks at "
                   "(default: the densest point)")
    p.add_argument("--fps", type=float, default=8.0, help="frames per second of the movie (default 8)")
    p.add_argument("--frames", action="store_true", help="also every movie frame as a PNG (density_frameNNNN.png)")
    p.add_argument("--attending", metavar="S1,S2,...", help="causal runs: the token positions in [0, 1] whose "
                   "attention attending.png and attending.csv show (default the last position)")
    _add_overwrite(p, "replace the pictures of an earlier `meanfield plot` in the folder")
    _add_quiet(p, "no list of the files written")
    p.set_defaults(handler=_cmd_plot)


def _add_clusters(sub) -> None:
    p = sub.add_parser("clusters", help="clusters of a run at every output: peaks, basins, masses, tracks, crossings")
    p.add_argument("run_dir", help="a PDE or particle run directory")
    p.add_argument("--out", help="folder for the tables and plot (default RUN_DIR/clusters)")
    p.add_argument("--threshold", type=float, default=None,
                   help="least peak height, density units (default: the uniform density 1/|S|)")
    p.add_argument("--prominence", type=float, default=None,
                   help="least relative dip between two clusters (default 0.01; particle runs: "
                        "no less than 3 standard deviations of the estimate's sampling noise)")
    p.add_argument("--factors", type=_number_list(float, "number"), default=None,
                   help="crossing times of these multiples of the uniform density (default 2,5,10,20,50)")
    p.add_argument("--bandwidth", type=float, default=None,
                   help="particle runs: kernel width in radians (default: n^(-1/(d+3)) for n tokens, "
                        "at least one cell of the analysis mesh)")
    p.add_argument("--resolution", type=int, default=None,
                   help="particle runs: analysis mesh resolution (default: the config's mesh)")
    p.add_argument("--no-plots", action="store_true", help="tables only")
    _add_overwrite(p, "replace the tables and plot of an earlier analysis in the folder")
    _add_quiet(p, "no summary on the terminal")
    p.set_defaults(handler=_cmd_clusters)


def _add_longtime(sub) -> None:
    p = sub.add_parser("longtime", help="S^1 long-time reference (quantile tokens): merges, metastable times, "
                                        "cluster tracks; optionally a hybrid run's")
    p.add_argument("config", help="an S1 config (Q = K = V = I): initial density, attention, beta, time.t_final")
    p.add_argument("--out", help="folder for the tables and plots (default: runs/<name>-longtime)")
    p.add_argument("--betas", type=_number_list(float, "number"), default=None,
                   help="comma-separated betas (default: the config's)")
    p.add_argument("--n", type=int, default=None, help="reference tokens (default 8192)")
    p.add_argument("--t-final", type=float, default=None, help="end time (default: the config's time.t_final)")
    p.add_argument("--run", default=None, help="a hybrid S1 run directory to analyse beside the reference")
    p.add_argument("--delta", type=float, default=None, help="cluster gap and merge distance in radians (default 0.01)")
    p.add_argument("--no-plots", action="store_true", help="tables only")
    _add_overwrite(p, "replace the tables and plots of an earlier study in the folder")
    _add_quiet(p, "no table of merges on the terminal")
    p.set_defaults(handler=_cmd_longtime)


def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="one run per point of a grid of config values (SLURM job arrays: one point "
                       "per task)")
    p.add_argument("config", help="TOML config of the base case")
    p.add_argument("--grid", action="append", default=[], metavar="SECTION.KEY=V1,V2,...",
                   help="values of one config key (TOML values); repeatable: the points are all combinations")
    p.add_argument("--seeds", type=int, default=None,
                   help="particle sweeps: also vary particles.seed over this many seeds (particles.seed + k)")
    p.add_argument("--draws", type=int, default=None,
                   help="configs of [model.random]: also vary model.random.seed over this many weight draws "
                        "(model.random.seed + k): an ensemble for collect --ensemble")
    p.add_argument("--particles", action="store_true", help="run the particle system at every point, not the PDE")
    p.add_argument("--n", type=int, default=None, help="number of tokens of a particle sweep (default: particles.n)")
    p.add_argument("--out", help="sweep directory (default: runs/<name>-sweep)")
    p.add_argument("--array-index", type=int, default=None,
                   help="run only this point (default: $SLURM_ARRAY_TASK_ID when set, else every point)")
    p.add_argument("--dry-run", action="store_true", help="list the points and their status; run nothing")
    _add_overwrite(p, "run every point again, completed ones too (default: only those not completed)")
    _add_set(p)
    _add_quiet(p)
    _add_memory_check(p)
    p.set_defaults(handler=_cmd_sweep)


def _add_collect(sub) -> None:
    p = sub.add_parser("collect", help="the observables of many runs in one table (CSV) or xarray Dataset (netCDF)")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run directories, sweep directories or folders of runs")
    p.add_argument("-o", "--output", required=True, help="table.csv (long format) or table.nc (xarray Dataset)")
    p.add_argument("--final", action="store_true", help="only the last output of each run (one row per run)")
    p.add_argument("--densities", action="store_true", help="with -o TABLE.nc: also every run's final density, "
                   "density(run, cell), with the cells' centroids and areas (PDE runs on one mesh; implies --final)")
    p.add_argument("--clusters", action="store_true", help="also the number of clusters at each output and each "
                   "run's formation time (max density reaching 10x uniform; the analysis of `meanfield clusters`), "
                   "and TABLE-clusters.png: both against the first swept parameter")
    p.add_argument("--ensemble", metavar="KEY", default=None,
                   help="reduce over the runs that differ only in this config key (model.random.seed: weight draws): "
                        "per group and output time, members and the mean and std of every observable; with "
                        "--densities (netCDF) the mean density at every output time (the annealed law)")
    p.add_argument("--plot", metavar="FILE", default=None,
                   help="with --ensemble: a picture (.png, .pdf, .svg) of the members and the mean and spread of the "
                        "order parameter and the energy against t (depth)")
    _add_overwrite(p, "replace an existing output file")
    _add_quiet(p, "(accepted for symmetry: collect prints only the line naming the table)")
    p.set_defaults(handler=_cmd_collect)


def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="two PDE runs at their common output times (any meshes and schemes): the "
                       "finer density transferred to the coarser mesh, L1 and W1 distances, observables side by side")
    p.add_argument("run_a", metavar="RUN_A", help="a PDE run directory")
    p.add_argument("run_b", metavar="RUN_B", help="another PDE run directory")
    p.add_argument("-o", "--output", default=None, help="also write the table as CSV (t, l1, w1, a_<observable>, "
                   "b_<observable>)")
    _add_overwrite(p, "replace an existing output file")
    _add_quiet(p, "no table on the terminal (only the line naming the CSV)")
    p.set_defaults(handler=_cmd_compare)


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="what a run of a config would do: a summary (cells, ranks, steps, wall time "
                       "and memory per rank, outputs and their size on disk), the details, the resolved config; "
                       "writes nothing (a short run into a temporary directory, removed, measures the costs)")
    p.add_argument("config", nargs="?", default=None, help="TOML config (default: the embedded S2 clustering case)")
    p.add_argument("--out", help="the run directory a run would use (default: output.dir or runs/<name>)")
    p.add_argument("--ranks", type=int, default=None,
                   help="the MPI ranks of the run to size: memory and wall time per rank (default: the ranks of this "
                        "command, 1 without mpirun)")
    _add_set(p)
    p.set_defaults(handler=_cmd_check)


def _add_mesh(sub) -> None:
    p = sub.add_parser("mesh", help="write a sphere mesh file (any format meshio writes)")
    p.add_argument("sphere", choices=["S1", "S2"])
    p.add_argument("--level", type=int, default=None, help=f"S2 only: {MESH_SIZES['S2']} (default "
                   f"{MESH_DEFAULTS['S2']})")
    p.add_argument("--cells", type=int, default=None, help=f"S1 only: {MESH_SIZES['S1']} (default "
                   f"{MESH_DEFAULTS['S1']})")
    p.add_argument("-o", "--output", required=True, help="output file, e.g. sphere.msh or sphere.vtu")
    _add_overwrite(p, "replace an existing output file")
    _add_quiet(p, "(accepted for symmetry: mesh prints only the line naming the file)")
    _add_memory_check(p)
    p.set_defaults(handler=_cmd_mesh)


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="versions of meanfield and its stack, or the status of a run directory")
    p.add_argument("run_dir", nargs="?", default=None,
                   help="a run directory to describe: status, t reached, progress, wall time, segments, files")
    p.add_argument("--json", action="store_true", help="RUN_DIR's facts as JSON (the stack report is always JSON)")
    p.set_defaults(handler=_cmd_info)


#: Each registers one subcommand; add new commands here.
COMMANDS: list[Callable] = [_add_run, _add_resume, _add_particles, _add_validate, _add_response, _add_convergence,
                            _add_clusters, _add_longtime, _add_sweep, _add_collect, _add_compare, _add_check, _add_plot,
                            _add_mesh, _add_info]


#: The top-level ``meanfield --help``: what the tool is for, three commands to start from, the docs.
DESCRIPTION = """\
Solve the mean-field PDE of self-attention dynamics (tokens on the sphere S^1 or S^2 moving under
softmax attention) on a meshed sphere, serially or under mpirun, simulate the n-token particle
system of the same model, and compare the two.  A run is described by a TOML config file; every
key has a default."""
EPILOG = """\
examples:
  meanfield check case.toml            what a run would do: cells, steps, time, memory, files
  mpirun -n 4 meanfield run case.toml  run it into runs/<name>; `meanfield info runs/<name>` watches it
  meanfield plot runs/<name>           maps, time series and a movie into runs/<name>/plots

`meanfield COMMAND --help` lists a command's options.  Documentation: `make docs` builds it into
docs/_build/html/index.html from the docs/ folder of the source tree (README.md to start)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="meanfield", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"meanfield {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for add in COMMANDS:
        add(sub)
    return parser


#: The exit code when the reader of standard output has gone: 128 + SIGPIPE, as a tool killed by it gives.
READER_GONE = 141


def _stdout_closed() -> bool:
    """Whether nobody reads standard output any more (a pipe whose reader has closed it)."""
    try:
        poll = select.poll()
        poll.register(1, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except OSError:
        return False


def _reader_gone() -> int:
    """Stop quietly: what is still buffered for standard output goes nowhere, and under mpirun the
    other ranks end too."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    if "mpi4py.MPI" in sys.modules:
        from mpi4py import MPI

        if MPI.COMM_WORLD.size > 1:
            MPI.COMM_WORLD.Abort(READER_GONE)
    return READER_GONE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``meanfield`` console script; returns the exit code (see the module docstring)."""
    try:
        code = _command(argv)
        sys.stdout.flush()  # here, not at exit, so that a reader gone is seen as such
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        return _reader_gone()


def _command(argv: Sequence[str] | None) -> int:
    """Parse ``argv``, run the command and turn its exceptions into exit codes."""
    from .collective import INPUT_ERRORS, is_collective
    from .engine.controller import RunInterrupted

    args = build_parser().parse_args(argv)
    if getattr(args, "no_memory_check", False):
        from .memory import disable_guard

        disable_guard()
    try:
        code = args.handler(args)
    except RunInterrupted as exc:
        _error(f"meanfield: {exc}")
        return exc.exit_code
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            raise  # not a failed run: the reader of standard output has gone
        code = 2 if isinstance(exc, INPUT_ERRORS) else 1
        text = f"error: {exc}" if code == 2 else f"error: the run failed: {type(exc).__name__}: {exc}"
        if is_collective(exc) or "mpi4py.MPI" not in sys.modules:
            _error(text)
            return code
        # possibly raised on this rank alone: the others may be waiting in a collective; end them all
        from mpi4py import MPI

        print(f"{text} (on rank {MPI.COMM_WORLD.rank})", file=sys.stderr, flush=True)
        if MPI.COMM_WORLD.size > 1:
            MPI.COMM_WORLD.Abort(code)
        return code
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
