"""What the atoms did in one step, for the run log: merges, captures, combinations, absorptions.

The atoms at the start of a step, after its motion and after its events (:mod:`.hybrid`) are
compared by id, so the journal needs nothing from the capture and merge code:

* two atoms whose distance falls to :data:`~meanfield.merging.MERGE_DISTANCE` during the
  step **merge**: the clusters they carry have merged (:mod:`meanfield.merging`, the one
  definition of a merge: the line gives the merge time, interpolated within the step, the
  same time ``meanfield clusters`` and ``meanfield longtime`` report);
* an id that appears is a **capture** (a new atom: its position and mass);
* an id that disappears was **combined** by the solver into the surviving atom nearest to it
  (atoms closer than ``atoms.merge_distance``, :mod:`.merge`: a numerical step after the
  merge; the heavier atom's id is kept);
* the rest of a surviving atom's gain in mass, beyond the masses combined into it, is density
  it **absorbed** (a capture next to an existing atom, or the whole residual density with
  ``atoms.absorb_mass``); absorptions are frequent and small, so they are summed
  (:attr:`Journal.absorbed`) and shown on the periodic lines, not logged one by one.

Pure and serial: every rank holds the same atoms and computes the same journal.
"""

from __future__ import annotations

import numpy as np

from ..merging import MERGE_DISTANCE, crossing_time
from ..point_masses import Atoms

#: Mass gains below this (relative to the atom's mass) are round-off, not absorption.
GAIN_TOL = 1e-12


def where(x: np.ndarray) -> str:
    """A point on the sphere as ``(x, y, z)`` with 4 decimals."""
    return "(" + ", ".join(f"{v:.4f}" for v in x) + ")"


def distances(atoms: Atoms) -> np.ndarray:
    """(k, k) geodesic distances of the atoms."""
    x = atoms.positions
    return np.arccos(np.clip(x @ x.T, -1.0, 1.0))


def merges(start: Atoms, moved: Atoms, t0: float, t1: float) -> list[tuple[float, int, int]]:
    """``(time, i, j)`` of the atom pairs whose distance falls to the merge distance between
    ``start`` (at t0) and ``moved`` (the same atoms at t1), heavier atom first."""
    old = {int(i): k for k, i in enumerate(start.ids)}
    keep = [k for k, i in enumerate(moved.ids) if int(i) in old]
    if len(keep) < 2:
        return []
    ids = moved.ids[keep]
    s0 = distances(start)[np.ix_([old[int(i)] for i in ids], [old[int(i)] for i in ids])]
    s1 = distances(moved)[np.ix_(keep, keep)]
    masses = moved.masses[keep]
    out = []
    for a, b in zip(*np.nonzero(np.triu((s0 > MERGE_DISTANCE) & (s1 <= MERGE_DISTANCE), 1))):
        a, b = (a, b) if (masses[a], -ids[a]) >= (masses[b], -ids[b]) else (b, a)
        out.append((crossing_time(t0, s0[a, b], t1, s1[a, b]), int(ids[a]), int(ids[b])))
    return sorted(out)


class Journal:
    """The atoms' events, step by step (module docstring).

    Attributes
    ----------
    absorbed
        Density mass absorbed by existing atoms since the journal started (this run segment).
    """

    def __init__(self) -> None:
        self.absorbed = 0.0
        self._lines: list[str] = []

    def record(self, before: Atoms, after: Atoms, start: Atoms | None = None,
               times: tuple[float, float] | None = None) -> None:
        """Compare the atoms before and after one step's events; keep a line per merge, capture
        and combination.

        Parameters
        ----------
        before, after
            The atoms after the step's motion, and after its events.
        start, times
            The atoms at the start of the step, and the step's start and end times: for the
            merges (none are looked for without them).
        """
        old = {int(i): k for k, i in enumerate(before.ids)}
        if start is not None and times is not None:
            for t, i, j in merges(start, before, *times):
                self._lines.append(f"merge: atom {j} (mass {before.masses[old[j]]:.6g}) and atom {i} (mass "
                                   f"{before.masses[old[i]]:.6g}) within {MERGE_DISTANCE:g} rad at t = {t:.6f}")
        new = {int(i): k for k, i in enumerate(after.ids)}
        gained = {i: after.masses[k] - before.masses[old[i]] for i, k in new.items() if i in old}
        for i in sorted(set(old) - set(new)):
            x, m = before.positions[old[i]], before.masses[old[i]]
            host = int(after.ids[np.argmax(after.positions @ x)])
            if host in gained:
                gained[host] -= m
            self._lines.append(f"combine: atom {i} (mass {m:.6g}) into atom {host} at "
                               f"{where(after.positions[new[host]])}, mass now {after.masses[new[host]]:.6g} "
                               "(closer than atoms.merge_distance)")
        for i in sorted(set(new) - set(old)):
            k = new[i]
            self._lines.append(f"capture: atom {i} at {where(after.positions[k])}, mass {after.masses[k]:.6g}")
        self.absorbed += sum(g for i, g in gained.items() if g > GAIN_TOL * after.masses[new[i]])

    def absorbed_all(self, mass: float) -> None:
        """Keep a line for the whole residual density (``mass``) going to the atoms (``atoms.absorb_mass``)."""
        self._lines.append(f"absorption: the residual density (mass {mass:.3g}) went to the atoms; "
                           "atoms alone from here")

    def drain(self) -> list[str]:
        """The lines recorded since the last call."""
        lines, self._lines = self._lines, []
        return lines

    def status(self, atoms: Atoms) -> str:
        """``atoms 3, mass 0.998 (absorbed 0.0012)``: for the periodic log lines."""
        return f"atoms {atoms.count}, mass {atoms.mass:.6g} (absorbed {self.absorbed:.3g})"
