"""Sphere meshes in files (any format meshio reads or writes)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from ..spheres import SPHERES, sphere_named
from .checks import check_sphere_mesh
from .raw import MeshError, RawMesh


def read_mesh_file(path: str | Path, sphere: str | None = None) -> RawMesh:
    """Read a sphere mesh with meshio and check it.

    Triangles make an S^2 mesh (3D points), lines an S^1 mesh (the z column is dropped when
    all zero).  Anything that is not a mesh covering the unit sphere once is refused with a
    :class:`MeshError` naming the file (:func:`meanfield.mesh.checks.check_sphere_mesh`).
    """
    import meshio

    path = Path(path)
    if not path.is_file():
        raise MeshError(f"mesh.file: no such file: {path}")
    chatter = io.StringIO()
    try:  # meshio prints to the terminal and calls sys.exit on some unreadable files
        with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
            m = meshio.read(path)
    except (Exception, SystemExit) as exc:
        said = " ".join(chatter.getvalue().split())
        detail = str(exc) if str(exc) not in ("", "1") else said
        raise MeshError(f"mesh.file: meshio cannot read {path} as a mesh" + (f" ({detail})" if detail else "")) \
            from None
    # the sphere's own cells first, then the others' (the check below names a mismatch)
    own = None if sphere is None else sphere_named(sphere).cell_type
    wanted = sorted((s.cell_type for s in SPHERES.values()), key=lambda c: c != own)
    cell_type = next((c for c in wanted if c in m.cells_dict), None)
    if cell_type is None:
        raise MeshError(f"mesh.file: {path} has no {' or '.join(wanted)} cells")
    cells = np.asarray(m.cells_dict[cell_type], dtype=np.int64)
    pts = np.asarray(m.points, dtype=float)
    if cells.size == 0 or cells.min() < 0 or cells.max() >= len(pts):
        raise MeshError(f"mesh.file: {path}: cell vertex indices must lie in [0, {len(pts)})")
    d = 3 if cell_type == "triangle" else 2
    if pts.shape[1] > d:
        if np.any(pts[:, d:] != 0):
            raise MeshError(f"mesh.file: {path} has line cells but points outside the plane z = 0")
        pts = pts[:, :d]
    used = np.unique(cells)  # drop points no cell uses (gmsh keeps geometry nodes)
    renumber = np.full(len(pts), -1, dtype=np.int64)
    renumber[used] = np.arange(len(used))
    raw = RawMesh(np.ascontiguousarray(pts[used]), renumber[cells])
    if sphere is not None and raw.sphere != sphere:
        raise MeshError(f"mesh.file: {path} is an {raw.sphere} mesh but mesh.sphere = {sphere!r}")
    check_sphere_mesh(raw.points, raw.cells, f"mesh.file ({path})")
    return raw


def check_mesh_output(path: str | Path, *, overwrite: bool = False) -> Path:
    """Refuse an output file ``meanfield mesh`` may not write (MeshError naming ``-o``); nothing is written.

    The format must be one meshio writes (from the extension), the folder must exist, and an
    existing file is replaced only with ``overwrite``.
    """
    import meshio

    path = Path(path)
    if not any(path.name.endswith(ext) for ext in meshio.extension_to_filetypes):
        raise MeshError(f"-o {path}: unknown mesh format {path.suffix!r}; use an extension meshio writes, "
                        "e.g. .msh, .vtu, .xdmf")
    if not path.parent.is_dir():
        raise MeshError(f"-o {path}: the folder {path.parent} does not exist")
    if path.is_dir() or (path.exists() and not overwrite):
        raise MeshError(f"-o {path}: exists; pass --overwrite to replace it" if not path.is_dir()
                        else f"-o {path}: is a folder")
    return path


def write_mesh_file(path: str | Path, mesh: RawMesh) -> None:
    """Write a raw mesh with meshio (format from the file extension)."""
    import meshio

    cell_type = "triangle" if mesh.points.shape[1] == 3 else "line"
    pts = mesh.points if cell_type == "triangle" else np.column_stack([mesh.points, np.zeros(len(mesh.points))])
    path = Path(path)
    fmt = "gmsh" if path.suffix == ".msh" else None  # meshio would pick ANSYS for .msh
    meshio.write(path, meshio.Mesh(pts, [(cell_type, mesh.cells)]), file_format=fmt)


def make_mesh_file(sphere: str, size: int, path: str | Path, *, overwrite: bool = False) -> RawMesh:
    """Generate a sphere mesh and write it (``meanfield mesh``); everything is checked first.

    Parameters
    ----------
    sphere
        ``mesh.sphere`` (``size``: what its descriptor's ``size_word`` says, :mod:`meanfield.spheres`).
    path
        Output file (:func:`check_mesh_output`).

    Raises
    ------
    MeshError
        A level below 0, fewer than 3 cells, or a bad output file, naming the option.
    meanfield.memory.MemoryEstimateError
        A mesh bigger than the memory available (:mod:`meanfield.memory`).
    """
    from ..memory import cells_of, check_memory, mesh_estimate
    from .raw import GENERATORS

    described = sphere_named(sphere)
    option = f"--{described.size_word}"
    if isinstance(size, bool) or not isinstance(size, int) or size < described.smallest_size:
        raise MeshError(f"{option}: must be an integer >= {described.smallest_size}, got {size!r}")
    path = check_mesh_output(path, overwrite=overwrite)
    check_memory(mesh_estimate(sphere, cells_of(sphere, size), f"{option} {size}"))
    mesh = GENERATORS[described.mesh_generator](size)
    write_mesh_file(path, mesh)
    return mesh
