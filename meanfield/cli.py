"""Command line: parses arguments and calls the Python API, nothing more.

    meanfield run [CONFIG] [--out DIR] [--set section.key=value ...] [--quiet]
    meanfield mesh S2 --level L -o FILE      |  meanfield mesh S1 --cells N -o FILE
    meanfield info
    meanfield particles CONFIG --n N [--seed S] [--out DIR] [--set ...] [--quiet]
    meanfield validate CONFIG --n 1000,4000 [--seeds 4] [--out DIR] [--pde RUN_DIR] [--quiet]
    meanfield convergence CONFIG --levels 3:6 [--dt-ladder] [--reference exact|finest|RUN_DIR] [--out DIR] [--quiet]

The same command works serially and under ``mpirun -n P``; only rank 0 prints.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

#: Exceptions that mean "bad input": reported as one line, exit code 2.
INPUT_ERRORS: tuple[type[Exception], ...] = (ValueError, FileNotFoundError)


def _rank() -> int:
    if "mpi4py" not in sys.modules:
        import os

        for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
            if var in os.environ:
                return int(os.environ[var])
        return 0
    from mpi4py import MPI

    return MPI.COMM_WORLD.rank


def _echo(*args) -> None:
    if _rank() == 0:
        print(*args, flush=True)


def _cmd_run(args: argparse.Namespace) -> None:
    from .config import load_config
    from .solver import run

    config = load_config(args.config, args.set)
    result = run(config, out=args.out, quiet=args.quiet)
    _echo(f"results: {result.path}")


def _cmd_mesh(args: argparse.Namespace) -> None:
    from .mesh import circle, icosphere, write_mesh_file

    if _rank() != 0:
        return
    mesh = icosphere(args.level) if args.sphere == "S2" else circle(args.cells)
    write_mesh_file(args.output, mesh)
    print(f"wrote {args.output}: {args.sphere}, {len(mesh.cells)} cells, {len(mesh.points)} vertices")


def _cmd_info(args: argparse.Namespace) -> None:
    import json

    from mpi4py import MPI

    from .io import versions
    from .nonlocal_field import METHODS

    info = {"versions": versions(), "mpi_ranks": MPI.COMM_WORLD.size, "nonlocal_methods": list(METHODS)}
    _echo(json.dumps(info, indent=2))


def _cmd_particles(args: argparse.Namespace) -> None:
    from .config import load_config
    from .particles import run_particles

    config = load_config(args.config, args.set)
    result = run_particles(config, n=args.n, seed=args.seed, out=args.out, quiet=args.quiet)
    _echo(f"results: {result.path}")


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _cmd_validate(args: argparse.Namespace) -> None:
    from .config import load_config
    from .studies.validation import validate

    config = load_config(args.config, args.set)
    result = validate(config, ns=args.n, seeds=args.seeds, out=args.out, pde=args.pde,
                      pde_fine=args.pde_fine, refine=not args.no_refine, quiet=args.quiet)
    _echo(f"results: {result.path}")


def _add_common(p, out_help: str = "output directory (default: under runs/)") -> None:
    p.add_argument("--out", help=out_help)
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value (TOML syntax), repeatable")
    p.add_argument("--quiet", action="store_true", help="no progress or log on the terminal")


def _add_particles(sub) -> None:
    p = sub.add_parser("particles", help="run the n-token particle system of a config")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=int, default=None, help="number of tokens (default: particles.n)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: particles.seed)")
    _add_common(p)
    p.set_defaults(handler=_cmd_particles)


def _add_validate(sub) -> None:
    p = sub.add_parser("validate", help="compare particle systems of growing n with the PDE")
    p.add_argument("config", help="TOML config")
    p.add_argument("--n", type=_int_list, required=True, help="token counts, e.g. 1000,4000,16000")
    p.add_argument("--seeds", type=int, default=4, help="seeds per n (particles.seed + k)")
    p.add_argument("--pde", help="reuse this PDE run directory instead of running the PDE")
    p.add_argument("--pde-fine", help="reuse this PDE run at half the mesh size (reference and floor)")
    p.add_argument("--no-refine", action="store_true", help="do not run the PDE at half the mesh size")
    _add_common(p)
    p.set_defaults(handler=_cmd_validate)


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="run the PDE described by a config file")
    p.add_argument("config", nargs="?", default=None, help="TOML config (default: the embedded S2 clustering case)")
    _add_common(p, "run directory (default: output.dir or runs/<name>)")
    p.set_defaults(handler=_cmd_run)


def _add_mesh(sub) -> None:
    p = sub.add_parser("mesh", help="write a sphere mesh file (any format meshio writes)")
    p.add_argument("sphere", choices=["S1", "S2"])
    p.add_argument("--level", type=int, default=3, help="S2: icosphere refinement level")
    p.add_argument("--cells", type=int, default=256, help="S1: number of segments")
    p.add_argument("-o", "--output", required=True, help="output file, e.g. sphere.msh or sphere.vtu")
    p.set_defaults(handler=_cmd_mesh)


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="versions of meanfield, dolfinx, PETSc, MPI")
    p.set_defaults(handler=_cmd_info)


def _cmd_convergence(args: argparse.Namespace) -> None:
    from .studies.convergence import convergence_study, format_table, parse_levels

    out = args.out or "runs/convergence"
    reference = args.reference or ("finest" if args.dt_ladder else "exact")
    rows = convergence_study(args.config, parse_levels(args.levels), out, reference=reference,
                             dt_ladder=args.dt_ladder, overrides=args.set, quiet=args.quiet)
    _echo(format_table(rows))
    _echo(f"results: {out}/convergence.csv, {out}/convergence.png")


def _add_convergence(sub) -> None:
    p = sub.add_parser("convergence", help="errors and observed orders over a ladder of meshes or time steps")
    p.add_argument("config", help="TOML config of the case")
    p.add_argument("--levels", required=True, help="FIRST:LAST (inclusive) or a comma list; S2: icosphere "
                   "levels, S1: 2**level cells, --dt-ladder: time.dt / 2**level")
    p.add_argument("--dt-ladder", action="store_true", help="halve the fixed time step at the config's mesh")
    p.add_argument("--reference", default=None,
                   help="'exact', 'finest' or a finer run directory (default: exact; finest with --dt-ladder)")
    _add_common(p)
    p.set_defaults(handler=_cmd_convergence)


#: Each registers one subcommand; add new commands here.
COMMANDS: list[Callable] = [_add_run, _add_mesh, _add_info, _add_particles, _add_validate, _add_convergence]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="meanfield", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``meanfield`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        args.handler(args)
    except INPUT_ERRORS as exc:
        _echo(f"error: {exc}")
        return 2
    except RuntimeError as exc:
        _echo(f"error: the run failed: {exc}")
        return 1
    except Exception as exc:
        # unexpected, possibly raised on this rank alone (a failed write, say): the other ranks
        # may be waiting in a collective, so end them all rather than hang
        print(f"error on rank {_rank()}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        if "mpi4py" in sys.modules:
            from mpi4py import MPI

            if MPI.COMM_WORLD.size > 1:
                MPI.COMM_WORLD.Abort(1)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
