"""A resumed run equals the uninterrupted one, for every kind of run and across rank counts.

Each case runs through the CLI (``mpirun -n 2`` for two ranks; on one rank its ``main`` in the
test's process), is stopped by SIGTERM after a chosen step (a fault injected before the CLI
starts: the moment is a step count, not a wall-clock time), and is resumed with ``meanfield
resume`` on the same or on another rank count (on one rank, again in the test's process: the
subject is the state it stops with and resumes from; the exit code checked is then ``main``'s,
on two ranks the job's). Every output of the finished run (densities, DG1 vertex values, atom
masses and positions, token positions, observables) must be within 1e-12 of a run that was
never interrupted (one rank). The interruption falls between two outputs, after the layer
boundary for the layered cases and after the first capture for the hybrid case, so the
checkpoint has to carry the step plan, the layer and the atoms.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers.mpi import mpirun
from helpers.s1_cases import CAPTURE as COLLAPSE_INTO_ATOMS
from helpers.s1_cases import COLLAPSING, two_bumps
from mpi4py import MPI

import meanfield
from meanfield.cli import main
from meanfield.rundir.checkpoint import Checkpoint

pytestmark = pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="starts its own MPI jobs: runs in the serial suite")

TOL = 1e-12
TIMEOUT = 180

S1 = two_bumps(4.0, 3.0) + """[output]
xdmf = false
"""
S2 = """name = "case"
[mesh]
sphere = "S2"
resolution = 2
[model]
beta = 4.0
[initial]
kind = "vmf"
centers = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
kappas = [3.0, 3.0]
[output]
xdmf = false
"""
# two clusters that collapse onto a few cells and are captured as atoms by t = 0.5; the density
# stays (absorb_mass = 0) and keeps the step small, so that step 80 falls between two outputs
CAPTURE = COLLAPSING + COLLAPSE_INTO_ATOMS
# a causal run (4 position slices) whose positions start from different densities
CAUSAL = """
mask = "causal"
[positions]
slices = 4
[initial]
kind = "expression"
expression = "exp(3*(1 - s)*{a} + 3*s*{b})"
"""
LAYERS = """
[[model.layers]]
t_end = 0.25
[[model.layers]]
t_end = 1.0
beta = 2.0
[model.layers.ffn]
W = [[0.3, -0.5], [0.8, 0.2]]
A = [[1.0, 0.4], [-0.6, 0.9]]
b = [0.1, -0.2]
activation = "tanh"
"""


def time_section(t_final: float, outputs: int, particle_dt: float | None = None) -> str:
    text = f"[time]\nt_final = {t_final}\noutputs = {outputs}\n"
    return text + (f"[particles]\ndt = {particle_dt}\n" if particle_dt is not None else "")


def method(name: str) -> str:
    return f'[nonlocal]\nmethod = "{name}"\n'


def dg1() -> str:
    return '[scheme]\nkind = "dg1"\n'


def causal(config: str, a: str, b: str) -> str:
    """``config`` with the causal mask and an initial density in the position s (peaked at ``a``
    for the first positions, at ``b`` for the last)."""
    head, tail = config.split("[initial]")
    return head.replace("beta = 4.0\n", "beta = 4.0" + CAUSAL.format(a=a, b=b)) + "[output]" + tail.split("[output]")[1]


@dataclass(frozen=True)
class Case:
    """A run to interrupt: its config, whether it is a particle run, and the step after which
    SIGTERM arrives (between two outputs)."""

    config: str
    stop_after: int
    particles: bool = False


CASES = {
    "fv-S1-direct": Case(S1 + method("direct") + time_section(1.0, 4), 8),
    "fv-S2-fast": Case(S2 + method("fast") + time_section(0.5, 2), 3),
    "dg1-S1-fast": Case(S1 + dg1() + method("fast") + time_section(0.5, 2), 7),
    "dg1-S2-direct": Case(S2 + dg1() + method("direct") + time_section(0.3, 2), 5),
    "hybrid-atoms-S1-fast": Case(CAPTURE + method("fast") + time_section(0.75, 3), 80),
    "layers-dg1-S1-fast": Case(S1.replace("beta = 4.0\n", "beta = 4.0" + LAYERS) + dg1() + method("fast")
                               + time_section(1.0, 4), 20),
    "particles-S1-direct": Case(S1 + method("direct") + time_section(1.0, 4, 0.01), 37, particles=True),
    "particles-S1-fast": Case(S1 + method("fast") + time_section(1.0, 4, 0.01), 37, particles=True),
    "particles-S2-fast": Case(S2 + method("fast") + time_section(0.5, 2, 0.01), 31, particles=True),
    "layers-particles-S1-fast": Case(S1.replace("beta = 4.0\n", "beta = 4.0" + LAYERS) + method("fast")
                                     + time_section(1.0, 4, 0.01), 43, particles=True),
    "causal-fv-S1-fast": Case(causal(S1, "x", "y") + method("fast") + time_section(1.0, 4), 9),
    "causal-dg1-S2-direct": Case(causal(S2, "z", "x") + dg1() + method("direct") + time_section(0.3, 2), 6),
}
TOKENS = 300
#: (ranks of the interrupted run, ranks of the resume).  Every case but those of :data:`COVERED`
#: runs one pair that changes the rank count in ``make test`` (1 -> 2 and 2 -> 1 alternately, so
#: each is run by half of the cases); the other pairs are marked exhaustive (``make test-exhaustive``).
PAIRS = ((1, 1), (1, 2), (2, 1))
QUICK = {name: (1, 2) if i % 2 == 0 else (2, 1) for i, name in enumerate(CASES)}
#: Cases whose resume path cases of ``make test`` take (the same scheme or kind of run, on the
#: same sphere, across the same rank change), named beside them: all their pairs are exhaustive.
COVERED = {"fv-S1-direct": "causal-fv-S1-fast (1 -> 2, and the slices)",
           "dg1-S2-direct": "causal-dg1-S2-direct (2 -> 1, and the slices)",
           "particles-S1-direct": "particles-S1-fast (2 -> 1) and particles-S2-fast (1 -> 2)"}
MATRIX = [pytest.param(name, pair, id=f"{name}-{pair[0]}to{pair[1]}",
                       marks=() if QUICK[name] == pair and name not in COVERED
                       else (pytest.mark.slow, pytest.mark.exhaustive))
          for name in CASES for pair in PAIRS]

#: Injected before the CLI starts (in a job's ``python -c``, or executed in the test's process):
#: SIGTERM to rank 0 after the given number of controller steps.
STOP_AFTER = """import os, signal
from meanfield.engine import controller
_step = controller.Controller._step
_taken = [0]
def _stop_after(self, target):
    dt = _step(self, target)
    _taken[0] += 1
    if _taken[0] == {steps} and self.comm.rank == 0:
        os.kill(os.getpid(), signal.SIGTERM)
    return dt
controller.Controller._step = _stop_after
"""


def job(args: list[str], ranks: int, stop_after: int | None = None) -> subprocess.CompletedProcess:
    """``mpirun -n ranks meanfield args``."""
    patch = STOP_AFTER.format(steps=stop_after) if stop_after is not None else ""
    code = f"import sys\n{patch}\nfrom meanfield.cli import main\nsys.exit(main({args!r}))\n"
    command = [str(mpirun()), "-n", str(ranks), sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)


def stopped_here(args: list[str], stop_after: int, monkeypatch) -> int:
    """The exit code of ``meanfield args`` (the CLI's ``main``, in this process) stopped by
    SIGTERM after ``stop_after`` steps (:data:`STOP_AFTER`, undone at the end of the test)."""
    from meanfield.engine import controller

    monkeypatch.setattr(controller.Controller, "_step", controller.Controller._step)  # restored after the test
    exec(STOP_AFTER.format(steps=stop_after), {})
    return main(args)


def start_args(case: Case, config: Path, out: Path) -> list[str]:
    kind = ["particles", str(config), "--n", str(TOKENS)] if case.particles else ["run", str(config)]
    return [*kind, "--out", str(out), "--quiet"]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """The uninterrupted one-rank run of each case (in this process), made when a test first
    asks for it."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            case, folder = CASES[name], tmp_path_factory.mktemp(f"reference-{name}")
            (folder / "case.toml").write_text(case.config)
            if case.particles:
                meanfield.run_particles(folder / "case.toml", n=TOKENS, out=folder / "run", comm=MPI.COMM_SELF,
                                        quiet=True)
            else:
                meanfield.run(folder / "case.toml", out=folder / "run", comm=MPI.COMM_SELF, quiet=True)
            made[name] = folder / "run"
        return made[name]

    return get


def differences(run, reference) -> dict[str, float]:
    """Largest absolute difference per output array (all output times)."""
    out: dict[str, float] = {}
    for key in ("points", "densities", "vertex_densities"):
        a, b = getattr(run, key, None), getattr(reference, key, None)
        if a is not None or b is not None:
            out[key] = float(np.abs(a - b).max())
    if getattr(reference, "atoms", None) is not None:
        for k, (a, b) in enumerate(zip(run.atoms, reference.atoms, strict=True)):
            assert np.array_equal(a.ids, b.ids), f"output {k}: atom ids {a.ids} != {b.ids} uninterrupted"
        out["atom_masses"] = max(float(np.abs(a.masses - b.masses).max(initial=0.0))
                                 for a, b in zip(run.atoms, reference.atoms))
        out["atom_positions"] = max(float(np.abs(a.positions - b.positions).max(initial=0.0))
                                    for a, b in zip(run.atoms, reference.atoms))
    for key in ("mass", "order"):
        out[f"observables.{key}"] = float(np.abs(run.observables[key] - reference.observables[key]).max())
    for key, values in getattr(reference, "observables_by_position", {}).items():
        out[f"observables_by_position.{key}"] = float(np.abs(run.observables_by_position[key] - values).max())
    return out


@pytest.mark.parametrize("name, pair", MATRIX)
def test_resume_equals_the_uninterrupted_run(tmp_path, references, name, pair, monkeypatch):
    case, (first, second) = CASES[name], pair
    config = tmp_path / "case.toml"
    config.write_text(case.config)
    out = tmp_path / "run"
    if first == 1:
        assert stopped_here(start_args(case, config, out), case.stop_after, monkeypatch) == 128 + signal.SIGTERM
    else:
        stopped = job(start_args(case, config, out), ranks=first, stop_after=case.stop_after)
        assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr
    checkpoint = Checkpoint.load(out)
    where = (f"{name}: SIGTERM after step {case.stop_after} (t = {checkpoint.t:.6g}) on {first} rank(s), "
             f"resumed on {second}")
    assert 0 < checkpoint.t < checkpoint.output_times[-1] and checkpoint.t not in checkpoint.output_times, where
    if "atoms" in name:
        assert checkpoint.state["atom_masses"].size >= 1, f"{where}: no atom captured before the interruption"
    if "layers" in name:
        assert checkpoint.t > 0.25, f"{where}: interrupted before the layer boundary"
    if second == 1:  # the CLI's main in this process: the subject is the state it resumes from
        assert main(["resume", str(out), "--quiet"]) == 0, where
    else:
        resumed = job(["resume", str(out), "--quiet"], ranks=second)
        assert resumed.returncode == 0, f"{where}\n{resumed.stderr}"
    run, reference = meanfield.load_run(out), meanfield.load_run(references(name))
    assert run.status == "completed" and np.array_equal(run.times, reference.times), where
    assert [s["command"] for s in run.metadata["segments"]] == ["run", "resume"], where
    diff = differences(run, reference)
    print(f"{where}: largest differences {diff}")
    assert max(diff.values()) <= TOL, f"{where}: largest differences from the uninterrupted run {diff}"
