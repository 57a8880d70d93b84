"""``meanfield run``: the PDE of a config."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_common
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("run", help="run the PDE described by a config file")
    p.add_argument("config", nargs="?", default=None, help="TOML config (default: the embedded S2 clustering case)")
    add_common(p, "run directory (default: output.dir or runs/<name>)")
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..drivers.pde import run

    result = run(args.config, **options.keywords())
    echo(f"results: {result.path}")
