"""The atoms as a component of the PDE simulation: present in a hybrid run, absent otherwise.

The PDE simulation holds one of two components and calls it at the same places whatever the
run: :class:`NoAtoms` for a plain run (the stepper steps the scheme; nothing is added to
observables, snapshots or checkpoints) and :class:`HybridAtoms` for a hybrid run (the stepper
steps :class:`~.coupling.HybridStepping`; after every step :class:`~.hybrid.AtomEvents`
captures, absorbs and merges; the atoms are written with every output and checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from ..discretisation.base import SpatialScheme
from ..nonlocal_field.base import PointGroup
from ..point_masses import Atoms
from ..timestepping import SteppedScheme
from .coupling import AtomCoupling, HybridStepping
from .hybrid import AtomEvents
from .journal import Journal


class AtomsComponent(Protocol):
    """What the PDE simulation asks of its atoms (:class:`NoAtoms` or :class:`HybridAtoms`)."""

    @property
    def atoms(self) -> Atoms | None:
        """The atoms (replicated on every rank), ``None`` without atoms."""

    @property
    def stepping(self) -> SteppedScheme:
        """What the time stepper steps."""

    def share(self, density: np.ndarray) -> np.ndarray:
        """The initial density, scaled to the mass the initial atoms leave."""

    def stepped_state(self, density: np.ndarray) -> np.ndarray:
        """The stepper's state from the scheme's state."""

    def after_step(self, state: np.ndarray, t0: float, t1: float) -> np.ndarray:
        """The scheme's state after a step of the stepper from t0 to t1 (collective)."""

    def extra_sources(self) -> PointGroup | None:
        """This rank's extra sources of the observed field (``None``: none)."""

    def observables(self) -> dict[str, float]:
        """Entries added to each row of observables."""

    def arrays(self) -> dict[str, np.ndarray]:
        """Arrays added to each snapshot."""

    def checkpoint_arrays(self) -> dict[str, np.ndarray]:
        """Arrays added to each checkpoint."""

    def restore(self, state: dict[str, np.ndarray] | None, d: int) -> None:
        """Take the atoms back from a checkpoint read on rank 0 (collective)."""

    def status(self) -> str:
        """The atoms on a periodic log line (empty without atoms)."""

    def event_lines(self) -> list[str]:
        """Log lines of the captures and merges since the last call (rank 0; empty elsewhere)."""


class NoAtoms:
    """The component of a plain run: the scheme alone."""

    def __init__(self, scheme: SteppedScheme) -> None:
        self.atoms: Atoms | None = None
        self.stepping: SteppedScheme = scheme

    def share(self, density: np.ndarray) -> np.ndarray:
        return density

    def stepped_state(self, density: np.ndarray) -> np.ndarray:
        return density

    def after_step(self, state: np.ndarray, t0: float, t1: float) -> np.ndarray:
        return state

    def extra_sources(self) -> PointGroup | None:
        return None

    def observables(self) -> dict[str, float]:
        return {}

    def arrays(self) -> dict[str, np.ndarray]:
        return {}

    def checkpoint_arrays(self) -> dict[str, np.ndarray]:
        return {}

    def restore(self, state: dict[str, np.ndarray] | None, d: int) -> None:
        return None

    def status(self) -> str:
        return ""

    def event_lines(self) -> list[str]:
        return []


class HybridAtoms:
    """The component of a hybrid run: atoms beside the density (:mod:`meanfield.atoms`).

    Parameters
    ----------
    scheme
        The spatial scheme; its velocity field is ``coupling``.
    coupling
        The atoms' coupling to the field.
    initial
        (k, 1 + d) initial atoms: mass, then the point (normalised here).
    atom_rate
        The Lipschitz part of the atoms' step bound for the active layer
        (:class:`~.coupling.HybridStepping`).
    events
        Capture, absorption and merge after every step.
    """

    def __init__(self, scheme: SpatialScheme, coupling: AtomCoupling, initial: np.ndarray,
                 atom_rate: Callable[[], float], events: AtomEvents) -> None:
        masses, points = initial[:, 0], initial[:, 1:]
        self.atoms = Atoms(masses, points / np.linalg.norm(points, axis=1, keepdims=True))
        self.next_id = self.atoms.count
        self.coupling, self.events = coupling, events
        self.coupling.positions, self.coupling.masses = self.atoms.positions, self.atoms.masses
        self.hybrid = HybridStepping(scheme, coupling, atom_rate)
        self.stepping: SteppedScheme = self.hybrid
        self.comm = scheme.comm
        self.journal = Journal()

    def share(self, density: np.ndarray) -> np.ndarray:
        """The density carries the mass the initial atoms leave; zero (an all-atom run) when
        they leave less than 1e-12."""
        share = 1.0 - self.atoms.mass
        return density * share if share > 1e-12 else np.zeros_like(density)

    def stepped_state(self, density: np.ndarray) -> np.ndarray:
        self.coupling.positions, self.coupling.masses = self.atoms.positions, self.atoms.masses
        return self.hybrid.join(density, self.atoms.positions)

    def after_step(self, state: np.ndarray, t0: float, t1: float) -> np.ndarray:
        density, positions = self.hybrid.split(state)
        start = self.atoms
        moved = Atoms(self.atoms.masses, self.hybrid.renormalise(positions), self.atoms.ids)
        density, self.atoms, self.next_id = self.events.update(density, moved, self.next_id)
        self.journal.record(moved, self.atoms, start, (t0, t1))
        if self.events.emptied:
            self.journal.absorbed_all(self.events.emptied)
        return density

    def extra_sources(self) -> PointGroup | None:
        mine = slice(None) if self.comm.rank == 0 else slice(0)
        return PointGroup(self.atoms.positions[mine], self.atoms.masses[mine])

    def observables(self) -> dict[str, float]:
        return {"atom_count": float(self.atoms.count), "atom_mass": self.atoms.mass}

    def arrays(self) -> dict[str, np.ndarray]:
        return self.atoms.arrays()

    def checkpoint_arrays(self) -> dict[str, np.ndarray]:
        return {**self.atoms.arrays(), "atom_next_id": np.array(self.next_id)}

    def restore(self, state: dict[str, np.ndarray] | None, d: int) -> None:
        saved = None if state is None else (Atoms.from_arrays(state, d), int(state.get("atom_next_id", 0)))
        self.atoms, self.next_id = self.comm.bcast(saved, root=0)

    def status(self) -> str:
        return self.journal.status(self.atoms)

    def event_lines(self) -> list[str]:
        lines = self.journal.drain()
        return lines if self.comm.rank == 0 else []
