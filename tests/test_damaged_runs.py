"""Damaged run directories: resume from the newest intact state, and say which; damaged metadata.json.

Through the CLI as users meet it (``meanfield resume`` / ``meanfield info``: the CLI's ``main``
in this process, since the subject is what they print and the files, not the process). A run to
t = 0.4 is resumed to t = 0.8 after its checkpoint was damaged or deleted, and compared with an
uninterrupted run to t = 0.8 (the same outputs, the same densities or tokens to 1e-12: the
state used is the exact state of that output; 1e-12 and not bit for bit because the extended
output times 0.4 + 0.1 k differ from linspace(0, 0.8, 9) in the last bit).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import meanfield

BASE = ('name = "x"\n[mesh]\nsphere = "{sphere}"\nresolution = {resolution}\n[scheme]\nkind = "{scheme}"\n'
        "[time]\nt_final = 0.4\noutputs = 4\n[output]\nxdmf = false\n")
KINDS = {
    "fv": ("run", BASE.format(sphere="S1", resolution=64, scheme="fv")),
    "dg1": ("run", BASE.format(sphere="S1", resolution=64, scheme="dg1")),
    "particles": ("particles", BASE.format(sphere="S2", resolution=1, scheme="fv")),
    "hybrid": ("run", BASE.format(sphere="S1", resolution=64, scheme="dg1") + "[model]\nbeta = 9.0\n"
               "[atoms]\ncapture = true\n"),
}


def start(folder: Path, kind: str, out: str, t_final: float = 0.4, outputs: int = 4) -> Path:
    """The run of ``kind`` to ``t_final`` made through the Python API in this process (the runs
    that are damaged and their references; what is tested, ``resume``, runs through the CLI)."""
    from mpi4py import MPI

    command, text = KINDS[kind]
    config = folder / f"{out}.toml"
    config.write_text(text.replace("t_final = 0.4\noutputs = 4", f"t_final = {t_final}\noutputs = {outputs}"))
    if command == "particles":
        meanfield.run_particles(config, n=300, out=folder / out, comm=MPI.COMM_SELF, quiet=True)
    else:
        meanfield.run(config, out=folder / out, comm=MPI.COMM_SELF, quiet=True)
    return folder / out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """Per kind: a run to t = 0.4 (copied by each test) and the uninterrupted reference to t = 0.8."""
    folder = tmp_path_factory.mktemp("damaged-runs")
    return {kind: (start(folder, kind, f"{kind}-short"), start(folder, kind, f"{kind}-long", 0.8, 8))
            for kind in ("fv", "dg1", "particles")}


def same_run(path: Path, reference: Path, atol: float = 1e-12) -> None:
    a, b = meanfield.load_run(path), meanfield.load_run(reference)
    np.testing.assert_allclose(a.times, b.times, rtol=0, atol=1e-12)  # extended times continue the spacing
    values = (a.points, b.points) if hasattr(a, "points") else (a.densities, b.densities)
    np.testing.assert_allclose(values[0], values[1], rtol=0, atol=atol)


@pytest.mark.parametrize("damage", ["garbage", "deleted"])
def test_damaged_checkpoint_resumes_from_the_previous_one(cli_in_process, tmp_path, runs, damage):
    short, long = runs["fv"]
    run = Path(shutil.copytree(short, tmp_path / "run"))
    if damage == "garbage":
        (run / "checkpoint.npz").write_bytes(b"not a checkpoint")
    else:
        (run / "checkpoint.npz").unlink()
    done = cli_in_process(["resume", "run", "--t-final", "0.8", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    problem = "damaged" if damage == "garbage" else "missing"
    assert f"checkpoint.npz: {problem}" in done.stdout and "resuming from checkpoint.previous.npz at t = 0.3" \
        in done.stdout, done.stdout
    segment = json.loads((run / "metadata.json").read_text())["segments"][-1]
    assert segment["resumed_from"] == "checkpoint.previous.npz"
    if damage == "garbage":  # the damaged file is kept, not replaced by the next checkpoint
        assert (run / "checkpoint.npz.damaged").read_bytes() == b"not a checkpoint"
    same_run(run, long)


@pytest.mark.parametrize("kind", ["fv", "dg1", "particles"])
def test_no_checkpoint_resumes_from_the_newest_full_snapshot(cli_in_process, tmp_path, runs, kind):
    short, long = runs[kind]
    run = Path(shutil.copytree(short, tmp_path / "run"))
    (run / "checkpoint.npz").unlink()
    (run / "checkpoint.previous.npz").write_bytes(b"garbage")
    done = cli_in_process(["resume", "run", "--t-final", "0.8", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "checkpoint.npz: missing; resuming from snapshots/0004.npz at t = 0.4" in done.stdout, done.stdout
    assert "the run stopped before its first output" not in done.stdout + done.stderr
    # the snapshot holds the step controller's state: the run takes the steps the long one took
    same_run(run, long)
    steps = [json.loads((folder / "metadata.json").read_text())["steps"] for folder in (run, long)]
    assert [{k: v for k, v in s.items() if k in ("steps", "rejected", "limits")} for s in steps] == \
        [{k: v for k, v in steps[1].items() if k in ("steps", "rejected", "limits")}] * 2, steps


@pytest.mark.parametrize("kind", ["fv", "dg1"])
def test_a_snapshot_without_the_step_controller_resumes_within_the_step_error(cli_in_process, tmp_path, runs, kind):
    """A run directory written before snapshots held the controller's state still resumes: its
    error controller starts afresh there, so the run continues to within the steps' error
    (time.tol = 1e-3 relative to a step's change), not to round-off."""
    short, long = runs[kind]
    run = Path(shutil.copytree(short, tmp_path / "run"))
    for name in ("checkpoint.npz", "checkpoint.previous.npz"):
        (run / name).unlink()
    snapshot = run / "snapshots" / "0004.npz"
    with np.load(snapshot) as data:
        arrays = {k: data[k] for k in data.files if k != "stepper"}
    assert len(arrays) < len(np.load(snapshot).files)  # the entry was there
    np.savez(snapshot, **arrays)
    done = cli_in_process(["resume", "run", "--t-final", "0.8", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resuming from snapshots/0004.npz at t = 0.4" in done.stdout, done.stdout
    gap = np.abs(meanfield.load_run(run).densities - meanfield.load_run(long).densities).max()
    assert 0 < gap < 1e-5, gap


def test_a_damaged_newest_snapshot_is_passed_over(cli_in_process, tmp_path, runs):
    short, long = runs["fv"]
    run = Path(shutil.copytree(short, tmp_path / "run"))
    for name in ("checkpoint.npz", "checkpoint.previous.npz"):
        (run / name).unlink()
    (run / "snapshots" / "0004.npz").write_bytes(b"cut short")
    done = cli_in_process(["resume", "run", "--t-final", "0.8", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resuming from snapshots/0003.npz at t = 0.3" in done.stdout, done.stdout
    same_run(run, long)


def test_no_intact_state_is_refused_naming_the_outputs_on_disk(cli_in_process, tmp_path):
    """A hybrid run's snapshots are not a full state (the atoms' id counter is only in the
    checkpoint): refused, outputs left as they are, and not "stopped before its first output"."""
    run = start(tmp_path, "hybrid", "run")
    for name in ("checkpoint.npz", "checkpoint.previous.npz"):
        (run / name).unlink()
    before = sorted(p.name for p in (run / "snapshots").iterdir())
    done = cli_in_process(["resume", "run", "--t-final", "0.8"], tmp_path)
    assert done.returncode == 2
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "checkpoint.npz: missing" in line and "5 output(s) on disk" in line, line
    assert "first output" not in line
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == before


def test_no_output_at_all_says_so(cli_in_process, tmp_path, runs):
    short, _ = runs["fv"]
    run = Path(shutil.copytree(short, tmp_path / "run"))
    for name in ("checkpoint.npz", "checkpoint.previous.npz"):
        (run / name).unlink()
    shutil.rmtree(run / "snapshots")
    done = cli_in_process(["resume", "run"], tmp_path)
    assert done.returncode == 2 and "the run stopped before its first output" in done.stderr, done.stderr


def test_garbage_metadata_is_named_with_the_way_back(cli_in_process, tmp_path, runs):
    short, long = runs["fv"]
    run = Path(shutil.copytree(short, tmp_path / "run"))
    (run / "metadata.json").write_text("\x00\x01 not json")
    for command in (["info", "run"], ["resume", "run", "--t-final", "0.8"]):
        done = cli_in_process(command, tmp_path)
        line = done.stderr.strip()
        assert done.returncode == 2 and len(line.splitlines()) == 1, done.stderr
        assert "run/metadata.json: damaged" in line and "not a meanfield run" not in line, line
        assert "move it aside" in line and "meanfield resume run" in line, line
    assert (run / "metadata.json").read_text() == "\x00\x01 not json"  # never replaced by the program
    (run / "metadata.json").rename(run / "metadata.json.damaged")  # what the message says to do
    done = cli_in_process(["resume", "run", "--t-final", "0.8", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["kind"] == "pde" and "metadata_rebuilt" in meta
    assert json.loads(cli_in_process(["info", "run", "--json"], tmp_path).stdout)["t_reached"] == pytest.approx(0.8)
    same_run(run, long)
