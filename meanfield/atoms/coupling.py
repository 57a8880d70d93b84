"""Atoms in the dynamics: extra sources and targets of the field, stepped with the density.

The measure is ``mu = rho dx + sum_i m_i delta_{x_i}``; the density moves with X[mu] and each
atom with X[mu](x_i).  :class:`AtomCoupling` is the velocity field the spatial scheme calls:
it adds the atoms to the scheme's sources and targets in the same nonlocal evaluation (the
atoms as a second :class:`~meanfield.nonlocal_field.base.PointGroup`, held by rank 0 only so
that the evaluator's reduction over ranks counts each atom once) and keeps the atoms'
velocity, which it broadcasts from rank 0 so that the replicated atoms stay identical on
every rank.  :class:`HybridStepping` puts the scheme's state and the atom positions into
one state vector for :class:`~meanfield.timestepping.SSPRK3`: the atoms take the same
three stages, and are renormalised onto the sphere after the whole step (a projection
method).  The velocity ``P_x(...)`` is defined off the sphere and ``d|x|^2/dt = 0`` on it,
so the stages leave it by O(dt^2) only; renormalising after every stage instead would cut
the order to 2 (measured on a rotation).

Time-step bound
---------------
With atoms, the stepper's rate is ``max(r_rho, r_atoms)`` with the scheme's positivity bound
``r_rho`` and ``r_atoms = max(max_i |X(x_i)| / h, L / atoms.lipschitz_step)``: ``h`` is the
smallest cell size (cell measure^(1/(d-1))), so that an atom moves at most ``cfl`` cells per
step, and ``L`` the Lipschitz bound of the active layer's field
(:meth:`meanfield.layers.Layer.lipschitz_bound`), so that a step is at most
``cfl * lipschitz_step / L``.  SSP-RK3 is stable on the real axis up to 2.5 / L; the default
factor 1 (four times the particle solver's default step) is where halving or doubling it
moves the merge times of the S^1 long-time cases by at most 3e-7 (relative,
``benchmarks/study_atom_defaults.py``, docs/long-time.rst).

All-atom stepping
-----------------
A density that is exactly zero everywhere stays zero (every flux is a velocity times an
upwind density), so when it is, the scheme is not evaluated at all: its rate is zero and
its bound is void, and only the atoms' field on themselves is computed -- the particle
system with weights.  This is exact, not an approximation (see ``atoms.absorb_mass`` in
:mod:`.hybrid` for the step that gets there).  Up to :data:`DIRECT_ATOMS` atoms, that field is
the direct sum over the atoms (exact, ``O(k^2)``: microseconds for a few atoms) whatever
``nonlocal.method`` is, since a fast evaluation costs a fixed ~0.5-3 ms (transforms sized for the
mesh), which over the 10^4 - 10^5 steps of a long atom phase would be most of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..discretisation.base import SpatialScheme
from ..model import VelocityField
from ..nonlocal_field.base import PointGroup

#: (targets, sources) groups -> the velocity at each target group (``LayerVelocity.groups``).
GroupField = Callable[[Sequence[PointGroup], Sequence[PointGroup]], list[np.ndarray]]
#: Atoms alone are summed directly (``alone`` of :class:`AtomCoupling`) up to this many atoms:
#: ~9e-9 k^2 s, below the fixed cost of a fast evaluation (:mod:`meanfield.nonlocal_field.auto`).
DIRECT_ATOMS = 200


class AtomCoupling:
    """The scheme's velocity field with the atoms as extra sources and targets (module docstring).

    Parameters
    ----------
    field
        The velocity of the measure's point groups (:meth:`meanfield.velocity.LayerVelocity.groups`).
    plain
        The same field as a plain :data:`VelocityField` (used while there are no atoms, so that
        a run without atoms makes exactly the calls of a plain run).
    comm
        MPI communicator.
    d
        Ambient dimension.
    alone
        The same field by direct sums (:meth:`meanfield.velocity.LayerVelocity.direct_groups`),
        used for the atoms alone when there are at most :data:`DIRECT_ATOMS` of them (module
        docstring); ``None``: always ``field``.
    """

    def __init__(self, field: GroupField, plain: VelocityField, comm, d: int, alone: GroupField | None = None) -> None:
        self.field, self.plain, self.comm, self.alone = field, plain, comm, alone
        self.positions, self.masses = np.zeros((0, d)), np.zeros(0)
        self.atom_velocity = np.zeros((0, d))

    def _mine(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's share of the atoms: all of them on rank 0, none elsewhere."""
        if self.comm.rank == 0:
            return self.positions, self.masses
        return self.positions[:0], self.masses[:0]

    def _share(self, velocity: np.ndarray) -> np.ndarray:
        """Rank 0's atom velocities on every rank."""
        if self.comm.size == 1:
            return velocity
        out = np.ascontiguousarray(velocity) if self.comm.rank == 0 else np.empty(self.positions.shape)
        self.comm.Bcast(out, root=0)
        return out

    def __call__(self, targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        if not len(self.masses):
            return self.plain(targets, sources, weights)
        x, m = self._mine()
        mesh, atoms = self.field([PointGroup(targets, None, True), PointGroup(x)],
                                 [PointGroup(sources, weights, True), PointGroup(x, m)])
        self.atom_velocity = self._share(atoms)
        return mesh

    def atoms_alone(self) -> np.ndarray:
        """The atoms' velocity when the density is zero: their field on themselves (collective)."""
        x, m = self._mine()
        field = self.alone if self.alone is not None and len(self.masses) <= DIRECT_ATOMS else self.field
        (atoms,) = field([PointGroup(x)], [PointGroup(x, m)])
        self.atom_velocity = self._share(atoms)
        return self.atom_velocity


class HybridStepping:
    """The scheme's state followed by the atoms' positions, as one state for SSP-RK3.

    Offers what :class:`~meanfield.timestepping.SSPRK3` uses of a scheme (``rate``,
    ``postprocess``, ``geometry``, ``comm``, ``locate``).

    Parameters
    ----------
    scheme
        The spatial scheme (its velocity field is ``coupling``).
    coupling
        The atoms' coupling to the field.
    atom_rate
        The Lipschitz part ``L / lipschitz_step`` of the atoms' bound for the active layer
        (module docstring).
    """

    def __init__(self, scheme: SpatialScheme, coupling: AtomCoupling, atom_rate: Callable[[], float]) -> None:
        from mpi4py import MPI

        self.scheme, self.coupling, self.atom_rate = scheme, coupling, atom_rate
        self.comm, self.geometry = scheme.comm, scheme.geometry
        g = scheme.geometry
        size = g.measure[: g.num_owned] ** (1.0 / max(g.d - 1, 1))
        self.h = self.comm.allreduce(float(size.min(initial=np.inf)), op=MPI.MIN)

    def join(self, density: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """One state vector from the scheme's state and the atom positions."""
        return np.concatenate([density, positions.ravel()])

    def split(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the scheme's state, the atom positions (k, d)) of a state vector."""
        k, d = len(self.coupling.masses), self.geometry.d
        n = state.size - k * d
        return state[:n], state[n:].reshape(k, d)

    def density_is_zero(self, density: np.ndarray) -> bool:
        """Whether the density vanishes on every rank (collective)."""
        from mpi4py import MPI

        some = bool(np.any(density))
        return not (self.comm.allreduce(some, op=MPI.LOR) if self.comm.size > 1 else some)

    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        density, positions = self.split(state)
        self.coupling.positions = positions
        if not len(positions):
            return self.scheme.rhs_and_bound(density)
        if self.density_is_zero(density):
            drho, rate, X = np.zeros_like(density), 0.0, self.coupling.atoms_alone()
        else:
            drho, rate = self.scheme.rhs_and_bound(density)
            X = self.coupling.atom_velocity
        speed = float(np.linalg.norm(X, axis=1).max(initial=0.0))
        return self.join(drho, X), max(rate, speed / self.h, self.atom_rate())

    def error_parts(self, vector: np.ndarray) -> list[np.ndarray]:
        """The density's parts and the atoms' positions (:mod:`meanfield.timestepping`)."""
        density, positions = self.split(vector)
        return [*self.scheme.error_parts(density), positions.ravel()]

    def postprocess(self, state: np.ndarray) -> np.ndarray:
        density, positions = self.split(state)
        if len(positions) and not np.any(density):  # the limiter keeps zero cells zero (cell by cell)
            return state
        return self.join(self.scheme.postprocess(density), positions)

    @staticmethod
    def renormalise(positions: np.ndarray) -> np.ndarray:
        """The atoms back on the sphere, after a whole step (not after each stage: see the module
        docstring)."""
        return positions / np.linalg.norm(positions, axis=1, keepdims=True)

    def locate_value(self, state: np.ndarray, index: int) -> str:
        density, _ = self.split(state)
        if index < density.size:
            return self.scheme.locate_value(density, index)
        return f"atom {(index - density.size) // self.geometry.d} (of this rank's copy)"
