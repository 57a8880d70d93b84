"""Sphere meshes: generation, files, checks, point location and distribution over MPI ranks.

* S^2: the icosahedral sphere at refinement level L (``20 * 4**L`` flat triangles, vertices
  on the unit sphere), or any triangle mesh that meshio reads (gmsh ``.msh``, ``.vtu``, ...).
* S^1: ``N`` equal segments of the unit circle embedded in R^2, or a line mesh from a file.

Raw meshes (:mod:`.raw`) are numpy arrays on one rank; :mod:`.distributed` hands them to
dolfinx (imported only then).  Importing this package does not import dolfinx.
"""

from .build import raw_mesh
from .checks import ON_SPHERE_TOL, check_on_sphere, check_sphere_mesh
from .distributed import distribute, load_distributed
from .files import check_mesh_output, make_mesh_file, read_mesh_file, write_mesh_file
from .locate import CellLocator
from .raw import SPHERES, MeshError, RawMesh, circle, icosphere

__all__ = [
    "ON_SPHERE_TOL",
    "SPHERES",
    "CellLocator",
    "MeshError",
    "RawMesh",
    "check_mesh_output",
    "check_on_sphere",
    "check_sphere_mesh",
    "circle",
    "distribute",
    "icosphere",
    "load_distributed",
    "make_mesh_file",
    "raw_mesh",
    "read_mesh_file",
    "write_mesh_file",
]
