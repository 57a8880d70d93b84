"""``meanfield validate``: particle systems of growing n against the PDE."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .options import Options, Subparsers, add_common
from .terminal import echo
from .values import number_list

if TYPE_CHECKING:
    from ..drivers.job_size import JobSize


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("validate", help="compare particle systems of growing n with the PDE")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=number_list(int, "integer"), required=True, help="token counts, e.g. 1000,4000,16000")
    p.add_argument("--seeds", type=int, default=4, help="seeds per n (particles.seed + k)")
    p.add_argument("--pde", help="reuse this PDE run directory instead of running the PDE")
    p.add_argument("--pde-fine", help="reuse this PDE run at half the mesh size (reference and floor)")
    p.add_argument("--no-refine", action="store_true", help="do not run the PDE at half the mesh size")
    p.add_argument("--force", action="store_true", help="use --pde runs even if their model, sphere or initial "
                   "density differ from the config's")
    add_common(p, "study directory (default: runs/<name>-validation)")
    p.set_defaults(handler=main, sizer=size)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..studies.validation import validate

    result = validate(args.config, ns=args.n, seeds=args.seeds, pde=args.pde, pde_fine=args.pde_fine,
                      refine=not args.no_refine, force=args.force, **options.keywords())
    echo(f"results: {result.path}")


def size(args: argparse.Namespace, overrides: list[str], where: dict[str, Any]) -> JobSize:
    """The job of this command line as ``meanfield check validate ...`` sizes it (``where``: ``out``,
    ``ranks``, ``cores``; :mod:`meanfield.studies.sizing`)."""
    from ..studies.sizing import validate_size

    return validate_size(args.config, overrides, ns=args.n, seeds=args.seeds, pde=args.pde, pde_fine=args.pde_fine,
                         refine=not args.no_refine, **where)
