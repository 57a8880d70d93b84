"""The spheres a PDE run meshes (``mesh.sphere``): one descriptor each, S^1 and S^2.

Everything that differs between the two lives here (:class:`Sphere`), below every floor and
without numpy, so that the configuration's names and defaults and the command line's options
take it as cheaply as the mesh, the planner, the convergence ladder, the memory estimate and the
pictures: none of them tests the sphere's name.  :mod:`meanfield.sphere` has the geometry.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import numpy as np


def sphere_area(d: int) -> float:
    """|S^{d-1}| = 2 pi^{d/2} / Gamma(d/2); by logarithms above d = 300 (Gamma overflows at d = 344);
    from d = 439 on the area underflows to 0 (1e-909 at d = 1024): densities are then sampled, never evaluated."""
    if d <= 300:
        return 2.0 * math.pi ** (d / 2) / math.gamma(d / 2)
    return math.exp(math.log(2.0) + 0.5 * d * math.log(math.pi) - math.lgamma(0.5 * d))


@dataclass(frozen=True)
class Sphere(ABC):
    """Everything that differs between the spheres a PDE run meshes (``mesh.sphere``).

    One descriptor per sphere (:data:`SPHERES`, :func:`sphere_named`); the mesh, the config's
    defaults, the planner, the convergence ladder, the memory estimate and the pictures ask it
    rather than test the sphere's name.

    Attributes
    ----------
    name
        ``mesh.sphere``: ``"S1"`` or ``"S2"``.
    d
        The ambient dimension (tokens on S^{d-1} in R^d).
    mesh_generator
        The generator of :mod:`meanfield.mesh.raw` that meshes it from ``mesh.resolution``.
    cell_type
        The mesh files' (meshio's) cell type.
    size_word, size_meaning
        What ``mesh.resolution`` counts (``"level"``, ``"cells"``: the ``meanfield mesh`` option
        ``--level`` / ``--cells``), in words.
    smallest_size
        The smallest resolution the generator takes.
    default_resolution
        ``mesh.resolution`` when a config gives neither it nor a file.
    mesh_command_default
        The size ``meanfield mesh`` writes when given none.
    default_initial
        The ``[initial]`` table of a config without one: three von Mises-Fisher bumps that merge
        into one cluster.
    core_cells
        The default capture core (``atoms.core_cells``) as (cells, of the reference mesh's cells),
        so that a core is captured at the same width on any mesh.
    bytes_per_cell
        Peak resident bytes per cell of a PDE run by ``scheme.kind``, one rank
        (:mod:`meanfield.memory`, where the measurements are).
    plot_coordinates
        The coordinates of a point in the pictures and cluster tables.
    density_unit
        The density's unit: per radian or per steradian.
    pilot_resolution
        The smallest ``mesh.resolution`` of ``meanfield check``'s pilot run (:mod:`meanfield.drivers.planning`).
    """

    name: str
    d: int
    mesh_generator: str
    cell_type: str
    size_word: str
    size_meaning: str
    smallest_size: int
    default_resolution: int
    mesh_command_default: int
    default_initial: dict
    core_cells: tuple[int, int]
    bytes_per_cell: dict[str, float]
    plot_coordinates: tuple[str, ...]
    density_unit: str
    pilot_resolution: int

    @abstractmethod
    def cells(self, resolution: int) -> int:
        """Cells of the generated mesh of ``resolution``, without building it."""

    @abstractmethod
    def vertices(self, cells: int) -> int:
        """Vertices of a generated mesh of ``cells`` cells."""

    @abstractmethod
    def coarsened(self, resolution: int, factor: int) -> int:
        """The resolution of a generated mesh about ``factor`` times coarser (in mesh width) than ``resolution``'s."""

    def level(self, resolution: int) -> int | None:
        """The refinement level of the generated mesh of ``resolution``, where the resolution is one."""
        return None

    @abstractmethod
    def ladder_resolution(self, level: int) -> int:
        """The ``mesh.resolution`` of level ``level`` of the nested ladder of the convergence study."""

    def ladder_level(self, cells: int) -> int | None:
        """The level of the nested ladder with ``cells`` cells, or ``None`` if none has."""
        level = round(math.log(cells / self.cells(self.ladder_resolution(0))) / math.log(self.children))
        return level if self.cells(self.ladder_resolution(level)) == cells else None

    #: Cells a cell of the ladder splits into at the next level.
    children: ClassVar[int]

    @abstractmethod
    def parents(self, mass: np.ndarray, areas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The masses (T, cells / children) and measures of the parents one ladder level down of
        cells with ``mass`` (T, cells) and ``areas`` (cells,) in global order."""

    @property
    def dimension(self) -> int:
        """The sphere's own dimension ``d - 1``: a curve (1) or a surface (2).

        What follows from it is not a sphere's name: a curve's pictures plot the density against
        its angle and its cluster regions meet at points; a surface's are maps, its regions meet
        along edges.
        """
        return self.d - 1

    def coarsening(self, fine: int, coarse: int) -> float:
        """How many times wider the cells of the generated mesh of resolution ``coarse`` are than ``fine``'s."""
        return float((self.cells(fine) / self.cells(coarse)) ** (1.0 / self.dimension))

    def mesh_width(self, cells: int) -> float:
        """``h = (|S^{d-1}| / cells)^(1/(d-1))``: 2 pi / cells on S^1, sqrt(4 pi / cells) on S^2."""
        return float((sphere_area(self.d) / cells) ** (1.0 / (self.d - 1)))

    @property
    def uniform_density(self) -> float:
        """The uniform probability density ``1 / |S^{d-1}|``."""
        return 1.0 / sphere_area(self.d)


@dataclass(frozen=True)
class Circle(Sphere):
    """S^1, meshed by ``resolution`` equal segments."""

    children: ClassVar[int] = 2

    def cells(self, resolution: int) -> int:
        return int(resolution)

    def coarsened(self, resolution: int, factor: int) -> int:
        return int(resolution) // factor

    def vertices(self, cells: int) -> int:
        return cells

    def ladder_resolution(self, level: int) -> int:
        return 2**level

    def parents(self, mass: np.ndarray, areas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Neighbouring pairs of segments."""
        return mass.reshape(-1, areas.size // 2, 2).sum(axis=2), areas.reshape(-1, 2).sum(axis=1)


@dataclass(frozen=True)
class Icosphere(Sphere):
    """S^2, meshed by the icosphere of refinement level ``resolution`` (20 * 4**level triangles)."""

    children: ClassVar[int] = 4

    def cells(self, resolution: int) -> int:
        return 20 * 4 ** int(resolution)

    def coarsened(self, resolution: int, factor: int) -> int:
        return int(resolution) - round(math.log2(factor))

    def vertices(self, cells: int) -> int:
        return cells // 2 + 2

    def level(self, resolution: int) -> int | None:
        return resolution

    def ladder_resolution(self, level: int) -> int:
        return level

    def parents(self, mass: np.ndarray, areas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A level's four children of a triangle are its four blocks of cells."""
        n = areas.size // 4
        return mass.reshape(-1, 4, n).sum(axis=1), areas.reshape(4, n).sum(axis=0)


S1 = Circle(
    name="S1", d=2, mesh_generator="circle", cell_type="line", size_word="cells",
    size_meaning="the number of segments", smallest_size=3, default_resolution=256, mesh_command_default=256,
    default_initial={"kind": "vmf", "centers": [[1.0, 0.0], [-0.5, 0.8], [-0.6, -0.8]],
                     "kappas": [4.0, 4.0, 4.0], "weights": [1.0, 1.0, 1.0]},
    core_cells=(3, 1024), bytes_per_cell={"fv": 550.0, "dg1": 1400.0},
    plot_coordinates=("theta",), density_unit="rad", pilot_resolution=64,
)
S2 = Icosphere(
    name="S2", d=3, mesh_generator="icosphere", cell_type="triangle", size_word="level",
    size_meaning="the icosphere refinement level", smallest_size=0, default_resolution=4, mesh_command_default=3,
    default_initial={"kind": "vmf", "centers": [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, -0.2]],
                     "kappas": [2.0, 2.0, 2.0], "weights": [1.0, 1.0, 1.0]},
    core_cells=(7, 4 ** 4 * 20), bytes_per_cell={"fv": 1100.0, "dg1": 4000.0},
    plot_coordinates=("lon", "lat"), density_unit="sr", pilot_resolution=3,
)
#: The spheres by ``mesh.sphere``, the default first.
SPHERES: dict[str, Sphere] = {s.name: s for s in (S2, S1)}
#: ``mesh.sphere`` of a config that names none.
DEFAULT_SPHERE = S2


def sphere_named(name: str) -> Sphere:
    """The descriptor of ``mesh.sphere = name`` (``KeyError`` for an unknown name: configs are checked)."""
    return SPHERES[name]


def sphere_of_dimension(d: int) -> Sphere | None:
    """The descriptor of the sphere in R^d, or ``None`` (tokens in d > 3 have no mesh)."""
    return next((s for s in SPHERES.values() if s.d == d), None)
