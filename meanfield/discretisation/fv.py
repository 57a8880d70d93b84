"""Cell-average finite volumes (DG0) with an upwind flux, on flat sphere meshes.

For each cell c with flat measure |c| and average rho_c,

    |c| d rho_c / dt = - sum_{facets e of c} |e| u_e^{out} rho_upwind,

where ``u_e = X(m_e) . n_e`` is the attention velocity at the facet midpoint ``m_e`` (on the
sphere) in the direction of the facet's single-valued great-circle normal ``n_e``
(:mod:`.geometry`).  Each facet flux is added to one cell and subtracted from the other, so
mass is conserved to round-off; a forward-Euler step with ``dt * max_c (sum_e |e| u_e^+ / |c|)
<= 1`` keeps the averages non-negative, which SSP Runge-Kutta inherits.

The velocity is evaluated with the cell centroids (projected onto the sphere) weighted by
the cell masses as the source measure: the centroid rule is second-order accurate.
Fluxes are computed in numpy over the facets (dolfinx partitions and exchanges ghosts); ghost
averages are refreshed through a DG0 Function's scatter.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..choices import SCHEME_DESCRIPTIONS
from ..model import VelocityField
from ..nonlocal_field.base import components
from .base import SpatialScheme, normalised_cell_averages
from .geometry import MeshGeometry

#: About how many facet values (facets times states) :meth:`FiniteVolumeScheme._upwind` takes at a
#: time (measured on S^2 level 4 with 64 states: 16384-32768 alike, 3x faster than all at once).
UPWIND_BLOCK = 16384


def _owned_cells_of(cells: np.ndarray, owned: int):
    """The sparse (owned, facets) matrix with a one at (cells[e], e) where that cell is owned."""
    from scipy import sparse

    facets = np.flatnonzero(cells < owned)
    return sparse.csr_matrix((np.ones(facets.size), (cells[facets], facets)), shape=(owned, cells.size))


class FiniteVolumeScheme(SpatialScheme):
    """First-order upwind finite volumes; state = owned cell averages."""

    name = "fv"
    description = SCHEME_DESCRIPTIONS[name]
    order = 1

    @staticmethod
    def velocity_components(d: int) -> int:
        return 1  # the flow |e| u . n_e through each facet

    def __init__(self, msh, velocity: VelocityField, geometry: MeshGeometry | None = None) -> None:
        from scipy import sparse

        super().__init__(msh, velocity, geometry)
        g = self.geometry
        self._targets = g.facet_midpoint
        self._left, self._right = g.facet_cells[:, 0], g.facet_cells[:, 1]
        self._sources = np.ascontiguousarray(g.centroid[: g.num_owned])
        self._area = g.measure[: g.num_owned]
        self._flow_directions = g.facet_measure[:, None] * g.facet_normal  # (F, d): |e| n_e, one array for good
        # owned cells x facets: each facet's left and right cell (sums over the facets of a cell)
        left_of, right_of = (_owned_cells_of(cells, g.num_owned) for cells in (self._left, self._right))
        self._incidence = (right_of - left_of).tocsr()
        self._outflow = sparse.hstack([left_of, right_of]).tocsr()  # of [out of the left cells; out of the right]

    @staticmethod
    def field_points(cells: int, nv: int) -> tuple[int, int]:
        return cells * nv // 2, cells  # facet midpoints (a facet between two cells), cell centroids

    def initial_state(self, density: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        g = self.geometry
        return normalised_cell_averages(self.comm, density, g.vertices[: g.num_owned], self._area)

    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        X = self.velocity(self._targets, self._sources, state * self._area)
        flow = components(X, self._flow_directions)
        rhs, rate = self._upwind(self.ghosts(state[:, None]), flow[None])
        return rhs[:, 0], rate

    def measure_many(self, rows: np.ndarray) -> np.ndarray:
        return rows[:, :, 0] * self._area[:, None]

    def rhs_and_bound_many(self, rows: np.ndarray) -> tuple[np.ndarray, float]:
        """:meth:`rhs_and_bound` of k states at once: the normal velocities of their k measures
        from one batched evaluation (:func:`meanfield.velocity.velocities`) and the fluxes of all
        of them in one pass, facet by facet with the k states' values side by side."""
        from ..velocity import velocities

        flow = velocities(self.velocity, self._targets, self._sources, self.measure_many(rows), self._flow_directions)
        rhs, rate = self._upwind(self.ghosts(rows[:, :, 0]), flow)
        return rhs[:, :, None], rate

    def postprocess_many(self, rows: np.ndarray) -> np.ndarray:
        return rows

    def _upwind(self, rho: np.ndarray, flow: np.ndarray) -> tuple[np.ndarray, float]:
        """The right-hand sides (num_owned, k) of k densities given by their local averages rho
        (num_local, k) and their flows ``|e| u_e`` (k, F) through the facets (u_e the normal
        velocity), and the largest bound (collective)."""
        from mpi4py import MPI

        k, F = flow.shape
        out = np.empty((2 * F, k))  # |e| u^+ leaving the left cell, then |e| u^- leaving the right one
        leaving_left, leaving_right = out[:F], out[F:]
        flux = np.empty((F, k))  # from left to right
        rows = max(UPWIND_BLOCK // max(k, 1), 1)
        for start in range(0, F, rows):  # a block of facets at a time: the temporaries stay in cache
            block = slice(start, start + rows)
            left, right = leaving_left[block], leaving_right[block]
            u = np.ascontiguousarray(flow[:, block].T)  # facet-major, as rho's rows
            np.maximum(u, 0.0, out=left)
            np.subtract(left, u, out=right)
            f = flux[block]
            np.take(rho, self._left[block], axis=0, out=f)
            f *= left
            upwind_right = np.take(rho, self._right[block], axis=0)
            upwind_right *= right
            f -= upwind_right
        dmass = self._incidence @ flux  # into the right cell, out of the left one
        area = self._area[:, None]
        local_rate = float(((self._outflow @ out) / area).max(initial=0.0))  # the cells' outflow rates
        return dmass / area, self.comm.allreduce(local_rate, op=MPI.MAX)

    def cell_averages(self, state: np.ndarray) -> np.ndarray:
        return state

    @property
    def velocity_points(self) -> np.ndarray:
        """(F, d) the facet midpoints (the upwind fluxes' velocity points)."""
        return self._targets

    def measure(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._sources, state * self._area

