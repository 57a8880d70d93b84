"""``meanfield mesh``: a sphere mesh file."""

from __future__ import annotations

import argparse

from ..spheres import SPHERES, sphere_named
from .options import Options, Subparsers, add_memory_check, add_overwrite, add_quiet
from .terminal import echo


def add_parser(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("mesh", help="write a sphere mesh file (any format meshio writes)")
    p.add_argument("sphere", choices=sorted(SPHERES))
    for sphere in SPHERES.values():  # what sets the size of its mesh, and the default
        p.add_argument(f"--{sphere.size_word}", type=int, default=None,
                       help=f"{sphere.name} only: {sphere.size_meaning} (default {sphere.mesh_command_default})")
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
    described = sphere_named(args.sphere)
    for other in (s.size_word for s in SPHERES.values() if s is not described):
        if getattr(args, other) is not None:
            raise ConfigError(f"--{other}: {args.sphere} meshes take --{described.size_word} "
                              f"({described.size_meaning})")
    size = getattr(args, described.size_word)

    def write() -> str:
        mesh = make_mesh_file(args.sphere, size if size is not None else described.mesh_command_default,
                              args.output, overwrite=options.overwrite)
        return f"wrote {args.output}: {args.sphere}, {len(mesh.cells)} cells, {len(mesh.points)} vertices"

    echo(on_root(comm, write))
