"""Parameter sweeps: points and names, sweep.csv, reruns, job-array tasks, resuming killed and
interrupted points, particle sweeps with seeds, and bad input that writes nothing."""

from __future__ import annotations

import csv
import json
import os
import signal
import tomllib

import numpy as np
import pytest

import meanfield
from meanfield.config import ConfigError
from meanfield.engine.controller import RunInterrupted
from meanfield.rundir import layout
from meanfield.rundir.sweeps import plan_points
from meanfield.studies.grid import parse_grid, split_values
from meanfield.studies.sweep import sweep

BASE = {"name": "sw", "mesh": {"sphere": "S1", "resolution": 16}, "model": {"beta": 2.0},
        "time": {"t_final": 0.2, "outputs": 2}, "particles": {"dt": 0.05}, "output": {"xdmf": False}}
GRID = ["model.beta=1,4", "mesh.resolution=16,32"]
NAMES = ["0-beta=1,resolution=16", "1-beta=1,resolution=32", "2-beta=4,resolution=16", "3-beta=4,resolution=32"]


def _table(path) -> list[dict[str, str]]:
    with open(path / "sweep.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _config_of(run) -> dict:
    return tomllib.loads((run / layout.CONFIG).read_text())


def test_values_split_at_top_level_commas_only():
    assert split_values("1, 2.5,x") == ["1", "2.5", "x"]
    assert split_values('[[1.0, 0.0]], [[0.0, 1.0]],"a,b"') == ["[[1.0, 0.0]]", "[[0.0, 1.0]]", '"a,b"']
    assert parse_grid(["model.beta=1,4.5", 'initial.kind="vmf",uniform']) == \
        {"model.beta": [1, 4.5], "initial.kind": ["vmf", "uniform"]}


@pytest.mark.parametrize("spec, text", [("model.beta", "expected section.key"), ("model.beta=1,,2", "empty"),
                                        ("=1,2", "expected")])
def test_bad_grid_specs(spec, text):
    with pytest.raises(ConfigError, match=text):
        parse_grid([spec])
    with pytest.raises(ConfigError, match="given twice"):
        parse_grid(["model.beta=1", "model.beta=2"])


def test_point_names_are_readable_and_unique():
    points = plan_points({"time.dt": [0.1, 0.05], "particles.dt": [0.5], "initial.centers": [[[1.0, 0.0]]]})
    assert [p.directory for p in points] == ["0-time.dt=0.1,particles.dt=0.5,centers=1.0_0.0",
                                             "1-time.dt=0.05,particles.dt=0.5,centers=1.0_0.0"]
    assert points[1].overrides == ["time.dt=0.05", "particles.dt=0.5", "initial.centers=[\n    [\n        1.0,\n"
                                   "        0.0,\n    ],\n]"]


@pytest.mark.mpi
def test_two_by_two_sweep_gives_four_completed_runs_and_its_table(tmp_path, comm):
    result = sweep(BASE, GRID, out=tmp_path / "s", comm=comm, quiet=True)
    assert result.status == ["completed"] * 4 and result.ran == [0, 1, 2, 3] and not result.errors
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_dir()) == NAMES
    rows = _table(tmp_path / "s")
    assert [list(r) for r in rows[:1]] == [["index", "model.beta", "mesh.resolution", "directory", "status"]]
    assert [(r["model.beta"], r["mesh.resolution"], r["directory"], r["status"]) for r in rows] == \
        [("1", "16", NAMES[0], "completed"), ("1", "32", NAMES[1], "completed"), ("4", "16", NAMES[2], "completed"),
         ("4", "32", NAMES[3], "completed")]
    for name, (beta, cells) in zip(NAMES, [(1, 16), (1, 32), (4, 16), (4, 32)]):
        run = meanfield.load_run(tmp_path / "s" / name)
        assert run.status == "completed" and run.densities.shape == (3, cells)
        assert _config_of(tmp_path / "s" / name)["model"]["beta"] == beta
    again = sweep(BASE, GRID, out=tmp_path / "s", comm=comm, quiet=True)  # a rerun skips completed points
    assert again.ran == [] and again.status == ["completed"] * 4
    assert [len(meanfield.load_run(tmp_path / "s" / n).metadata["segments"]) for n in NAMES] == [1] * 4


@pytest.mark.mpi
def test_array_index_runs_exactly_one_point(tmp_path, comm):
    result = sweep(BASE, GRID, out=tmp_path / "s", array_index=2, comm=comm, quiet=True)
    assert result.ran == [2] and result.status == ["pending", "pending", "completed", "pending"]
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if p.is_dir()) == [NAMES[2]]
    assert [r["status"] for r in _table(tmp_path / "s")] == result.status
    rest = sweep(BASE, GRID, out=tmp_path / "s", comm=comm, quiet=True)
    assert rest.ran == [0, 1, 3] and rest.status == ["completed"] * 4


@pytest.mark.mpi
def test_dry_run_lists_and_writes_nothing(tmp_path, comm):
    result = sweep(BASE, GRID, out=tmp_path / "s", dry_run=True, comm=comm)
    assert [p.directory for p in result.points] == NAMES and result.status == ["pending"] * 4
    assert not (tmp_path / "s").exists()


def _stop_at(monkeypatch, t_stop: float, beta: float):
    """SIGTERM to this process when the PDE with this beta reaches t_stop."""
    from meanfield.drivers.pde import PDESimulation

    real = PDESimulation.step

    def step(self, t_end):
        dt = real(self, t_end)
        if self.problem.config.data["model"]["beta"] == beta and abs(self.t - t_stop) < 1e-12:
            os.kill(os.getpid(), signal.SIGTERM)
        return dt

    monkeypatch.setattr(PDESimulation, "step", step)


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("how", ["interrupted", "killed"])
def test_interrupted_or_killed_point_is_resumed(tmp_path, comm, monkeypatch, how):
    base = {**BASE, "time": {"t_final": 0.4, "outputs": 4, "dt": 0.05}}
    _stop_at(monkeypatch, 0.15, 4.0)
    with pytest.raises(RunInterrupted):
        sweep(base, ["model.beta=1,4"], out=tmp_path / "s", comm=comm, quiet=True)
    monkeypatch.undo()
    assert [r["status"] for r in _table(tmp_path / "s")] == ["completed", "interrupted"]
    point = tmp_path / "s" / "1-beta=4"
    if how == "killed" and comm.rank == 0:  # what kill -9 leaves: status running, no process holding the lock
        meta = json.loads((point / layout.METADATA).read_text())
        (point / layout.METADATA).write_text(json.dumps({**meta, "status": "running"}))
    comm.barrier()
    assert sweep(base, ["model.beta=1,4"], out=tmp_path / "s", dry_run=True, comm=comm).status[1] == how
    result = sweep(base, ["model.beta=1,4"], out=tmp_path / "s", comm=comm, quiet=True)
    assert result.ran == [1] and result.status == ["completed", "completed"]
    run = meanfield.load_run(point)
    assert [s["command"] for s in run.metadata["segments"]] == ["run", "resume"]
    reference = meanfield.run({**base, "model": {"beta": 4}}, out=tmp_path / "ref", comm=comm, quiet=True)
    assert np.array_equal(run.densities, reference.densities)


@pytest.mark.slow
@pytest.mark.mpi
def test_particle_sweep_with_seeds(tmp_path, comm):
    result = sweep(BASE, ["model.beta=1,4"], seeds=2, particles=True, overrides=["particles.n=20"],
                   out=tmp_path / "p", comm=comm, quiet=True)
    assert [p.directory for p in result.points] == ["0-beta=1,particles.seed=0", "1-beta=1,particles.seed=1",
                                                    "2-beta=4,particles.seed=0", "3-beta=4,particles.seed=1"]
    assert result.status == ["completed"] * 4
    runs = [meanfield.load_run(tmp_path / "p" / p.directory) for p in result.points]
    assert all(isinstance(r, meanfield.ParticleRunResult) and r.points.shape == (3, 20, 2) for r in runs)
    assert [_config_of(r.path)["particles"]["seed"] for r in runs] == [0, 1, 0, 1]
    assert not np.array_equal(runs[0].points[0], runs[1].points[0])  # another seed, other tokens
    assert [r["particles.seed"] for r in _table(tmp_path / "p")] == ["0", "1", "0", "1"]


# (other ranks than the one that found the error raise a RemoteInputError, a ValueError with its message)
@pytest.mark.mpi
@pytest.mark.parametrize("kwargs, text", [
    ({"grid": ["model.betta=1,4"]}, "model.betta: unknown key"),
    ({"grid": ["model.beta=1,-4"]}, "sweep point 1-beta=-4: model.beta: must be a number > 0"),
    ({"grid": GRID, "array_index": 4}, "--array-index: 4 is not a point"),
    ({"grid": GRID, "seeds": 2}, "--seeds: PDE runs are deterministic"),
    ({"grid": []}, "at least one --grid"),
    ({"grid": ["model.beta=1,4"], "particles": True}, "particles.n: required"),
])
def test_bad_input_writes_nothing(tmp_path, comm, kwargs, text):
    with pytest.raises(ValueError, match=text):
        sweep(BASE, out=tmp_path / "s", comm=comm, quiet=True, **kwargs)
    assert not (tmp_path / "s").exists()


@pytest.mark.mpi
def test_foreign_or_other_sweep_directory_is_refused(tmp_path, comm):
    if comm.rank == 0:
        (tmp_path / "foreign").mkdir()
        (tmp_path / "foreign" / "notes.txt").write_text("mine")
    comm.barrier()
    with pytest.raises(ValueError, match="not a meanfield sweep"):
        sweep(BASE, ["model.beta=1"], out=tmp_path / "foreign", comm=comm, quiet=True)
    assert sorted(p.name for p in (tmp_path / "foreign").iterdir()) == ["notes.txt"]
    sweep(BASE, ["model.beta=1"], out=tmp_path / "s", comm=comm, quiet=True)
    with pytest.raises(ValueError, match="another config or grid"):
        sweep(BASE, ["model.beta=2"], out=tmp_path / "s", comm=comm, quiet=True)


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    from meanfield.cli import main
    from meanfield.drivers.pde import PDESimulation

    real = PDESimulation.step

    def step(self, t_end):
        if self.problem.config.data["model"]["beta"] == 4:
            raise RuntimeError("injected failure")
        return real(self, t_end)

    monkeypatch.setattr(PDESimulation, "step", step)
    path = tmp_path / "base.toml"
    path.write_text('name = "sw"\n[mesh]\nsphere = "S1"\nresolution = 16\n[time]\nt_final = 0.2\noutputs = 2\n')
    code = main(["sweep", str(path), "--grid", "model.beta=4,1", "--out", str(tmp_path / "s"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1 and "error: sweep point 0-beta=4 failed: RuntimeError: injected failure" in err
    assert [r["status"] for r in _table(tmp_path / "s")] == ["failed", "completed"]
    assert "1  completed    1-beta=1" in out


def test_cli_takes_the_array_index_from_slurm(tmp_path, monkeypatch, capsys):
    from meanfield.cli import main

    path = tmp_path / "base.toml"
    path.write_text('name = "sw"\n[mesh]\nsphere = "S1"\nresolution = 16\n[time]\nt_final = 0.2\noutputs = 2\n')
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    assert main(["sweep", str(path), "--grid", "model.beta=1,4", "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert "sbatch --array=0-1" in capsys.readouterr().out
    assert [r["status"] for r in _table(tmp_path / "s")] == ["pending", "completed"]
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "x")
    assert main(["sweep", str(path), "--grid", "model.beta=1,4", "--out", str(tmp_path / "t"), "--quiet"]) == 2
    assert "SLURM_ARRAY_TASK_ID" in capsys.readouterr().err and not (tmp_path / "t").exists()
