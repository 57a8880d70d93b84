"""``meanfield particles``: the n-token particle system of a config."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .options import Options, Subparsers, add_common
from .terminal import echo

if TYPE_CHECKING:
    from ..drivers.job_size import JobSize

#: The override ``--no-diagnostics`` stands for.
NO_DIAGNOSTICS = "output.diagnostics=false"


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("particles", help="run the n-token particle system of a config")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=int, default=None, help="number of tokens (default: particles.n)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: particles.seed)")
    p.add_argument("--prompts", type=_setting("particles.prompts", int), action="append", dest="set", default=[],
                   metavar="B", help="B independent prompts in one run, the batched engine (prompt b: seed + b; "
                                     "particles.prompts)")
    p.add_argument("--device", type=_setting("particles.device", str), action="append", dest="set", default=[],
                   metavar="{cpu,gpu}", help="the batched engine's device; 'gpu' needs JAX with CUDA "
                                             "(particles.device)")
    add_no_diagnostics(p)
    add_common(p, "run directory (default: runs/<name>-particles-n<n>-s<seed>, -b<B> for B prompts)")
    p.set_defaults(handler=main, sizer=size)


def _setting(key: str, kind: type) -> Callable[[str], str]:
    """An option's value as the override ``key=value`` (TOML), ``kind`` checking it."""
    def override(text: str) -> str:
        return f"{key}={kind(text)!r}" if kind is str else f"{key}={kind(text)}"

    override.__name__ = kind.__name__  # argparse's error names the type
    return override


def add_no_diagnostics(p: argparse.ArgumentParser) -> None:
    """``--no-diagnostics``: ``--set output.diagnostics=false``."""
    p.add_argument("--no-diagnostics", action="append_const", const=NO_DIAGNOSTICS, dest="set", default=[],
                   help="no diagnostics.csv and inner_products.png after a particle run's outputs "
                        "(output.diagnostics = false)")


def main(args: argparse.Namespace, options: Options) -> None:
    from ..studies.particle_runs import run_particles

    result = run_particles(args.config, n=args.n, seed=args.seed, **options.keywords())
    echo(f"results: {result.path}")


def size(args: argparse.Namespace, overrides: list[str], where: dict[str, Any]) -> JobSize:
    """The job of this command line as ``meanfield check particles ...`` sizes it (``where``: ``out``,
    ``ranks``, ``cores``; :mod:`meanfield.studies.sizing`)."""
    from ..studies.sizing import particles_size

    return particles_size(args.config, overrides, n=args.n, seed=args.seed, **where)
