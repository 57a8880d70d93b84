"""``meanfield particles``: the n-token particle system of a config."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_common
from .terminal import echo

#: The override ``--no-diagnostics`` stands for.
NO_DIAGNOSTICS = "output.diagnostics=false"


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("particles", help="run the n-token particle system of a config")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=int, default=None, help="number of tokens (default: particles.n)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: particles.seed)")
    add_no_diagnostics(p)
    add_common(p, "run directory (default: runs/<name>-particles-n<n>-s<seed>)")
    p.set_defaults(handler=main)


def add_no_diagnostics(p: argparse.ArgumentParser) -> None:
    """``--no-diagnostics``: ``--set output.diagnostics=false``."""
    p.add_argument("--no-diagnostics", action="append_const", const=NO_DIAGNOSTICS, dest="set", default=[],
                   help="no diagnostics.csv and inner_products.png after a particle run's outputs "
                        "(output.diagnostics = false)")


def main(args: argparse.Namespace, options: Options) -> None:
    from ..studies.particle_runs import run_particles

    result = run_particles(args.config, n=args.n, seed=args.seed, **options.keywords())
    echo(f"results: {result.path}")
