"""The run log of a hybrid run says what the atoms do (meanfield.atoms.journal)."""

from __future__ import annotations

import csv
import re

import numpy as np
from mpi4py import MPI

from meanfield.atoms import Atoms
from meanfield.atoms.journal import Journal
from meanfield.drivers.pde import run
from meanfield.rundir.results import load_run

# the default S^1 initial density (three bumps) at beta = 9: they collapse into three atoms,
# the third initial atom sits 1e-3 rad from the first and the solver combines them at the first step
CONFIG = {"mesh": {"sphere": "S1", "resolution": 128}, "model": {"beta": 9.0}, "nonlocal": {"method": "direct"},
          "time": {"t_final": 12.0, "outputs": 4},
          "atoms": {"capture": True, "absorb_mass": 1e-3, "merge_distance": 2e-3,
                    "initial": [[0.01, 0.0, 1.0], [0.02, np.sin(1e-3), np.cos(1e-3)]]},
          "output": {"log_every": "40 steps", "xdmf": False}}
NUMBER = r"([-+0-9.e]+)"


def _on_circle(*angles: float) -> np.ndarray:
    return np.array([[np.cos(a), np.sin(a), 0.0] for a in angles])


def test_journal_tells_merges_captures_combinations_and_absorption():
    # atom 2 approaches atom 1 from 0.02 to 0.005 rad during a step from t = 1 to t = 2:
    # the merge distance 0.01 is reached at t = 1 + log(0.02/0.01) / log(0.02/0.005) = 1.5
    start = Atoms(np.array([0.2, 0.3, 0.1]), _on_circle(0.0, np.pi / 2, np.pi / 2 + 0.02), np.array([0, 1, 2]))
    before = Atoms(start.masses, _on_circle(0.0, np.pi / 2, np.pi / 2 + 0.005), start.ids)
    after = Atoms(np.array([0.2 + 0.05, 0.4, 0.15]), np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]),
                  np.array([0, 1, 3]))
    journal = Journal()
    journal.record(before, after, start, (1.0, 2.0))
    lines = journal.drain()
    assert lines == ["merge: atom 2 (mass 0.1) and atom 1 (mass 0.3) within 0.01 rad at t = 1.500000",
                     "combine: atom 2 (mass 0.1) into atom 1 at (0.0000, 1.0000, 0.0000), mass now 0.4 "
                     "(closer than atoms.merge_distance)",
                     "capture: atom 3 at (0.0000, 0.0000, 1.0000), mass 0.15"]
    # atoms already within the merge distance at the step's start do not merge again
    journal.record(before, before, before, (2.0, 3.0))
    assert journal.drain() == []
    # atom 0 gained 0.05 from the density; atom 1's gain is the merged atom's mass
    assert abs(journal.absorbed - 0.05) < 1e-15 and journal.drain() == []
    assert journal.status(after) == "atoms 3, mass 0.8 (absorbed 0.05)"


def test_hybrid_run_log(tmp_path):
    run(CONFIG, out=tmp_path / "h", comm=MPI.COMM_SELF, quiet=True)
    text = (tmp_path / "h" / "run.log").read_text()
    result = load_run(tmp_path / "h")
    with open(tmp_path / "h" / "observables.csv") as fh:
        rows = list(csv.DictReader(fh))

    combined = re.findall(r"t = \S+  combine: atom (\d+) \(mass " + NUMBER + r"\) into atom (\d+)", text)
    assert combined == [("0", "0.01", "1")]  # the lighter initial atom into the heavier
    assert "merge:" not in text  # they were never apart (1e-3 rad from the start): no merge of clusters
    captures = re.findall(r"t = " + NUMBER + r"  capture: atom (\d+) at \(.*\), mass " + NUMBER, text)
    ids = sorted({int(i) for a in result.atoms for i in a.ids})
    assert ids == [0, 1, *sorted(int(c[1]) for c in captures)]  # every new id of the snapshots was logged
    # a bump collapses next to atom 1 and is absorbed by it; the other two become atoms
    assert len(captures) == 2 and all(0.2 < float(c[2]) < 0.34 for c in captures)
    assert all(0 < float(c[0]) < 12.0 for c in captures)
    absorbed = re.findall(r"t = " + NUMBER + r"  absorption: the residual density \(mass " + NUMBER, text)
    assert len(absorbed) == 1 and 0 < float(absorbed[0][1]) <= 1e-3

    # periodic progress lines carry the atoms; the last one agrees with the state it reports
    progress = re.findall(r"step \d+  t = .*atoms (\d+), mass " + NUMBER + r" \(absorbed " + NUMBER + r"\)", text)
    assert len(progress) >= 3
    # output lines: the atoms and the density's range, labelled as the density's
    outputs = re.findall(r"atoms (\d+) holding " + NUMBER + r"  (?:density rho in|no density left)", text)
    assert [(int(k), float(m)) for k, m in outputs] == [
        (int(float(r["atom_count"])), float(f"{float(r['atom_mass']):.6g}")) for r in rows]
    assert outputs[-1][0] == "3" and abs(float(outputs[-1][1]) - 1.0) < 1e-6
    assert float(rows[-1]["rho_max"]) == 0.0 and "rho in [0.000e+00" not in text  # after the absorption
