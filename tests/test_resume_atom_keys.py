"""``meanfield resume --set atoms.KEY=...``: the atom phase's accuracy and cost controls change on
resume, as ``t_final`` does; ``atoms.capture`` and ``atoms.initial`` do not.

The resumes run through the CLI (its ``main``, in this process: the subject is what ``resume``
writes and refuses, not its process); the first segment through the Python API.  The evidence that a
changed key acts from the resume on is a contrast, not a stored number: the same run resumed
twice to the same end time, once with ``atoms.absorb_mass`` raised above the density's mass
(which must then be zero at the end, all of it in the atoms) and once without (the density
keeps its mass); the outputs before the resume are those of the first segment.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.s1_cases import CAPTURE, COLLAPSING
from mpi4py import MPI

import meanfield
from meanfield.rundir import layout

# two clusters that collapse onto a few cells and are captured as atoms by t = 0.5; the core
# level leaves their rims in the density (absorb_mass = 0: they stay there)
CASE = (COLLAPSING + '[nonlocal]\nmethod = "direct"\n[time]\nt_final = 0.75\noutputs = 3\n'
        + CAPTURE.replace("lipschitz_step = 0.25\n", ""))
CHANGES = ["atoms.absorb_mass=0.5", "atoms.lipschitz_step=0.5", "atoms.merge_distance=0.002",
           "atoms.core_level=0.2", "atoms.core_cells=4", "atoms.min_height=10.0", "atoms.core_fraction=0.8"]


@pytest.fixture(autouse=True)
def _serial():
    if MPI.COMM_WORLD.size > 1:
        pytest.skip("starts its own processes: runs in the serial pass")


@pytest.fixture(scope="module")
def first_segment(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("atoms-resume")
    (folder / "case.toml").write_text(CASE)
    meanfield.run(folder / "case.toml", out=folder / "run", quiet=True)
    return folder / "run"


def _density_mass(run) -> np.ndarray:
    return run.densities @ run.areas


def test_atom_keys_change_on_resume_and_act_from_there(first_segment, tmp_path, cli_in_process):
    before = meanfield.load_run(first_segment)
    assert before.atoms[-1].count >= 1 and _density_mass(before)[-1] > 1e-3  # atoms, and rims in the density
    plain, changed = tmp_path / "plain", tmp_path / "changed"
    shutil.copytree(first_segment, plain)
    shutil.copytree(first_segment, changed)
    proc = cli_in_process(["resume", str(plain), "--t-final", "1.5", "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    sets = [a for change in CHANGES for a in ("--set", change)]
    proc = cli_in_process(["resume", str(changed), "--t-final", "1.5", *sets, "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    a, b = meanfield.load_run(plain), meanfield.load_run(changed)
    meta = json.loads((changed / layout.METADATA).read_text())
    assert [s["command"] for s in meta["segments"]] == ["run", "resume"]
    assert meta["segments"][-1]["overrides"] == CHANGES
    atoms = b.config["atoms"]
    assert (atoms["absorb_mass"], atoms["lipschitz_step"], atoms["core_cells"]) == (0.5, 0.5, 4)
    assert np.array_equal(a.times, b.times) and b.times[-1] == 1.5
    old = len(before.times)
    for run in (a, b):  # the first segment is untouched
        assert np.abs(run.densities[:old] - before.densities).max() <= 1e-12
    # from the resume on: the raised absorb_mass sends the density to the atoms, the plain one keeps it
    assert _density_mass(a)[-1] > 1e-3
    assert _density_mass(b)[-1] == 0.0 and abs(b.atoms[-1].mass - 1.0) <= 1e-12


@pytest.mark.parametrize("setting", ["atoms.capture=false", "atoms.initial=[]"])
def test_capture_and_initial_atoms_do_not_change_on_resume(first_segment, setting, cli_in_process):
    proc = cli_in_process(["resume", str(first_segment), "--t-final", "1.5", "--set", setting, "--quiet"],
                          first_segment.parent)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    line = proc.stderr.strip()
    key = setting.split("=")[0]
    assert line.startswith(f"error: --set {key}: cannot change on resume"), line
    assert "atoms.absorb_mass" in line and "atoms.lipschitz_step" in line and "atoms.merge_distance" in line
