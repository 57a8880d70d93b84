"""Ladders of nested meshes, halved time steps or doubled position slices: levels, widths,
conservative transfer, runs.

Finer solutions reach coarser meshes by the conservative transfer of nested meshes: the
children of cell c of an S^2 level with n cells are c, c + n, c + 2n, c + 3n at the next
level (:func:`meanfield.mesh.icosphere`), those of S^1 segment c are 2c and 2c + 1, and the
parent's average is the measure-weighted mean of its children's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...config import Config, load_config
from ...masks import whole_measure
from ...problem import Problem
from ...rundir.results import PDERunResult
from ...spheres import sphere_named


class ConvergenceError(ValueError):
    """A study that cannot be done as asked (bad levels, a non-nested mesh, no exact solution...)."""


#: What a ladder refines: the mesh (nested levels), the fixed time step (halved), or the
#: position slices of a causal run (the level is the slice count M; the width is 1/M).
AXES = ("mesh", "dt", "slices")
#: The x axis of each ladder's plot and table.
WIDTH_NAMES = {"mesh": "h", "dt": "dt", "slices": "1/M"}




def parse_slices(text: str) -> list[int]:
    """``"8,16,32"`` -> [8, 16, 32]: the slice counts of a slices ladder (increasing, >= 1)."""
    try:
        slices = [int(v) for v in text.split(",")]
    except ValueError:
        raise ConvergenceError(f"--slices: expected a comma list of slice counts such as 8,16,32, got {text!r}") \
            from None
    if len(slices) < 2 or slices != sorted(set(slices)) or slices[0] < 1:
        raise ConvergenceError(f"--slices: need at least two increasing slice counts >= 1, got {text!r}")
    return slices


def parse_levels(text: str) -> list[int]:
    """``"3:6"`` -> [3, 4, 5, 6] (inclusive); ``"3,5"`` -> [3, 5]."""
    try:
        if ":" in text:
            lo, hi = (int(v) for v in text.split(":"))
            levels = list(range(lo, hi + 1))
        else:
            levels = [int(v) for v in text.split(",")]
    except ValueError:
        raise ConvergenceError(f"--levels: expected FIRST:LAST or a comma list, got {text!r}") from None
    if len(levels) < 2 or levels != sorted(set(levels)) or levels[0] < 0:
        raise ConvergenceError(f"--levels: need at least two increasing levels >= 0, got {text!r}")
    return levels


def resolution(sphere: str, level: int) -> int:
    """The ``mesh.resolution`` of a ladder level (S^2: the level, S^1: 2**level cells)."""
    return sphere_named(sphere).ladder_resolution(level)


def level_of(sphere: str, cells: int) -> int:
    """Inverse of the cell count of a ladder level."""
    level = sphere_named(sphere).ladder_level(cells)
    if level is None:
        raise ConvergenceError(f"{cells} cells is not a nested {sphere} ladder level")
    return int(level)


def mesh_width(sphere: str, cells: int) -> float:
    """h = sqrt(|S^2| / cells) on S^2, 2 pi / cells on S^1."""
    return sphere_named(sphere).mesh_width(cells)


def coarsen(values: np.ndarray, areas: np.ndarray, sphere: str, times: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Conservative transfer of cell averages ``times`` levels down the nested ladder.

    Parameters
    ----------
    values
        (T, cells) cell averages in global order.
    areas
        (cells,) cell measures.

    Returns
    -------
    values, areas
        The parents' averages (T, cells / 4**times or / 2**times) and measures.
    """
    for _ in range(times):
        mass, areas = sphere_named(sphere).parents(values * areas, areas)
        values = mass / areas
    return values, areas


@dataclass
class Ladder:
    """The runs of a study and what each was run with (a causal run as its whole token
    distribution, :func:`~meanfield.masks.whole_measure`)."""

    problem: Problem
    levels: list[int]
    results: list[PDERunResult]
    axis: str = "mesh"

    @property
    def sphere(self) -> str:
        return self.problem.sphere

    def cells(self, i: int) -> int:
        return len(self.results[i].areas)

    def step(self, i: int) -> float:
        result = self.results[i]
        fixed = result.header.dt
        return float(fixed) if fixed else float(result.times[-1] / max(result.metadata["steps"]["steps"], 1))

    def width(self, i: int) -> float:
        if self.axis == "slices":
            return 1.0 / self.levels[i]
        return self.step(i) if self.axis == "dt" else mesh_width(self.sphere, self.cells(i))

    def transfer(self, ref: PDERunResult, i: int) -> np.ndarray:
        """A finer run's densities on the mesh of run i."""
        if self.axis != "mesh":
            return ref.densities
        steps = level_of(self.sphere, len(ref.areas)) - level_of(self.sphere, self.cells(i))
        if steps < 0:
            raise ConvergenceError(f"the reference {ref.path} is coarser than level {self.levels[i]}")
        return coarsen(ref.densities, ref.areas, self.sphere, steps)[0]


def level_name(level: int, axis: str) -> str:
    """A level's run directory and name suffix: ``level<L>``, or ``slices<M>`` on a slices ladder."""
    return f"slices{level}" if axis == "slices" else f"level{level}"


def level_config(problem: Problem, level: int, axis: str = "mesh") -> Config:
    """The config of one ladder level: the mesh resolution, the fixed step or the slices of that level."""
    config = problem.config
    if axis == "dt":
        if problem.time.dt is None:
            raise ConvergenceError("--dt-ladder: set time.dt (the step of level 0) in the config")
        override = f"time.dt={problem.time.dt / 2**level!r}"
    elif axis == "slices":
        if not problem.mask.slices:
            raise ConvergenceError("--slices: refines the token positions of a causal run; set model.mask = "
                                   "'causal' in the config")
        override = f"positions.slices={level}"
    else:
        override = f"mesh.resolution={resolution(problem.sphere, level)}"
    data = copy.deepcopy(config.data)
    data["mesh"]["file"] = data["mesh"]["file"] if axis != "mesh" else None
    data["name"] = f"{config.data['name']}-{level_name(level, axis)}"
    return load_config(data, [override])


def ladder_configs(problem: Problem, levels: list[int], axis: str = "mesh") -> list[Config]:
    """The config of every level, each checked as ``meanfield run`` checks a config (raises ValueError
    naming the field; what only its problem's build can check is checked by :func:`ladder_problems`)."""
    return [level_config(problem, level, axis) for level in levels]


def ladder_problems(problem: Problem, levels: list[int], axis: str = "mesh",
                    configs: list[Config] | None = None) -> list[Problem]:
    """The problem of every level's run, each built once (from ``configs``, the levels' configs of
    :func:`ladder_configs` when already made)."""
    return [Problem(config) for config in (configs or ladder_configs(problem, levels, axis))]


def run_ladder(problem: Problem, levels: list[int], out: Path, axis: str = "mesh", comm=None,
               quiet: bool = True, overwrite: bool = False, problems: list[Problem] | None = None) -> Ladder:
    """Run every level (each on all ranks of ``comm``) into ``out/level<L>`` (``out/slices<M>``)
    and read the runs back; ``problems``: the levels' problems (:func:`ladder_problems`) when built."""
    from ...drivers.pde import run

    results = [whole_measure(run(level_problem, out=Path(out) / level_name(level, axis), comm=comm, quiet=quiet,
                              overwrite=overwrite))
            for level, level_problem in zip(levels, problems or ladder_problems(problem, levels, axis), strict=True)]
    return Ladder(problem, levels, results, axis)
