"""What the atoms did in one step, for the run log: captures, merges, absorptions.

The atoms before and after a step's events (:mod:`.hybrid`) are compared by id, so the
journal needs nothing from the capture and merge code:

* an id that appears is a **capture** (a new atom: its position and mass);
* an id that disappears was **merged** into the surviving atom nearest to it (a merge keeps
  the heavier atom's id, :mod:`.merge`);
* the rest of a surviving atom's gain in mass, beyond the masses merged into it, is density
  it **absorbed** (a capture next to an existing atom, or the whole residual density with
  ``atoms.absorb_mass``); absorptions are frequent and small, so they are summed
  (:attr:`Journal.absorbed`) and shown on the periodic lines, not logged one by one.

Pure and serial: every rank holds the same atoms and computes the same journal.
"""

from __future__ import annotations

import numpy as np

from .state import Atoms

#: Mass gains below this (relative to the atom's mass) are round-off, not absorption.
GAIN_TOL = 1e-12


def where(x: np.ndarray) -> str:
    """A point on the sphere as ``(x, y, z)`` with 4 decimals."""
    return "(" + ", ".join(f"{v:.4f}" for v in x) + ")"


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

    def record(self, before: Atoms, after: Atoms) -> None:
        """Compare the atoms before and after one step's events; keep a line per capture and merge."""
        old = {int(i): k for k, i in enumerate(before.ids)}
        new = {int(i): k for k, i in enumerate(after.ids)}
        gained = {i: after.masses[k] - before.masses[old[i]] for i, k in new.items() if i in old}
        for i in sorted(set(old) - set(new)):
            x, m = before.positions[old[i]], before.masses[old[i]]
            host = int(after.ids[np.argmax(after.positions @ x)])
            if host in gained:
                gained[host] -= m
            self._lines.append(f"merge: atom {i} (mass {m:.6g}) into atom {host} at "
                               f"{where(after.positions[new[host]])}, mass now {after.masses[new[host]]:.6g}")
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
