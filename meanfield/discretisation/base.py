"""The interface between a spatial scheme and the time stepper and run driver.

A scheme owns the distributed mesh and its degrees of freedom; its *state* is the numpy
array of this rank's owned degrees of freedom, cell by cell (``state.reshape(num_owned, -1)``
has one row per owned cell, so it is gathered and scattered in global order by
:mod:`.ordering`).  The time stepper only needs :meth:`SpatialScheme.rhs_and_bound` (the
semi-discrete right-hand side and the forward-Euler bound of the outflow rate, from one pass)
and :meth:`SpatialScheme.postprocess` (a limiter, or nothing); the run driver reads densities,
the discrete measure and the arrays it writes through the rest.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

import numpy as np

from ..collective import CollectiveFailure
from ..model import VelocityField
from ..sphere import cell_averages, cell_quadrature_points
from .geometry import MeshGeometry, mesh_geometry
from .ghosts import CellGhosts


class InitialDataError(ValueError):
    """Initial data that is negative, not finite or not normalisable."""


class StabilityError(CollectiveFailure, RuntimeError):
    """The time step violates the scheme's stability (CFL) bound (raised on every rank)."""


class SpatialScheme(ABC):
    """A semi-discretisation of ``d_t rho + div(rho X[rho]) = 0`` on a sphere mesh.

    Parameters
    ----------
    msh
        Distributed dolfinx mesh (see :func:`meanfield.mesh.distribute`).
    velocity
        The velocity field of the discrete measure.
    geometry
        The mesh geometry the scheme works with (default: ``msh``'s own, computed here).

    Attributes
    ----------
    ghosts
        The ghost exchange of values per cell (:class:`~.ghosts.CellGhosts`).
    """

    #: Name used in configs and metadata (``scheme.kind``).
    name: str = ""
    #: What the scheme is, for the configuration reference.
    description: str = ""
    #: Formal spatial order.
    order: int = 0
    #: Whether the state holds the density at every vertex of a cell (not one value per cell).
    vertex_values: bool = False
    #: Keys of the ``[scheme]`` config section passed to the constructor as keywords.
    options: tuple[str, ...] = ()

    @staticmethod
    def velocity_components(d: int) -> int:
        """How many components of the velocity at each velocity point :meth:`rhs_and_bound_many`
        asks the field for on S^{d-1} (``directions`` of :func:`meanfield.velocity.velocities`:
        a facet's normal, a tangent frame), or 0 where it takes the velocities themselves."""
        return 0

    def __init__(self, msh, velocity: VelocityField, geometry: MeshGeometry | None = None) -> None:
        self.msh = msh
        self.comm = msh.comm
        self.geometry = geometry or mesh_geometry(msh)
        self.velocity = velocity
        self.ghosts = CellGhosts(msh)

    @property
    def d(self) -> int:
        return self.geometry.d

    @staticmethod
    @abstractmethod
    def field_points(cells: int, nv: int) -> tuple[int, int]:
        """(targets, sources) of one velocity evaluation on a whole closed mesh of ``cells``
        cells with ``nv`` vertices each, on one rank: the counts that the nonlocal evaluator's
        cost model sees (``meanfield check`` estimates a run's cost from them)."""

    @abstractmethod
    def initial_state(self, density: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Project a density (points -> values) onto the scheme, normalised to mass 1.

        Raises :class:`InitialDataError` for negative, non-finite or zero-mass data.
        """

    @abstractmethod
    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        """Semi-discrete right-hand side and the forward-Euler stability bound.

        Returns
        -------
        dstate
            d(state)/dt, same shape as ``state``.
        max_rate
            Global bound r such that a forward-Euler step of size dt <= 1/r keeps the
            density non-negative.
        """

    def measure_many(self, rows: np.ndarray) -> np.ndarray:
        """The masses (n, k) at :meth:`measure`'s points of k states stacked cell by cell.

        Parameters
        ----------
        rows
            (num_owned, k, per_cell): ``rows[:, j].ravel()`` is state j (a causal run's stacked
            state, :class:`~meanfield.masks.causal_slices.CausalScheme`, seen as rows of cells).

        This default takes one :meth:`measure` after the other; a scheme overrides it with one
        pass over all of them.
        """
        return np.stack([self.measure(_state(rows, j))[1] for j in range(rows.shape[1])], axis=1)

    def rhs_and_bound_many(self, rows: np.ndarray) -> tuple[np.ndarray, float]:
        """The right-hand sides of k states stacked cell by cell (``rows`` as in
        :meth:`measure_many`), shape (num_owned, k, per_cell), each moving with the velocity of
        its own measure under the scheme's velocity field, and the largest of their bounds.  This
        default takes one :meth:`rhs_and_bound` after the other; a scheme that moves them all at
        once, with one batched velocity of the k measures (:func:`meanfield.velocity.velocities`
        of :meth:`measure_many`), overrides it."""
        out = [self.rhs_and_bound(_state(rows, j)) for j in range(rows.shape[1])]
        return (np.stack([rhs.reshape(rows.shape[0], -1) for rhs, _ in out], axis=1),
                max((rate for _, rate in out), default=0.0))

    def postprocess(self, state: np.ndarray) -> np.ndarray:
        """Applied after every Runge-Kutta stage (a limiter); the identity by default."""
        return state

    def postprocess_many(self, rows: np.ndarray) -> np.ndarray:
        """:meth:`postprocess` of k states stacked cell by cell (``rows`` as in
        :meth:`measure_many`), the same shape.  This default takes one state after the other; a
        scheme whose postprocessing acts cell by cell overrides it with one pass."""
        return np.stack([self.postprocess(_state(rows, j)).reshape(rows.shape[0], -1)
                         for j in range(rows.shape[1])], axis=1)

    @abstractmethod
    def cell_averages(self, state: np.ndarray) -> np.ndarray:
        """Owned cell averages of the density, (num_owned,)."""

    @abstractmethod
    def measure(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The discrete measure of this rank: points (n, d) on the sphere and masses (n,)."""

    @property
    @abstractmethod
    def velocity_points(self) -> np.ndarray:
        """(T, d) the points where a right-hand side needs the velocity (this rank's)."""

    def vertex_density(self, state: np.ndarray) -> np.ndarray | None:
        """(num_owned, nv) the density at each owned cell's vertices, for schemes with sub-cell
        data (DG1); ``None`` for cell averages only."""
        return None

    def vertex_jacobian(self) -> np.ndarray | None:
        """(num_owned, nv) area elements at the vertices of curved cells (DG1); ``None`` otherwise."""
        return None

    def locate(self, owned_cell: int) -> str:
        """Human-readable location of an owned cell (for error messages)."""
        c = self.geometry.centroid[owned_cell]
        return f"cell {int(self.geometry.original_index[owned_cell])} at x = {np.round(c, 4).tolist()}"

    def locate_value(self, state: np.ndarray, index: int) -> str:
        """Human-readable location of entry ``index`` of a state (for error messages).  A state
        is cell-major: each owned cell holds ``state.size / num_owned`` consecutive entries."""
        per_cell = max(state.size // max(self.geometry.num_owned, 1), 1)
        return self.locate(index // per_cell)

    def error_parts(self, vector: np.ndarray) -> list[np.ndarray]:
        """The parts of a state-shaped vector whose step errors are measured each against its
        own change (:mod:`meanfield.timestepping`): the whole state."""
        return [vector]

    def mass(self, state: np.ndarray) -> float:
        """Total mass over all ranks."""
        return float(self.comm.allreduce(self.measure(state)[1].sum()))


def _state(rows: np.ndarray, j: int) -> np.ndarray:
    """State j (contiguous) of k states stacked cell by cell, rows (num_owned, k, per_cell)."""
    return np.ascontiguousarray(rows[:, j]).ravel()


def check_density_values(comm, values: np.ndarray, points: np.ndarray) -> None:
    """Raise :class:`InitialDataError` on every rank if any rank has a negative or non-finite value.

    Parameters
    ----------
    values
        (cells, q) density values at quadrature points.
    points
        (cells, q, d) those points (to name the first bad one).
    """
    first = np.argwhere(~np.isfinite(values) | (values < 0))
    local = None
    if len(first):
        c, q = first[0]
        local = (f"initial: density is {float(values[c, q]):.6g} at x = {np.round(points[c, q], 4).tolist()}: "
                 "it must be finite and >= 0")
    errors = [e for e in comm.allgather(local) if e is not None]
    if errors:
        raise InitialDataError(errors[0])


def normalised_cell_averages(comm, density, vertices: np.ndarray, measure: np.ndarray) -> np.ndarray:
    """Cell averages of a density over this rank's cells, checked and normalised to mass 1.

    Parameters
    ----------
    comm
        Communicator over which the cells are distributed (owned cells only are passed).
    density
        Function of points (n, d) -> values (n,).
    vertices, measure
        Owned cells' vertices and measures.
    """
    values, averages = cell_averages(density, vertices)
    check_density_values(comm, values, cell_quadrature_points(vertices)[0])
    return normalised(comm, averages, measure)


def normalised(comm, values: np.ndarray, weights: np.ndarray | float) -> np.ndarray:
    """``values / sum(values * weights)`` (the sum over all ranks), refused unless the mass is > 0.

    The values are divided by their largest magnitude first, so that the mass cannot overflow
    (a density of ``1e308`` everywhere is a uniform density like any other).

    Raises :class:`InitialDataError` (on every rank) for zero mass.
    """
    from mpi4py import MPI

    scale = comm.allreduce(float(np.abs(values).max(initial=0.0)), op=MPI.MAX)
    scaled = values / scale if scale > 0 else values
    mass = comm.allreduce(float(np.sum(scaled * weights)))
    if not mass > 0:
        raise InitialDataError(f"initial: density has total mass {mass * scale!r}; it cannot be normalised")
    return scaled / mass
