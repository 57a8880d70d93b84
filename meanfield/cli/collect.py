"""``meanfield collect``: the observables of many runs in one table; an ensemble's mean and spread."""

from __future__ import annotations

import argparse

from ..wording import counted
from .options import Options, Subparsers, add_overwrite, add_quiet
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("collect", help="the observables of many runs in one table (CSV) or xarray Dataset "
                              "(netCDF)")
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
    add_overwrite(p, "replace an existing output file")
    add_quiet(p, "(accepted for symmetry: collect prints only the line naming the table)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..analysis.collect import check_densities_output, check_table_output, collect, parameters, write_table
    from ..analysis.phase import check_picture, picture_path, write_clusters_figure
    from ..collective import on_root

    comm = options.comm  # MPI starts here, before any work
    if args.ensemble is not None or args.plot is not None:
        echo(on_root(comm, lambda: ensemble(args, options)))
        return

    def work() -> str:
        check_table_output(args.output, overwrite=options.overwrite)  # before reading the runs
        if args.densities:
            check_densities_output(args.output)
        if args.clusters:
            check_picture(picture_path(args.output), overwrite=options.overwrite)
        final = args.final or args.densities
        table = collect(args.dirs, final=final, clusters=args.clusters)
        path = write_table(table, args.output, final=final, overwrite=options.overwrite, densities=args.densities)
        done = f"wrote {path}: {counted(table['run'].nunique(), 'run')}, {counted(len(table), 'row')}"
        swept = parameters(table)
        if args.clusters and swept:
            done += f"; {write_clusters_figure(table, swept, picture_path(args.output))}: clusters against {swept[0]}"
        elif args.clusters:
            done += "; no picture: the runs differ in no parameter"
        return done

    echo(on_root(comm, work))


def ensemble(args: argparse.Namespace, options: Options) -> str:
    """``collect --ensemble KEY [--plot FILE]``: the members' mean and spread per group and time."""
    from ..analysis.collect import check_densities_output, check_table_output, collect
    from ..analysis.ensemble import check_plot_output, plot_ensemble, write_ensemble
    from ..config import ConfigError

    if args.ensemble is None:
        raise ConfigError("--plot: pictures the members of an ensemble; give --ensemble KEY")
    check_table_output(args.output, overwrite=options.overwrite)  # before reading the runs
    if args.densities:
        check_densities_output(args.output)
    if args.plot is not None:
        check_plot_output(args.plot, overwrite=options.overwrite)
    table = collect(args.dirs, final=args.final)
    reduced = write_ensemble(table, args.ensemble, args.output, overwrite=options.overwrite, densities=args.densities)
    line = f"wrote {args.output}: {counted(len(reduced), 'row')} over {counted(table['run'].nunique(), 'run')}"
    return line + (f"; {plot_ensemble(table, args.ensemble, args.plot)}" if args.plot is not None else "")
