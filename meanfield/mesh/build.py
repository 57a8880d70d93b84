"""The raw mesh a ``[mesh]`` config section describes: generated, or read from a file."""

from __future__ import annotations

from pathlib import Path

from ..spheres import sphere_named
from .files import read_mesh_file
from .raw import GENERATORS, SPHERES, MeshError, RawMesh


def raw_mesh(sphere: str, resolution: int | None = None, file: str | Path | None = None) -> RawMesh:
    """The raw mesh a ``[mesh]`` config section describes (serial, no dolfinx)."""
    if sphere not in SPHERES:
        raise MeshError(f"mesh.sphere: must be one of {sorted(SPHERES)}, got {sphere!r}")
    if file is not None:
        return read_mesh_file(file, sphere)
    if resolution is None:
        raise MeshError("mesh.resolution: give a resolution or a file")
    return GENERATORS[sphere_named(sphere).mesh_generator](int(resolution))
