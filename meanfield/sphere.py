"""Pure-numpy geometry of the unit sphere S^{d-1} and of flat cells inscribed in it, and the
descriptors of the spheres a PDE run meshes (:class:`Sphere`: S^1 and S^2).

Shared by the PDE schemes, the particle samplers and the studies (none of which should
import another's internals): unit vectors, the sphere's measure, flat cell measures and the
degree-4 cell quadrature used for initial cell averages and exact references.

Cell averages of a density f on the sphere are computed as ``(1/|c|) int_c f(x/|x|) dA``
over the flat cell ``c`` with a degree-4 rule (6-point Dunavant on triangles, 3-point Gauss
on segments): exact for polynomials of degree 4 on the flat cell, so the averages are
accurate to O(h^2) and better than the schemes that use them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from math import gamma, pi
from typing import ClassVar

import numpy as np


def normalize(v: np.ndarray) -> np.ndarray:
    """Rows of ``v`` scaled to unit length."""
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def subsample(points: np.ndarray, max_points: int, seed: int = 0) -> np.ndarray:
    """At most ``max_points`` of the points (rows), a uniform subsample of a fixed seed, in order."""
    if len(points) <= max_points:
        return points
    return points[np.sort(np.random.default_rng(seed).choice(len(points), max_points, replace=False))]


def sphere_area(d: int) -> float:
    """|S^{d-1}| = 2 pi^{d/2} / Gamma(d/2)."""
    return 2.0 * pi ** (d / 2) / gamma(d / 2)


def cell_measure(vertices: np.ndarray) -> np.ndarray:
    """Length (S^1) or area (S^2) of flat cells given their vertices (n, nv, d)."""
    if vertices.shape[2] == 2:
        return np.linalg.norm(vertices[:, 1] - vertices[:, 0], axis=1)
    return 0.5 * np.linalg.norm(
        np.cross(vertices[:, 1] - vertices[:, 0], vertices[:, 2] - vertices[:, 0]), axis=1
    )


_A, _WA = 0.445948490915965, 0.223381589678011
_B, _WB = 0.091576213509771, 0.109951743655322
TRIANGLE_BARYCENTRIC = np.array(
    [[_A, _A, 1 - 2 * _A], [_A, 1 - 2 * _A, _A], [1 - 2 * _A, _A, _A],
     [_B, _B, 1 - 2 * _B], [_B, 1 - 2 * _B, _B], [1 - 2 * _B, _B, _B]]
)
TRIANGLE_WEIGHTS = np.array([_WA] * 3 + [_WB] * 3)
_G = np.sqrt(3.0 / 5.0)
SEGMENT_BARYCENTRIC = np.array([[(1 + s) / 2, (1 - s) / 2] for s in (-_G, 0.0, _G)])
SEGMENT_WEIGHTS = np.array([5.0, 8.0, 5.0]) / 18.0


def cell_rule(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Barycentric points and weights (summing to 1) of the cell rule for S^{d-1}."""
    return (TRIANGLE_BARYCENTRIC, TRIANGLE_WEIGHTS) if d == 3 else (SEGMENT_BARYCENTRIC, SEGMENT_WEIGHTS)


def cell_quadrature_points(vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature points on the sphere (cells, q, d) and weights (q,) summing to 1."""
    bary, weights = cell_rule(vertices.shape[2])
    return normalize(np.einsum("qv,cvd->cqd", bary, vertices)), weights


def cell_averages(f, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Averages of ``f`` (points (n, d) -> values (n,)) over flat cells, evaluated radially.

    Returns
    -------
    values
        (cells, q): ``f`` at the quadrature points, for callers to check.
    averages
        (cells,): the cell averages.
    """
    points, weights = cell_quadrature_points(vertices)
    values = np.asarray(f(points.reshape(-1, points.shape[2])), dtype=float).reshape(points.shape[:2])
    return values, values @ weights


# -- the spheres a run meshes ----------------------------------------------------------------


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

    @abstractmethod
    def cells(self, resolution: int) -> int:
        """Cells of the generated mesh of ``resolution``, without building it."""

    @abstractmethod
    def vertices(self, cells: int) -> int:
        """Vertices of a generated mesh of ``cells`` cells."""

    def level(self, resolution: int) -> int | None:
        """The refinement level of the generated mesh of ``resolution``, where the resolution is one."""
        return None

    @abstractmethod
    def ladder_resolution(self, level: int) -> int:
        """The ``mesh.resolution`` of level ``level`` of the nested ladder of the convergence study."""

    def ladder_level(self, cells: int) -> int | None:
        """The level of the nested ladder with ``cells`` cells, or ``None`` if none has."""
        level = round(np.log(cells / self.cells(self.ladder_resolution(0))) / np.log(self.children))
        return level if self.cells(self.ladder_resolution(level)) == cells else None

    #: Cells a cell of the ladder splits into at the next level.
    children: ClassVar[int]

    @abstractmethod
    def parents(self, mass: np.ndarray, areas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The masses (T, cells / children) and measures of the parents one ladder level down of
        cells with ``mass`` (T, cells) and ``areas`` (cells,) in global order."""

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
    plot_coordinates=("theta",), density_unit="rad",
)
S2 = Icosphere(
    name="S2", d=3, mesh_generator="icosphere", cell_type="triangle", size_word="level",
    size_meaning="the icosphere refinement level", smallest_size=0, default_resolution=4, mesh_command_default=3,
    default_initial={"kind": "vmf", "centers": [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, -1.0, -0.2]],
                     "kappas": [2.0, 2.0, 2.0], "weights": [1.0, 1.0, 1.0]},
    core_cells=(7, 4 ** 4 * 20), bytes_per_cell={"fv": 1100.0, "dg1": 4000.0},
    plot_coordinates=("lon", "lat"), density_unit="sr",
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
