"""``meanfield convergence``: errors and observed orders over a ladder of meshes, time steps or slices."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_common
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("convergence", help="errors and observed orders over a ladder of meshes or time steps")
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
    add_common(p, "study directory (default: runs/<name>-convergence)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..drivers.launch import resolve_problem
    from ..rundir.names import derived_directory
    from ..studies.convergence import ConvergenceError, convergence_study, format_table, parse_levels, parse_slices

    comm = options.comm  # MPI starts here, before any work
    if args.slices and args.dt_ladder:
        raise ConvergenceError("--dt-ladder: give either --slices or --dt-ladder, not both")
    axis = "slices" if args.slices else "dt" if args.dt_ladder else "mesh"
    levels = parse_slices(args.slices) if args.slices else parse_levels(args.levels)
    problem = resolve_problem(args.config, options.overrides, comm)
    out = options.out or derived_directory(problem.output.directory, "convergence",
                                           *(["slices"] if axis == "slices" else []))
    reference = args.reference or ("exact" if axis == "mesh" else "finest")
    rows = convergence_study(problem, levels, out, reference=reference, axis=axis, quiet=options.quiet,
                             overwrite=options.overwrite)
    if not options.quiet:
        echo(format_table(rows))
    echo(f"results: {out}/convergence.csv, {out}/convergence.png")
