"""``meanfield resume``: continue a run from its last checkpoint."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_memory_check, add_quiet, add_set
from .particles import add_no_diagnostics
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("resume", help="continue a run (PDE or particles) from its last checkpoint")
    p.add_argument("run_dir", help="the run directory")
    p.add_argument("--t-final", type=float, default=None, help="a new end time (extends a completed run)")
    add_set(p)
    add_no_diagnostics(p)
    add_quiet(p)
    add_memory_check(p)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..studies.particle_runs import resume

    result = resume(args.run_dir, t_final=args.t_final, overrides=options.overrides, quiet=options.quiet)
    recovery = result.metadata.get("segments", [{}])[-1].get("recovery")
    if recovery is not None:
        echo(f"note: {recovery}")
    echo(f"results: {result.path}")
