"""``meanfield info``: versions of meanfield and its stack, the status of a run directory, or the
summary of a sweep or study folder."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("info", help="versions of meanfield and its stack, the status of a run directory, or "
                                           "the summary of a sweep or study")
    p.add_argument("run_dir", nargs="?", default=None,
                   help="a run directory to describe (status, t reached, progress, wall time, segments, files), or a "
                        "sweep or study folder (its runs by status, what it found, its files)")
    p.add_argument("--json", action="store_true", help="RUN_DIR's facts as JSON (the stack report is always JSON)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    import json

    from ..collective import on_root
    from ..rundir.environment import stack_report
    from ..rundir.info import format_description
    from ..rundir.results import describe
    from ..rundir.study_directory import is_study
    from ..studies.describe import describe_study, format_study

    comm = options.comm  # MPI starts here, before any work
    if args.run_dir and is_study(args.run_dir):
        facts = on_root(comm, lambda: describe_study(args.run_dir))
        echo(json.dumps(facts, indent=2) if args.json else format_study(facts))
        return
    if args.run_dir:
        facts = on_root(comm, lambda: describe(args.run_dir))
        echo(json.dumps(facts, indent=2) if args.json else format_description(facts))
        return
    echo(json.dumps(stack_report(comm), indent=2))
