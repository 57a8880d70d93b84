"""Point masses as data: the atoms of a hybrid state (masses, positions on the sphere, persistent ids).

Atoms are replicated on every rank (there are few of them); every rank holds the same
:class:`Atoms`.  In snapshots, checkpoints, run.nc and ``load_run`` they travel as the three
arrays named in :data:`ATOM_KEYS`.

This record sits below both the atoms' numerics (:mod:`meanfield.atoms`, which captures, moves
and merges them, and re-exports :class:`Atoms`) and the run-directory format
(:mod:`meanfield.rundir`, which writes and reads them), so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

#: Snapshot / checkpoint array names: masses (k,), positions (k, d), ids (k,).
ATOM_KEYS = ("atom_masses", "atom_positions", "atom_ids")


@dataclass
class Atoms:
    """Point masses ``m_i delta_{x_i}`` on the unit sphere S^{d-1}.

    Parameters
    ----------
    masses
        (k,) positive masses.
    positions
        (k, d) unit vectors.
    ids
        (k,) persistent integer labels: an atom keeps its id while it moves; a merge keeps
        the id of the heavier atom; new atoms get ids above every id used so far.
    """

    masses: np.ndarray
    positions: np.ndarray
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        self.masses = np.asarray(self.masses, dtype=np.float64).reshape(-1)
        k = self.masses.size
        positions = np.asarray(self.positions, dtype=np.float64)
        self.positions = positions if positions.ndim == 2 else positions.reshape(k, -1)  # (0, d) stays (0, d)
        ids = np.asarray(self.ids, dtype=np.int64).reshape(-1)
        self.ids = ids if ids.size == k else np.arange(k, dtype=np.int64)

    @classmethod
    def none(cls, d: int) -> Atoms:
        """No atoms in R^d."""
        return cls(np.zeros(0), np.zeros((0, d)), np.zeros(0, dtype=np.int64))

    @property
    def count(self) -> int:
        """Number of atoms."""
        return int(self.masses.size)

    @property
    def mass(self) -> float:
        """Total mass of the atoms."""
        return float(self.masses.sum())

    def arrays(self) -> dict[str, np.ndarray]:
        """The snapshot arrays (:data:`ATOM_KEYS`)."""
        return dict(zip(ATOM_KEYS, (self.masses, self.positions, self.ids), strict=True))

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], d: int) -> Atoms:
        """The atoms stored in ``arrays`` (a snapshot); no atoms when the keys are absent."""
        if ATOM_KEYS[0] not in arrays:
            return cls.none(d)
        return cls(*(np.asarray(arrays[key]) for key in ATOM_KEYS))
