"""Atoms as clusters: the analysis of a hybrid state ``mu = rho dx + sum_i m_i delta_{x_i}``.

A hybrid run carries a cluster that has collapsed below the mesh scale as an atom,
a point mass.  :class:`WithAtoms` shows the cluster analysis the whole measure:

* the watershed (:mod:`.basins`) sees the cell averages of mu: the density's plus, in the
  cell holding an atom, ``m_i / |cell|``; so an atom is the top of its region (a cluster) unless
  that cell average stays below the threshold, and two atoms with no dip between them (in
  the same or adjacent cells) would be one cluster, but see below;
* capture empties an atom's core cells and leaves the basin's rim on the mesh, so the cell
  averages dip around the atom and the rim can show a peak of its own: a cluster whose top
  cell holds no atom and lies within :data:`RIM_RINGS` cell rings of an atom's cell is that
  atom's rim and joins the atom's cluster (with the default capture, at most 3 core cells,
  the hole is one ring wide);
* atoms are points, resolved below the mesh scale: atoms closer than the merge distance of
  :mod:`meanfield.merging` (0.01 rad, single linkage) are one *group*, the clusters holding
  one group's atoms are joined, and a cluster that holds several groups is split between
  them (each of its cells goes to the group whose heaviest atom's cell has the nearest
  centroid), so every group is a cluster of its own and two atoms make one cluster once they
  are within the merge distance, whatever the cells (the solver combines atoms later, closer
  than ``atoms.merge_distance``);
* a cluster's position is the mass-weighted centre (on the sphere) of the atoms of its top
  cell's group when it has any, else the density's reconstructed peak; its height is then
  ``inf`` (a point mass has no finite density);
* its mass is the atoms' mass in the region plus the density's mass in the region (the flank
  that capture left on the mesh), and its width the square root of the second moment of both
  about the position (an atom at the position adds mass, not width).

Ids and events come from :mod:`.tracking` unchanged: a cluster keeps its id when it is
captured (the atom sits where the peak was), and two atoms merging are a ``merge`` whose time
is when the two atoms came within the merge distance, interpolated between outputs
(:mod:`meanfield.merging`).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ...atoms import Atoms
from ...merging import MERGE_DISTANCE
from ...peaks import strict_rank
from ...sphere import normalize
from .fields import CellAverages, Field, region_integrals, widths

#: Cell rings around an atom's cell within which a density peak is the atom's rim (module docstring).
RIM_RINGS = 2


def atom_groups(atoms: Atoms) -> np.ndarray:
    """(k,) group of each atom: atoms within :data:`~meanfield.merging.MERGE_DISTANCE` of each
    other, single linkage (module docstring)."""
    if atoms.count < 2:
        return np.zeros(atoms.count, np.int64)
    close = atoms.positions @ atoms.positions.T >= np.cos(MERGE_DISTANCE)
    return connected_components(csr_matrix(close), directed=False)[1].astype(np.int64)


class WithAtoms(Field):
    """A density on the mesh plus atoms (module docstring).

    Parameters
    ----------
    density
        The run's density (cell averages or DG1 state).
    atoms
        The atoms at the same time.
    """

    def __init__(self, density: CellAverages, atoms: Atoms) -> None:
        self.density, self.atoms = density, atoms
        self.mesh = density.mesh
        self.source = f"{density.source} + atoms"
        n = self.mesh.num_cells
        self.cells = (self.mesh.locator.locate(atoms.positions) if atoms.count else np.zeros(0, np.int64))
        self.values = density.values + np.bincount(self.cells, atoms.masses, n) / density.areas
        self.groups = atom_groups(atoms)

    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        here = np.isin(self.groups, self.groups[self.cells == cell])
        if not here.any():
            return self.density.peak(cell)
        centre = self.atoms.masses[here] @ self.atoms.positions[here]
        return normalize(centre[None])[0], float("inf")

    def clusters(self, threshold: float, prominence: float) -> tuple[np.ndarray, np.ndarray]:
        """The watershed's clusters of the measure, with each atom's rim joined to it (module docstring)."""
        labels, peaks = super().clusters(threshold, prominence)
        target = np.arange(len(peaks))
        atom_cells = np.unique(self.cells)
        atom_top = np.isin(peaks, atom_cells)
        for cell in atom_cells:
            host = labels[cell]
            if host >= 0 and atom_top[host]:  # hosts are never rims: no chains
                rim = np.isin(peaks, self.mesh.graph.ring(int(cell), RIM_RINGS)) & ~atom_top
                target[rim & (target == np.arange(len(peaks)))] = host
        for group in np.unique(self.groups):  # one group of atoms: one cluster (the tallest host's)
            hosts = np.unique(labels[self.cells[self.groups == group]])
            hosts = hosts[hosts >= 0]
            for host in hosts[1:]:
                target[target == host] = target[hosts[0]]
        kept = target == np.arange(len(peaks))
        index = np.cumsum(kept) - 1
        return self._separate_atoms(np.where(labels >= 0, index[target[labels]], -1), peaks[kept])

    def _separate_atoms(self, labels: np.ndarray, peaks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Split every cluster holding several groups of atoms between them (each group at its
        heaviest atom's cell); tallest first again."""
        heaviest = {}  # group -> the cell of its heaviest atom
        for i in np.argsort(self.atoms.masses, kind="stable"):  # heavier atoms written last
            heaviest[int(self.groups[i])] = int(self.cells[i])
        atom_cells = np.unique(np.array(list(heaviest.values()), np.int64))
        atom_cells = atom_cells[labels[atom_cells] >= 0]
        labels, tops = labels.copy(), list(peaks)
        for host in np.unique(labels[atom_cells]):
            mine = atom_cells[labels[atom_cells] == host]
            if len(mine) < 2:
                continue
            region = np.flatnonzero(labels == host)
            nearest = np.argmax(self.mesh.centroids[region] @ self.mesh.centroids[mine].T, axis=1)
            tops[host] = mine[0]
            for j, cell in enumerate(mine[1:], start=1):
                labels[region[nearest == j]] = len(tops)
                tops.append(cell)
        order = np.argsort(-strict_rank(self.values)[tops])
        index = np.empty(len(order), np.int64)
        index[order] = np.arange(len(order))
        return np.where(labels >= 0, index[labels], -1), np.asarray(tops, np.int64)[order]

    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mass, width = self.density.moments(labels, positions)
        second = width**2 * mass
        atom_mass, atom_second = region_integrals(self.atoms.positions, self.atoms.masses, labels[self.cells],
                                                  positions)
        mass, second = mass + atom_mass, second + atom_second
        return mass, widths(mass, second)

    def atom_parts(self, labels: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Per cluster (``count`` of them): the atoms' mass and the id of its heaviest atom (-1: none)."""
        lab = labels[self.cells]
        mass = np.bincount(lab[lab >= 0], self.atoms.masses[lab >= 0], count)
        heaviest = np.full(count, -1, np.int64)
        for i in np.argsort(self.atoms.masses, kind="stable"):  # heavier atoms written last
            if lab[i] >= 0:
                heaviest[lab[i]] = self.atoms.ids[i]
        return mass, heaviest
