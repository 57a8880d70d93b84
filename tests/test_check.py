"""meanfield check: the report agrees with what a run then does (cells, evaluator, modelled costs,
output times, files), and it writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from helpers.mpi import meanfield_job

import meanfield
from meanfield.drivers.planning import check_config
from meanfield.rundir import layout


@pytest.fixture(autouse=True)
def short_probes(monkeypatch):
    """Short probes in this process: the wall time a check measures is asserted here only of
    commands run as fresh processes (under mpirun); in this process the rest of the report is."""
    from meanfield.drivers import walltime

    monkeypatch.setattr(walltime, "PROBE_STEPPING", 0.05)
    monkeypatch.setattr(walltime, "PROBE_OUTPUTS", 3)


def _config(sphere: str, kind: str) -> dict:
    return {"name": "chk", "mesh": {"sphere": sphere, "resolution": 2 if sphere == "S2" else 48},
            "scheme": {"kind": kind}, "time": {"t_final": 0.1, "outputs": 2}}


@pytest.mark.parametrize("sphere, kind", [("S2", "fv"), ("S2", "dg1"), ("S1", "fv"), ("S1", "dg1")])
def test_check_predicts_the_run(tmp_path, sphere, kind):
    report = check_config(_config(sphere, kind), out=tmp_path / "r")
    assert report.directory_state == "new" and not (tmp_path / "r").exists()
    run = meanfield.run(_config(sphere, kind), out=tmp_path / "r", quiet=True)
    evaluator = run.metadata["evaluator"]
    assert report.cells == run.metadata["cells"] == len(run.cells) and report.vertices == len(run.vertices)
    [field] = report.fields
    assert field.evaluator == evaluator["method"]
    assert field.costs == evaluator["modelled_costs_s"]  # the same counts reach the same cost model
    assert np.array_equal(report.output_times, run.times)
    written = {p.name for p in tmp_path.joinpath("r").iterdir()} - {layout.SNAPSHOTS}
    named = {name for name in report.files if not name.startswith(layout.SNAPSHOTS)}
    assert named <= written and written - named == set()


def test_check_reports_a_refused_directory_and_a_fixed_step(tmp_path):
    meanfield.run(_config("S1", "fv"), out=tmp_path / "r", quiet=True)
    report = check_config(_config("S1", "fv"), ["time.dt=0.01", "nonlocal.method=\"fast\""], out=tmp_path / "r")
    assert report.steps == 10 and [f.evaluator for f in report.fields] == ["fast"]
    assert report.directory_state.startswith("a run would be refused") and "pass --overwrite" in report.directory_state
    text = report.format()
    for line in ("mesh:        S1 (resolution 48): 48 cells", "10 steps of dt = 0.01", "run.nc", "for the run"):
        assert line in text


def test_cli_check_writes_nothing(tmp_path, capsys, monkeypatch):
    from meanfield.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text('[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.5\n')
    assert main(["check", "c.toml"]) == 0
    out = capsys.readouterr().out
    assert 'name = "c"' in out and "run dir:     runs/c (new)" in out and "field:       " in out
    assert main(["check", "c.toml", "--set", "model.betta=2"]) == 2
    assert "model.betta: unknown key" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["c.toml"]


def test_check_lists_the_field_of_every_attention_layer(tmp_path):
    layered = {**_config("S1", "fv"), "model": {"beta": 1.0, "layers": [{"t_end": 0.05}, {"t_end": 0.1, "beta": 9.0}]}}
    report = check_config(layered, ["nonlocal.method=\"fast\""], out=tmp_path / "r")
    assert [f.start for f in report.fields] == [0.0, 0.05]
    assert "from t = 0.05: fast" in report.format()


def test_check_brackets_the_steps_of_an_adaptive_run(tmp_path):
    """Attention speeds up as clusters form: the run takes more steps than its initial step
    size gives, and no more than the model's speed bound allows."""
    clustering = {**_config("S1", "fv"), "model": {"beta": 9.0}, "time": {"t_final": 4.0, "outputs": 4}}
    report = check_config(clustering, out=tmp_path / "r")
    estimate = report.estimate
    assert estimate is not None and estimate.steps < estimate.most_steps
    steps = meanfield.run(clustering, out=tmp_path / "r", quiet=True).metadata["steps"]["steps"]
    assert estimate.fewest_steps < steps <= estimate.most_steps
    assert f"{estimate.fewest_steps} to {estimate.most_steps} at the extremes" in report.format()


def test_check_counts_the_steps_of_a_rotation(tmp_path):
    """A prescribed rotation keeps its speed: where the error does not limit the step (a loose
    time.tol), the estimate is the run's count, up to the steps shortened to land on output
    times."""
    rotation = {**_config("S2", "fv"), "model": {"velocity": "rotation"},
                "time": {"t_final": 0.5, "outputs": 5, "tol": 0.1}}
    report = check_config(rotation, out=tmp_path / "r")
    estimate = report.estimate
    assert estimate is not None and estimate.fewest_steps == estimate.most_steps == estimate.steps
    assert estimate.limits == ("cfl",)
    steps = meanfield.run(rotation, out=tmp_path / "r", quiet=True).metadata["steps"]["steps"]
    assert abs(steps - estimate.steps) <= len(report.output_times)


def test_check_brackets_the_error_limited_steps_of_a_rotation(tmp_path):
    """With the default tolerance the first steps of the rotation on this coarse mesh are set
    by the error (the cells' roughness relaxes fast), and they grow as it relaxes: the run's
    count lies between the CFL count and the count at the initial error-limited step."""
    rotation = {**_config("S2", "fv"), "model": {"velocity": "rotation"}, "time": {"t_final": 0.5, "outputs": 5}}
    report = check_config(rotation, out=tmp_path / "r")
    estimate = report.estimate
    assert estimate is not None and estimate.limits == ("error",)
    assert estimate.fewest_steps < estimate.steps == estimate.most_steps
    steps = meanfield.run(rotation, out=tmp_path / "r", quiet=True).metadata["steps"]["steps"]
    assert estimate.fewest_steps < steps <= estimate.most_steps
    assert "(by error)" in report.format()


def test_check_does_not_set_up_a_large_run(tmp_path):
    from meanfield.drivers.planning import ESTIMATE_CELLS

    report = check_config({**_config("S2", "fv"), "mesh": {"sphere": "S2", "resolution": 8}}, out=tmp_path / "r")
    assert report.cells > ESTIMATE_CELLS and report.estimate is None and report.steps is None
    assert f"not estimated (more than {ESTIMATE_CELLS} cells)" in report.format()


CLUSTERING = {"name": "chk", "mesh": {"sphere": "S1", "resolution": 256}, "model": {"beta": 9.0},
              "initial": {"kind": "expression",
                          "expression": "1 + 0.05*cos(3*arctan2(y, x)) + 0.05*sin(4*arctan2(y, x) + 1)"},
              "time": {"t_final": 10.0, "outputs": 4}, "output": {"xdmf": False}}


@pytest.mark.slow
def test_check_counts_the_steps_of_a_clustering_run_by_a_pilot_run(tmp_path):
    """Clusters form and attention speeds up: the run takes nearly three times the steps its
    initial step gives.  The pilot run on a mesh 4x coarser, its CFL-limited steps scaled by 4,
    counts them within a factor 2 (measured: 231 against 285 taken)."""
    report = check_config(CLUSTERING, out=tmp_path / "r")
    estimate = report.estimate
    assert estimate is not None and estimate.pilot is not None and estimate.pilot.coarsening == 4.0
    assert estimate.pilot.reached == CLUSTERING["time"]["t_final"] and report.steps == estimate.pilot.steps
    taken = meanfield.run(CLUSTERING, out=tmp_path / "r", quiet=True).metadata["steps"]["steps"]
    assert 0.5 < report.steps / taken < 2.0, (report.steps, taken)
    assert estimate.steps < 0.5 * taken  # the initial step's count, which the pilot replaces, is off by more
    assert f"~{report.steps} steps, counted by a pilot run on a mesh 4x coarser" in report.format()


@pytest.mark.slow
def test_check_gives_the_step_sizes_of_many_layers_as_a_range(tmp_path):
    """s2-random-init has 16 layers: the time line gives the range of their step sizes (once for
    the initial steps, once for the smallest), not 32 numbers."""
    example = Path(__file__).resolve().parents[1] / "runs" / "examples" / "s2-random-init.toml"
    report = check_config(example, ["mesh.resolution=1"], out=tmp_path / "r")
    assert report.estimate is not None and len(report.estimate.dts) == 16
    [line] = [line for line in report.format().splitlines() if line.startswith("time:")]
    assert line.count("over the 16 layers") == 2 and len(line) < 700, line
    assert f"{min(report.estimate.dts):.3g} to {max(report.estimate.dts):.3g} over the 16 layers (by " in line


#: The costs both commands of the test below take instead of measuring them: what they then say
#: depends on the job and the ranks alone (measured costs vary with the machine's load, which a
#: test cannot bound).
FIXED = {"startup": 2.0, "step": 1e-3, "output": 0.01, "checkpoint": 0.01}
FIXED_COSTS = ("from meanfield.drivers import walltime\n"
               f"walltime.Costs.measure = classmethod(lambda cls, *args, **kwargs: cls(**{FIXED!r}))\n")


@pytest.mark.slow
def test_cli_check_under_mpirun_agrees_with_check_for_as_many_ranks(tmp_path, cli_in_process, monkeypatch):
    """``mpirun -n 2 meanfield check`` and ``meanfield check --ranks 2`` (one process: this one)
    size the same job: the same ranks, cores, steps and, from the same measured costs, the same
    wall time and memory, neither oversubscribed; for a PDE run and for a command's job (particles)."""
    from meanfield.drivers import walltime

    monkeypatch.setattr(walltime.Costs, "measure", classmethod(lambda cls, *args, **kwargs: cls(**FIXED)))
    (tmp_path / "c.toml").write_text(
        'name = "c"\n[mesh]\nsphere = "S1"\nresolution = 128\n[model]\nbeta = 9.0\n[initial]\nkind = "expression"\n'
        'expression = "1 + 0.05*cos(3*arctan2(y, x))"\n[time]\nt_final = 4.0\noutputs = 4\n')
    particles = ["check", "particles", "c.toml", "--n", "20", "--no-diagnostics"]
    for job, kept in ((["check", "c.toml"], ("ranks:", "time: ", "wall time:", "memory:")),
                      (particles, ("ranks:", "  1 x", "wall time:"))):
        serial = cli_in_process([*job, "--ranks", "2"], tmp_path)
        parallel = meanfield_job(*job, ranks=2, patch=FIXED_COSTS, cwd=tmp_path)
        assert serial.returncode == parallel.returncode == 0, serial.stderr + parallel.stderr
        lines = [[line.split(": fits in")[0] for line in done.stdout.splitlines() if line.startswith(kept)]
                 for done in (serial, parallel)]  # memory: the job's, not the memory available at the moment
        assert lines[0] == lines[1], lines
        assert {line.split()[0] for line in lines[0]} >= {"ranks:", "wall"} and "ranks:       2 (" in lines[0][0]
        assert "oversubscribed" not in lines[0][0]
    assert sorted(os.listdir(tmp_path)) == ["c.toml"]


def test_the_cores_of_ranks_bound_each_to_a_core_are_counted_together():
    """A launcher that binds each rank to its own core (Open MPI does for two ranks) leaves each
    rank one core: the run has the cores of all its ranks, so ``check`` under it does not call
    two ranks on two cores oversubscribed."""
    from meanfield.drivers.walltime import cores

    class BoundRanks:  # what comm.allgather of the ranks' affinities gives under such a launcher
        size = 2

        def allgather(self, mine: set[int]) -> list[set[int]]:
            return [{0}, {1}]

    assert cores(BoundRanks()) == 2
    assert cores() == cores(None) == len(os.sched_getaffinity(0))


def test_check_falls_back_to_the_initial_step_count_when_the_pilot_run_fails(tmp_path, monkeypatch):
    from meanfield.drivers import planning

    def failing(problem):
        raise RuntimeError("no pilot here")

    monkeypatch.setattr(planning, "pilot_steps", failing)
    report = check_config({**_config("S1", "fv"), "model": {"beta": 9.0}}, out=tmp_path / "r")
    assert report.estimate is not None and report.estimate.pilot is None and report.steps == report.estimate.steps
    assert "at the initial step dt =" in report.format() and "pilot" not in report.format()


@pytest.mark.slow
def test_check_counts_the_steps_of_atoms_alone(tmp_path):
    """With atoms alone (the density gone to them) a hybrid run steps at the atoms' bound whatever
    the mesh: the pilot counts those steps from the bound, not scaled by its coarsening, as many
    as the run takes."""
    atoms = {**_config("S1", "fv"), "model": {"beta": 4.0}, "time": {"t_final": 5.0, "outputs": 5},
             "atoms": {"initial": [[0.5, 1.0, 0.0], [0.3, 0.0, 1.0], [0.2, -1.0, 0.2]]}}
    report = check_config(atoms, out=tmp_path / "r")
    pilot = report.estimate.pilot
    assert pilot is not None and pilot.absorbed == 0.0 and report.steps == 0
    taken = meanfield.run(atoms, out=tmp_path / "r", quiet=True).metadata["steps"]["steps"]
    assert pilot.atom_steps == taken
    assert f"0 + {taken} with atoms alone" in report.format()


SMALL = ('[mesh]\nsphere = "S1"\nresolution = 32\n[model]\nbeta = 4.0\n[time]\nt_final = 0.5\noutputs = 2\ndt = 0.01\n'
         '[particles]\ndt = 0.05\n')


def test_cli_check_sizes_a_particle_run(tmp_path, capsys, monkeypatch):
    """``meanfield check particles CONFIG ...`` reads the command's own arguments (its refusals
    name it) and sizes its run: the run's steps; nothing is written."""
    from meanfield.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(SMALL)
    assert main(["check", "particles", "c.toml", "--n", "20", "--no-diagnostics"]) == 0
    out = capsys.readouterr().out
    assert sorted(os.listdir(tmp_path)) == ["c.toml"]
    taken = meanfield.run_particles(str(tmp_path / "c.toml"), n=20, out=tmp_path / "p", quiet=True,
                                    overrides=["output.diagnostics=false"])
    steps = taken.metadata["steps"]["steps"]
    assert f"1 x particles n = 20 on S^1 ({steps} steps" in out and "wall time:   ~" in out
    assert main(["check", "particles", "c.toml", "--n", "0"]) == 2
    assert "particles.n: must be a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        main(["check", "validate", "c.toml", "--seeds", "2"])
    assert refused.value.code == 2
    assert "meanfield validate: the following arguments are required: --n" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_check_sizes_the_studies(tmp_path, capsys, monkeypatch):
    """A validation lists its PDE run, its response and each n's seeds (one batch each); a sweep
    its points; a response its forward and adjoint; a phase study a batch per beta; a fit its
    iterations; nothing is written."""
    from meanfield.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(SMALL)
    assert main(["check", "validate", "c.toml", "--n", "20,40", "--seeds", "2", "--no-refine"]) == 0
    out = capsys.readouterr().out
    for line in ("1 x PDE run:", "1 x response (the PDE forward and its adjoint", "1 x particles n = 20, the 2 seeds "
                 "as one batch", "1 x particles n = 40, the 2 seeds as one batch"):
        assert line in out, out
    assert "half the mesh size" not in out
    assert main(["check", "sweep", "c.toml", "--grid", "model.beta=1,2,4"]) == 0
    assert "3 x PDE runs (points; the first and the last sized)" in capsys.readouterr().out
    assert main(["check", "response", "c.toml", "--observable", "z", "--at", "0.5"]) == 0
    assert "1 x PDE forward and its adjoint:" in capsys.readouterr().out
    assert main(["check", "phase", "c.toml", "--betas", "1,2,4", "--at", "0.5", "--n", "8", "--prompts", "4"]) == 0
    assert "3 x batches of 4 prompts of n = 8 on S^1 (one per beta" in capsys.readouterr().out
    assert main(["check", "fit", "c.toml", "--target", "exp(y)", "--param", "model.beta", "--max-iter", "7"]) == 0
    assert "7 x evaluations: forward runs of 1 pair and the gradient (7 iterations of 1 to 2" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path)) == ["c.toml"]
