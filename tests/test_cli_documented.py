"""Documented behaviour of the CLI, run as users run it: ``python -m meanfield.cli`` in a new
process (forked by the tests' command server, tests/helpers/command_server.py; serially; the same
commands under mpirun are in test_mpi_jobs.py).

* ``meanfield resume RUN --set mesh.*`` / ``--set scheme.*`` is refused (exit 2, one line
  naming the setting, the run untouched): they would not continue the same run;
* ``[time] wall_limit`` ends ``meanfield run`` with exit code 3 after a checkpoint (status
  ``interrupted``), and ``meanfield resume`` then finishes it as if it had not stopped;
* ``meanfield plot RUN --format pdf`` writes its figures as PDF files.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import cli
from mpi4py import MPI

import meanfield
from meanfield.rundir import layout

CASE = """name = "case"
[mesh]
sphere = "S1"
resolution = 64
[model]
beta = 4.0
[nonlocal]
method = "direct"
[time]
t_final = 1.0
outputs = 4
"""
#: Seconds a command of these tests may take before it is killed.
TIMEOUT = 300


@pytest.fixture(autouse=True)
def _serial():
    if MPI.COMM_WORLD.size > 1:
        pytest.skip("starts its own processes: runs in the serial pass")


def meanfield_cli(*args: str) -> subprocess.CompletedProcess:
    """``meanfield args`` in a new process; a command still running after TIMEOUT seconds fails
    the test with its output."""
    try:
        return cli(list(args), Path.cwd(), timeout=TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"meanfield {' '.join(args)} still running after {TIMEOUT} s\n{exc.stdout!r}\n{exc.stderr!r}",
                    pytrace=False)


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def completed_run(tmp_path_factory) -> Path:
    """One run the module's tests read (each checks that it leaves the run as it found it, or writes elsewhere)."""
    tmp_path = tmp_path_factory.mktemp("completed")
    (tmp_path / "case.toml").write_text(CASE)
    out = tmp_path / "run"
    proc = meanfield_cli("run", str(tmp_path / "case.toml"), "--out", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("setting", ["mesh.resolution=128", "scheme.kind=dg1", 'scheme.kind="dg1"'])
def test_resume_refuses_to_change_the_mesh_or_the_scheme(completed_run, setting):
    before = _tree(completed_run)
    proc = meanfield_cli("resume", str(completed_run), "--t-final", "2.0", "--set", setting, "--quiet")
    key = setting.split("=")[0]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --set {key}: cannot change on resume"), lines
    assert "resumable settings: model.*, nonlocal.*" in lines[0]
    assert proc.stdout == "" and _tree(completed_run) == before


@pytest.mark.slow
def test_wall_limit_stops_with_exit_3_and_the_run_resumes_to_completion(tmp_path):
    """A wall limit of a microsecond: the run stops after its first step (a step and a
    checkpoint never fit), exit code 3; resumed with a larger limit, it ends where the
    uninterrupted run ends (FV with the direct field resumes exactly; compared to 1e-12)."""
    (tmp_path / "case.toml").write_text(CASE + "wall_limit = 1e-6\n")
    out = tmp_path / "run"
    proc = meanfield_cli("run", str(tmp_path / "case.toml"), "--out", str(out), "--quiet")
    assert proc.returncode == 3, proc.stderr
    assert "wall_limit" in proc.stderr and f"meanfield resume {out}" in proc.stderr, proc.stderr
    meta = json.loads((out / layout.METADATA).read_text())
    assert meta["status"] == "interrupted" and meta["interrupted_by"] == "wall_limit", meta
    assert 0.0 < meta["t_reached"] <= 0.25 and meta["outputs_written"] == 1, meta  # one step, at most to t = 0.25
    resumed = meanfield_cli("resume", str(out), "--set", "time.wall_limit=86400", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    run = meanfield.load_run(out)
    (tmp_path / "plain.toml").write_text(CASE)
    reference = meanfield.run(tmp_path / "plain.toml", out=tmp_path / "ref", comm=MPI.COMM_SELF, quiet=True)
    assert run.status == "completed" and [s["command"] for s in run.metadata["segments"]] == ["run", "resume"]
    assert np.array_equal(run.times, reference.times)
    assert np.abs(run.densities - reference.densities).max() <= 1e-12


def _pdf_pages(path: Path) -> int:
    """The number of pages of a PDF file (its page objects: ``/Type /Page``, not ``/Pages``)."""
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", path.read_bytes()))


def test_plot_format_pdf_writes_pdf_figures(completed_run, tmp_path):
    before = _tree(completed_run)
    proc = meanfield_cli("plot", str(completed_run), "--format", "pdf", "--no-movie", "--out", str(tmp_path / "p"))
    assert proc.returncode == 0, proc.stderr
    written = sorted(Path(line.removeprefix("wrote ")) for line in proc.stdout.splitlines() if line.startswith("wrote"))
    assert written and all(p.suffix == ".pdf" for p in written), proc.stdout
    assert {p.name for p in written} == {"density.pdf", "observables.pdf", "spacetime.pdf"}, written  # S^1
    for path in written:
        assert path.read_bytes()[:5] == b"%PDF-" and _pdf_pages(path) == 1, path
    assert not list((tmp_path / "p").glob("*.png"))
    assert _tree(completed_run) == before  # the figures went to --out
