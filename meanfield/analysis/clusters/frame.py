"""The clusters of a density at one time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...atoms import Atoms
from .fields import Field


@dataclass(frozen=True)
class Frame:
    """Clusters at one output time, tallest first.

    Attributes
    ----------
    t
        The time.
    positions
        (P, d) peak positions on the sphere.
    heights
        (P,) densities at the peaks (density units, like the snapshots); ``inf`` for a cluster
        whose top is an atom (:mod:`.atoms`).
    masses
        (P,) masses of the cluster regions.
    widths
        (P,) geodesic widths: ``sqrt`` of the second moment of the region about the peak.
    labels
        (cells,) cluster index of each cell of the analysis mesh (-1 when there is no cluster).
    peak_cells
        (P,) each cluster's top cell.
    maximum
        The global maximum of the density: the reconstructed height at the top cell (``inf``
        when there is an atom).
    above
        (cells,) whether the field reaches the threshold in each cell (a cluster that
        vanished has its old top cell below it, :mod:`.tracking`).
    atom_masses, atom_ids
        Hybrid runs: (P,) the mass of the atoms in each cluster (part of ``masses``) and the
        id of its heaviest atom (-1: none); None for runs without atoms.
    atoms
        Hybrid runs: all the atoms at this time (their distances time merges, :mod:`.tracking`).
    """

    t: float
    positions: np.ndarray
    heights: np.ndarray
    masses: np.ndarray
    widths: np.ndarray
    labels: np.ndarray
    peak_cells: np.ndarray
    maximum: float
    above: np.ndarray
    atom_masses: np.ndarray | None = None
    atom_ids: np.ndarray | None = None
    atoms: Atoms | None = None

    @property
    def count(self) -> int:
        return len(self.heights)


def analyse_field(field: Field, t: float, threshold: float, prominence: float) -> Frame:
    """Peaks, regions, masses and widths of a field (:mod:`.basins`, :mod:`.fields`).

    Parameters
    ----------
    field
        The density.
    t
        Its time.
    threshold
        Least field value at a cluster's top cell (density units).
    prominence
        Least relative depth of the dip separating a cluster from a taller one.
    """
    labels, peaks = field.clusters(threshold, prominence)
    d = field.mesh.d
    refined = [field.peak(int(c)) for c in peaks]
    positions = np.array([p for p, _ in refined]).reshape(-1, d)
    heights = np.array([h for _, h in refined])
    masses, widths = field.moments(labels, positions)
    top = int(np.argmax(field.values))
    maximum = heights[0] if len(peaks) and peaks[0] == top else field.peak(top)[1]
    parts = field.atom_parts(labels, len(peaks))
    atom_masses, atom_ids = parts if parts is not None else (None, None)
    return Frame(float(t), positions, heights, masses, widths, labels, peaks, float(maximum),
                 field.values >= threshold, atom_masses, atom_ids,
                 getattr(field, "atoms", None) if parts is not None else None)
