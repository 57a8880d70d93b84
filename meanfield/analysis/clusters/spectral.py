"""The spectral S^1 reference (:mod:`meanfield.references.spectral_circle`) as a cluster field.

The analysis mesh has one cell per grid angle (the circle of N segments turned by half a
segment, so that cell centroids are the grid angles and the watershed sees the grid values).
Everything else is computed on the trigonometric interpolant: peaks by Newton's method on
rho' = 0, region ends at the minima of rho (Newton from the boundary between two labelled
cells), masses and second moments by exact integration of the Fourier series between them.
"""

from __future__ import annotations

import numpy as np

from ...mesh import RawMesh
from ...references.spectral_circle import CircleSolution
from .cells import AnalysisMesh
from .fields import Field

NEWTON_STEPS = 30


def grid_mesh(n: int) -> AnalysisMesh:
    """The circle of n segments whose centroids are the angles ``2 pi j / n``."""
    angles = 2.0 * np.pi * (np.arange(n) - 0.5) / n
    cells = np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1)
    return AnalysisMesh(RawMesh(np.stack([np.cos(angles), np.sin(angles)], axis=1), cells))


class FourierField(Field):
    """Output i of a :class:`CircleSolution` (module docstring); ``mesh`` from :func:`grid_mesh`."""

    source = "spectral"

    def __init__(self, mesh: AnalysisMesh, solution: CircleSolution, i: int) -> None:
        if mesh.num_cells != solution.modes:
            raise ValueError(f"the mesh has {mesh.num_cells} cells, the solution {solution.modes} angles")
        self.mesh, self.solution, self.i = mesh, solution, i
        self.values = solution.values[i]

    def _critical(self, theta: float, sign: float) -> float:
        """Newton on rho' = 0 from theta towards a maximum (sign -1) or minimum (+1); theta if it fails."""
        x, h = theta, 2.0 * np.pi / self.solution.modes
        for _ in range(NEWTON_STEPS):
            d1, d2 = (float(self.solution.evaluate(self.i, x, k)[0]) for k in (1, 2))
            if sign * d2 <= 0:
                return theta
            step = d1 / d2
            x -= step
            if abs(x - theta) > 2.0 * h:
                return theta
            if abs(step) < 1e-15:
                break
        return x

    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        theta = self._critical(2.0 * np.pi * cell / self.solution.modes, -1.0)
        return np.array([np.cos(theta), np.sin(theta)]), float(self.solution.evaluate(self.i, theta)[0])

    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.solution.modes
        h = 2.0 * np.pi / n
        masses, widths = np.zeros(len(positions)), np.zeros(len(positions))
        ends = np.flatnonzero(labels != np.roll(labels, -1))  # label changes between cell j and j + 1
        for p, x in enumerate(positions):
            centre = float(np.arctan2(x[1], x[0]))
            mine = ends[(labels[ends] == p) | (labels[(ends + 1) % n] == p)]
            if not len(mine):
                a, b = centre - np.pi, centre + np.pi
            else:
                cuts = [self._critical((j + 0.5) * h, 1.0) for j in mine]
                # the region's arc runs from its start (label changes *into* p) to its end
                start = next(c for j, c in zip(mine, cuts) if labels[(j + 1) % n] == p)
                stop = next(c for j, c in zip(mine, cuts) if labels[j] == p)
                a = centre - np.mod(centre - start, 2.0 * np.pi)
                b = centre + np.mod(stop - centre, 2.0 * np.pi)
            mass, second = self.solution.integrals(self.i, a, b, centre)
            masses[p], widths[p] = mass, np.sqrt(second / mass)
        return masses, widths
