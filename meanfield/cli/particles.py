"""``meanfield particles``: the n-token particle system of a config."""

from __future__ import annotations

import argparse
from pathlib import Path

from .options import Options, Subparsers, add_common
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("particles", help="run the n-token particle system of a config")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=int, default=None, help="number of tokens (default: particles.n)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: particles.seed)")
    add_common(p, "run directory (default: runs/<name>-particles-n<n>-s<seed>)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..drivers.particles import run_particles

    result = run_particles(args.config, n=args.n, seed=args.seed, **options.keywords())
    write_diagnostics(result.path)
    echo(f"results: {result.path}")


def write_diagnostics(path: Path) -> None:
    """diagnostics.csv and inner_products.png of a particle run, written on rank 0 once it has ended."""
    from mpi4py import MPI

    from ..analysis.diagnostics import write_diagnostics
    from ..collective import on_root

    on_root(MPI.COMM_WORLD, lambda: write_diagnostics(path), broadcast=False)
