"""``meanfield longtime``: the S^1 long-time reference of quantile tokens, optionally beside a hybrid run."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_overwrite, add_quiet, given_settings
from .terminal import echo
from .values import number_list


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("longtime", help="S^1 long-time reference (quantile tokens): merges, metastable "
                              "times, cluster tracks; optionally a hybrid run's")
    p.add_argument("config", help="an S1 config (Q = K = V = I): initial density, attention, beta, time.t_final")
    p.add_argument("--out", help="folder for the tables and plots (default: runs/<name>-longtime)")
    p.add_argument("--betas", type=number_list(float, "number"), default=None,
                   help="comma-separated betas (default: the config's)")
    p.add_argument("--n", type=int, default=None, help="reference tokens (default 8192)")
    p.add_argument("--t-final", type=float, default=None, help="end time (default: the config's time.t_final)")
    p.add_argument("--run", default=None, help="an S1 PDE run directory (hybrid or not) to analyse beside the "
                   "reference, as `meanfield clusters` analyses it")
    p.add_argument("--delta", type=float, default=None, help="cluster gap and merge distance in radians (default 0.01)")
    p.add_argument("--no-plots", action="store_true", help="tables only")
    add_overwrite(p, "replace the tables and plots of an earlier study in the folder")
    add_quiet(p, "no table of merges on the terminal")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..collective import on_root
    from ..config import load_config
    from ..problem import Problem
    from ..rundir.names import derived_directory
    from ..studies.longtime import long_time_study
    from ..studies.longtime.study import format_comparison

    comm = options.comm  # MPI starts here, before any work
    settings = given_settings(args, ("betas", "n", "t_final", "run", "delta"))

    def work() -> None:
        problem = Problem(load_config(args.config))
        out = options.out or derived_directory(problem.output.directory, "longtime")
        study = long_time_study(problem, out, plots=not args.no_plots, overwrite=options.overwrite, **settings)
        for row in study.rows if not options.quiet else []:
            echo(f"reference beta {row.beta:g}: merges at {', '.join(f'{t:.6g}' for t in row.merges) or 'none'}; "
                 f"final masses {', '.join(f'{m:.4f}' for m in row.final_masses)}")
        if study.comparison is not None and not options.quiet:
            echo(format_comparison(study.comparison))
        echo(f"results: {out}")

    on_root(comm, work)
