"""``meanfield clusters``: the clusters of a run at every output."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_overwrite, add_quiet, given_settings
from .values import number_list


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("clusters", help="clusters of a run at every output: peaks, basins, masses, tracks, "
                              "crossings")
    p.add_argument("run_dir", help="a PDE or particle run directory")
    p.add_argument("--out", help="folder for the tables and plot (default RUN_DIR/clusters)")
    p.add_argument("--threshold", type=float, default=None,
                   help="least peak height, density units (default: the uniform density 1/|S|)")
    p.add_argument("--prominence", type=float, default=None,
                   help="least relative dip between two clusters (default 0.01; particle runs: "
                        "no less than 3 standard deviations of the estimate's sampling noise)")
    p.add_argument("--factors", type=number_list(float, "number"), default=None,
                   help="crossing times of these multiples of the uniform density (default 2,5,10,20,50)")
    p.add_argument("--bandwidth", type=float, default=None,
                   help="particle runs: kernel width in radians (default: n^(-1/(d+3)) for n tokens, "
                        "at least one cell of the analysis mesh)")
    p.add_argument("--resolution", type=int, default=None,
                   help="particle runs: analysis mesh resolution (default: the config's mesh)")
    p.add_argument("--no-plots", action="store_true", help="tables only")
    add_overwrite(p, "replace the tables and plot of an earlier analysis in the folder")
    add_quiet(p, "no summary on the terminal")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..analysis.clusters import cluster_study
    from ..collective import on_root

    comm = options.comm  # MPI starts here, before any work
    settings = given_settings(args, ("threshold", "prominence", "factors", "bandwidth", "resolution"))
    on_root(comm, lambda: cluster_study(args.run_dir, out=options.out, plots=not args.no_plots, quiet=options.quiet,
                                        overwrite=options.overwrite, **settings), broadcast=False)
