"""Between two steps of a hybrid run: capture, absorption and merges, decided collectively.

After every step :meth:`AtomEvents.update` gathers each cell's mass and mass-weighted point
sum to rank 0 in global cell order, decides there what moves (:mod:`.capture`,
:mod:`.merge`) and broadcasts the decision (the global cells to empty and the new atoms),
so the result is the same on every rank count; each rank then zeroes its own captured cells.

Order of the events after a step:

1. ``atoms.absorb_mass > 0`` and the density's mass is at most ``absorb_mass`` (and there
   are atoms): every cell's mass goes to the atom nearest the cell
   (:func:`~.capture.absorb_all`) and the density is zero from then on, so the run goes on
   with atoms alone (:mod:`.coupling`), at the cost of the atoms' field on themselves.
   The error is at most ``absorb_mass`` times the distance the absorbed mass had to go;
   this is the long-time remedy for runs whose CFL step would otherwise stay small because
   of a little residual density near fast-moving atoms.
2. otherwise, with ``atoms.capture``: captures and absorptions (:mod:`.capture`).
3. atoms closer than ``atoms.merge_distance`` merge (:mod:`.merge`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..discretisation.base import SpatialScheme
from ..peaks import cell_graph
from ..point_masses import Atoms
from .capture import CaptureRule, absorb_all, apply_captures, find_captures
from .merge import merge_close


class AtomEvents:
    """Capture, absorption and merge of a hybrid run (module docstring).

    Parameters
    ----------
    scheme
        The spatial scheme.
    capture
        Whether cores are captured.
    rule
        The capture criteria.
    merge_distance
        Merge tolerance (radians).
    absorb_mass
        Density mass at or below which the density goes to the atoms (0: never).
    gather
        Owned rows -> global rows on rank 0 (``None`` elsewhere); collective.
    cells
        The serial mesh's cells (vertex indices), on rank 0 (``None`` elsewhere).
    """

    def __init__(self, scheme: SpatialScheme, capture: bool, rule: CaptureRule, merge_distance: float,
                 absorb_mass: float, gather: Callable[[np.ndarray], np.ndarray | None],
                 cells: np.ndarray | None) -> None:
        self.scheme, self.comm = scheme, scheme.comm
        self.capture, self.rule, self.merge_distance, self.absorb_mass = capture, rule, merge_distance, absorb_mass
        self.gather = gather
        g = scheme.geometry
        self.area = gather(g.measure[: g.num_owned])
        self.centroids = gather(g.centroid[: g.num_owned])
        self.graph = cell_graph(cells) if cells is not None else None
        self.captured = 0
        #: rank 0: the density mass the last update gave to the atoms all at once (0: none)
        self.emptied = 0.0

    def cell_moments(self, state: np.ndarray) -> np.ndarray:
        """(num_owned, 1 + d) each owned cell's mass and mass-weighted point sum."""
        g = self.scheme.geometry
        points, weights = self.scheme.measure(state)
        w = weights.reshape(g.num_owned, -1)
        x = points.reshape(g.num_owned, w.shape[1], g.d)
        return np.column_stack([w.sum(axis=1), np.einsum("cq,cqd->cd", w, x)])

    def update(self, state: np.ndarray, atoms: Atoms, next_id: int) -> tuple[np.ndarray, Atoms, int]:
        """The density state, the atoms and the next free id after this step's events (collective)."""
        from mpi4py import MPI

        self.emptied = 0.0
        some = bool(np.any(state))
        if not self.capture and not self.absorb_mass or not self.comm.allreduce(some, op=MPI.LOR):
            return state, merge_close(atoms, self.merge_distance), next_id
        rows = self.gather(self.cell_moments(state))
        decision = None
        if rows is not None:
            decision = self._decide(rows, atoms, next_id)
        cells, atoms, next_id = self.comm.bcast(decision, root=0)
        if len(cells):
            g = self.scheme.geometry
            state = state.copy()
            state.reshape(g.num_owned, -1)[np.isin(g.original_index[: g.num_owned], cells)] = 0.0
            self.captured += len(cells)
        return state, atoms, next_id

    def _decide(self, rows: np.ndarray, atoms: Atoms, next_id: int) -> tuple[np.ndarray, Atoms, int]:
        """Rank 0: the global cells to empty, the new atoms and the next id."""
        assert self.area is not None and self.centroids is not None and self.graph is not None
        mass, moment = rows[:, 0], rows[:, 1:]
        cells = np.zeros(0, dtype=np.int64)
        if atoms.count and 0 < mass.sum() <= self.absorb_mass:
            cells = np.flatnonzero(mass > 0)
            atoms = absorb_all(atoms, mass, moment)
            self.emptied = float(mass.sum())
        elif self.capture:
            atom_cells = np.argmax(self.centroids @ atoms.positions.T, axis=0) if atoms.count else np.zeros(0, int)
            captures = find_captures(mass, self.area, self.graph, self.rule, atom_cells, atoms.masses)
            if captures:
                atoms, next_id = apply_captures(atoms, captures, mass, moment, next_id)
                cells = np.concatenate([c.cells for c in captures])
        return cells, merge_close(atoms, self.merge_distance), next_id
