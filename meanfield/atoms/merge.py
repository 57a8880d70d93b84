"""Merging atoms that come closer than ``atoms.merge_distance`` (radians).

The closest pair (geodesic angle) below the tolerance merges first, into one atom with the
sum of the masses at the mass-weighted centre ``normalise(m_a x_a + m_b x_b)`` and the id of
the heavier atom (the smaller id on a tie); repeated until no pair is closer.  Serial and
deterministic: every rank computes the same result from the same replicated atoms.
"""

from __future__ import annotations

import numpy as np

from ..point_masses import Atoms


def merge_close(atoms: Atoms, distance: float) -> Atoms:
    """The atoms after merging every pair closer than ``distance`` (module docstring)."""
    if atoms.count < 2:
        return atoms
    x = atoms.positions
    if (x @ x.T - 2.0 * np.eye(atoms.count)).max() < np.cos(distance):  # nobody is close: the common case
        return atoms
    masses, positions, ids = list(atoms.masses), list(atoms.positions), list(atoms.ids)
    while len(masses) > 1:
        x = np.array(positions)
        angle = np.arccos(np.clip(x @ x.T, -1.0, 1.0))
        np.fill_diagonal(angle, np.inf)
        i, j = np.unravel_index(np.argmin(angle), angle.shape)
        if not angle[i, j] < distance:
            break
        i, j = (i, j) if (masses[i], -ids[i]) >= (masses[j], -ids[j]) else (j, i)  # i: the heavier
        total = masses[i] * positions[i] + masses[j] * positions[j]
        masses[i] += masses[j]
        positions[i] = total / np.linalg.norm(total)
        for seq in (masses, positions, ids):
            del seq[j]
    d = atoms.positions.shape[1]
    return Atoms(np.array(masses), np.reshape(positions, (-1, d)), np.array(ids, dtype=np.int64))
