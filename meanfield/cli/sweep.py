"""``meanfield sweep``: one run per point of a grid of config values."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from ..wording import counted
from .options import Options, Subparsers, add_memory_check, add_overwrite, add_quiet, add_set
from .terminal import echo, error

if TYPE_CHECKING:
    from ..drivers.job_size import JobSize


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("sweep", help="one run per point of a grid of config values (SLURM job arrays: one "
                              "point per task)")
    p.add_argument("config", help="TOML config of the base case")
    p.add_argument("--grid", action="append", default=[], metavar="SECTION.KEY=V1,V2,...",
                   help="values of one config key (TOML values); repeatable: the points are all combinations")
    p.add_argument("--seeds", type=int, default=None,
                   help="particle sweeps: also vary particles.seed over this many seeds (particles.seed + k)")
    p.add_argument("--draws", type=int, default=None,
                   help="configs of [model.random]: also vary model.random.seed over this many weight draws "
                        "(model.random.seed + k): an ensemble for collect --ensemble")
    p.add_argument("--particles", action="store_true", help="run the particle system at every point, not the PDE")
    p.add_argument("--n", type=int, default=None, help="number of tokens of a particle sweep (default: particles.n)")
    p.add_argument("--out", help="sweep directory (default: runs/<name>-sweep)")
    p.add_argument("--array-index", type=int, default=None,
                   help="run only this point (default: $SLURM_ARRAY_TASK_ID when set, else every point)")
    p.add_argument("--dry-run", action="store_true", help="list the points and their status; run nothing")
    add_overwrite(p, "run every point again, completed ones too (default: only those not completed)")
    add_set(p)
    add_quiet(p)
    add_memory_check(p)
    p.set_defaults(handler=main, sizer=size)


def main(args: argparse.Namespace, options: Options) -> int:
    from ..config import ConfigError
    from ..studies.sweep import sweep

    if args.n is not None and not args.particles:
        raise ConfigError("--n: the number of tokens of particle sweeps (--particles)")
    if args.n is not None:
        options = options._replace(overrides=[*options.overrides, f"particles.n={args.n}"])
    result = sweep(args.config, args.grid, seeds=args.seeds, draws=args.draws, particles=args.particles,
                   array_index=array_index(args), dry_run=args.dry_run, **options.keywords())
    echo(f"sweep {result.path}: {counted(len(result.points), 'point')} (job array: sbatch "
         f"--array=0-{len(result.points) - 1})")
    for row, status in zip(result.table(), result.status):
        echo(f"{row['index']:>6}  {status:<11}  {result.points[row['index']].directory}")
    for index, failure in result.errors.items():
        error(f"error: sweep point {result.points[index].directory} failed: {failure}")
    return 1 if result.errors else 0


def array_index(args: argparse.Namespace) -> int | None:
    """--array-index, else $SLURM_ARRAY_TASK_ID (a job-array task), else None (every point)."""
    from ..config import ConfigError

    if args.array_index is not None:
        return args.array_index
    text = os.environ.get("SLURM_ARRAY_TASK_ID")
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"SLURM_ARRAY_TASK_ID: expected an integer, got {text!r}") from None


def size(args: argparse.Namespace, overrides: list[str], where: dict[str, Any]) -> JobSize:
    """The job of this command line as ``meanfield check sweep ...`` sizes it (``where``: ``out``,
    ``ranks``, ``cores``; :mod:`meanfield.studies.sizing`)."""
    from ..studies.grid import parse_grid
    from ..studies.sizing import sweep_size

    if args.n is not None:
        overrides = [*overrides, f"particles.n={args.n}"]
    return sweep_size(args.config, overrides, grid=parse_grid(args.grid), seeds=args.seeds, draws=args.draws,
                      particles=args.particles, **where)
