"""``meanfield compare``: two PDE runs at their common output times."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_overwrite, add_quiet
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("compare", help="two PDE runs at their common output times (any meshes and schemes): "
                              "the finer density transferred to the coarser mesh, L1 and W1 distances, observables "
                              "side by side")
    p.add_argument("run_a", metavar="RUN_A", help="a PDE run directory")
    p.add_argument("run_b", metavar="RUN_B", help="another PDE run directory")
    p.add_argument("-o", "--output", default=None, help="also write the table as CSV (t, l1, w1, a_<observable>, "
                   "b_<observable>)")
    add_overwrite(p, "replace an existing output file")
    add_quiet(p, "no table on the terminal (only the line naming the CSV)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..analysis.compare import check_csv_output, compare
    from ..collective import on_root

    comm = options.comm  # MPI starts here, before any work

    def work() -> str:
        if args.output is not None:
            check_csv_output(args.output, overwrite=options.overwrite)  # before reading the runs
        comparison = compare(args.run_a, args.run_b)
        lines = [] if options.quiet else [comparison.format()]
        if args.output is not None:
            lines.append(f"wrote {comparison.write_csv(args.output, overwrite=options.overwrite)}")
        return "\n".join(lines)

    text = on_root(comm, work)
    if text:
        echo(text)
