"""``meanfield mesh``: a sphere mesh file."""

from __future__ import annotations

import argparse

from .options import Options, Subparsers, add_memory_check, add_overwrite, add_quiet
from .terminal import echo

#: What sets the size of a mesh of each sphere, and its default.
MESH_SIZES = {"S2": "the icosphere refinement level", "S1": "the number of segments"}
MESH_DEFAULTS = {"S2": 3, "S1": 256}


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("mesh", help="write a sphere mesh file (any format meshio writes)")
    p.add_argument("sphere", choices=["S1", "S2"])
    p.add_argument("--level", type=int, default=None, help=f"S2 only: {MESH_SIZES['S2']} (default "
                   f"{MESH_DEFAULTS['S2']})")
    p.add_argument("--cells", type=int, default=None, help=f"S1 only: {MESH_SIZES['S1']} (default "
                   f"{MESH_DEFAULTS['S1']})")
    p.add_argument("-o", "--output", required=True, help="output file, e.g. sphere.msh or sphere.vtu")
    add_overwrite(p, "replace an existing output file")
    add_quiet(p, "(accepted for symmetry: mesh prints only the line naming the file)")
    add_memory_check(p)
    p.set_defaults(handler=main)


def main(args: argparse.Namespace, options: Options) -> None:
    from ..collective import on_root
    from ..config import ConfigError
    from ..mesh import make_mesh_file

    comm = options.comm  # MPI starts here, before any work
    given, other = ("level", "cells") if args.sphere == "S2" else ("cells", "level")
    if getattr(args, other) is not None:
        raise ConfigError(f"--{other}: {args.sphere} meshes take --{given} ({MESH_SIZES[args.sphere]})")
    size = getattr(args, given)

    def write() -> str:
        mesh = make_mesh_file(args.sphere, size if size is not None else MESH_DEFAULTS[args.sphere], args.output,
                              overwrite=options.overwrite)
        return f"wrote {args.output}: {args.sphere}, {len(mesh.cells)} cells, {len(mesh.points)} vertices"

    echo(on_root(comm, write))
