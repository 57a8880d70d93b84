"""Capture: the core of a peak resolved by only a few cells becomes an atom (serial, global arrays).

The decision is made on the whole mesh in global cell order (rank 0 of a run; see
:mod:`.hybrid`), from the cell masses alone, so it is the same on every rank count.

Definition
----------
The peaks and basins are those of steepest ascent of the cell densities ``rho_c = m_c / |c|``
on the vertex-sharing cell graph (:func:`meanfield.peaks.ascent_roots`).  The *core* of the
peak p is the set of cells of its basin with ``rho_c >= core_level * rho_p``.  The core is
captured when

* **width**: it has at most ``core_cells`` cells (the cluster is resolved by a few cells only);
* **mass**: it holds at least ``core_fraction`` of its basin's mass (the basin's cluster has
  collapsed into its core, not a broad bump with a sharp tip);
* **height**: ``rho_p >= min_height * rho_mean``, ``rho_mean`` = total mass (density and
  atoms) / total area (no capture of small wiggles in an emptied region).

An *absorption* is a capture whose core contains the cell nearest to an existing atom: the
core's mass goes to that atom (the heaviest one if several) instead of a new one, and the
height test is waived, since density that the dynamics sweep into an atom is part of the
atom's cluster, however little of it there is.

What a capture moves
--------------------
Whole cells: every captured cell's mass ``m_c`` (FV: ``rho_c |c|``; DG1: the cell's whole
linear density, ``|T| mean(m)``, i.e. its cell average times its measure) and its
mass-weighted point sum ``s_c = sum_q w_q x_q`` (the cell's source quadrature) go to the
atom, and the cell is set to zero.  The density stays >= 0 (it is 0 or untouched in every
cell) and the total mass is conserved to round-off; the new atom sits at the mass-weighted
centre ``normalise(m_a x_a + sum_c s_c)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..peaks import CellGraph, ascent_roots
from ..point_masses import Atoms


@dataclass(frozen=True)
class CaptureRule:
    """The capture criteria of the ``[atoms]`` config section (module docstring)."""

    core_level: float = 0.05
    core_cells: int = 3
    min_height: float = 20.0
    core_fraction: float = 0.9


@dataclass(frozen=True)
class Capture:
    """One capture: the core's global cells and the atom that takes them (``-1``: a new atom)."""

    cells: np.ndarray
    host: int


def find_captures(mass: np.ndarray, area: np.ndarray, graph: CellGraph, rule: CaptureRule,
                  atom_cells: np.ndarray, atom_masses: np.ndarray) -> list[Capture]:
    """The cores to capture (module docstring), in global cell order of their peaks.

    Parameters
    ----------
    mass, area
        (cells,) cell masses and measures, global order.
    graph
        The cell graph.
    rule
        The criteria.
    atom_cells, atom_masses
        (k,) the cell nearest to each atom, and the atoms' masses.
    """
    rho = mass / area
    roots = ascent_roots(rho, graph)
    peaks, basin = np.unique(roots, return_inverse=True)
    core = rho >= rule.core_level * rho[roots]
    count = np.bincount(basin, core, len(peaks))
    basin_mass = np.bincount(basin, mass, len(peaks))
    core_mass = np.bincount(basin, mass * core, len(peaks))
    mean = (mass.sum() + atom_masses.sum()) / area.sum()
    ok = (rho[peaks] > 0) & (count <= rule.core_cells) & (core_mass >= rule.core_fraction * basin_mass)
    tall = rho[peaks] >= rule.min_height * mean
    hosts = np.full(len(peaks), -1)
    for i in np.argsort(-atom_masses, kind="stable")[::-1]:  # the heaviest atom ends up the host
        b = basin[atom_cells[i]]
        if core[atom_cells[i]]:
            hosts[b] = i
    out = []
    for b in np.flatnonzero(ok & (tall | (hosts >= 0))):
        out.append(Capture(np.flatnonzero(core & (basin == b)), int(hosts[b])))
    return out


def apply_captures(atoms: Atoms, captures: list[Capture], mass: np.ndarray, moment: np.ndarray,
                   next_id: int) -> tuple[Atoms, int]:
    """The atoms after the captures, and the next free id.

    Parameters
    ----------
    mass, moment
        (cells,) cell masses and (cells, d) mass-weighted point sums, global order.
    """
    masses, positions, ids = atoms.masses.copy(), atoms.positions.copy(), atoms.ids.copy()
    new_m, new_x, new_id = [], [], []
    for c in captures:
        m, s = float(mass[c.cells].sum()), moment[c.cells].sum(axis=0)
        if c.host >= 0:
            total = masses[c.host] * positions[c.host] + s
            positions[c.host] = total / np.linalg.norm(total)
            masses[c.host] += m
        else:
            new_m.append(m)
            new_x.append(s / np.linalg.norm(s))
            new_id.append(next_id)
            next_id += 1
    d = positions.shape[1]
    out = Atoms(np.concatenate([masses, new_m]), np.concatenate([positions, np.reshape(new_x, (-1, d))]),
                np.concatenate([ids, np.asarray(new_id, dtype=np.int64)]))
    return out, next_id


def absorb_all(atoms: Atoms, mass: np.ndarray, moment: np.ndarray) -> Atoms:
    """Every cell's mass to the atom nearest to the cell's centre (``atoms.absorb_mass``).

    Each atom moves to the mass-weighted centre of itself and the cells it takes.
    """
    occupied = np.flatnonzero(mass > 0)
    centre = moment[occupied] / mass[occupied, None]
    nearest = np.argmax(centre @ atoms.positions.T, axis=1)
    masses = atoms.masses + np.bincount(nearest, mass[occupied], atoms.count)
    total = atoms.masses[:, None] * atoms.positions
    np.add.at(total, nearest, moment[occupied])
    return Atoms(masses, total / np.linalg.norm(total, axis=1, keepdims=True), atoms.ids.copy())
