"""Runs end to end: the run directory, load_run, bad input, failures and rank independence."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.mpi import mpirun
from mpi4py import MPI

import meanfield
from meanfield.cli import main
from meanfield.config import DEFAULT_CONFIG, load_config
from meanfield.problem import Problem

SMALL = {
    "name": "small",
    "mesh": {"sphere": "S2", "resolution": 2},
    "model": {"attention": "softmax", "beta": 4.0},
    "time": {"t_final": 0.5, "outputs": 2},
}


def test_run_directory_and_load_run(tmp_path):
    out = tmp_path / "run"
    held = []  # what the run held in memory at each output, before it was written
    result = meanfield.run(SMALL, out=out, comm=MPI.COMM_SELF, quiet=True,
                           callbacks=[lambda state: held.append((state.t, state.density.copy(), state.observables))])
    for name in ("config.toml", "metadata.json", "observables.csv", "mesh.npz", "run.log", "density.xdmf"):
        assert (out / name).is_file(), name
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["ranks"] == 1 and meta["cells"] == 320
    assert {"dolfinx", "numpy", "petsc"} <= set(meta["versions"]) and meta["timings"]["total"] > 0
    assert np.allclose(result.times, [0, 0.25, 0.5])
    assert result.densities.shape == (3, 320) and result.centroids.shape == (320, 3)
    masses = result.densities @ result.areas
    assert np.allclose(masses, 1.0, rtol=0, atol=1e-13)
    assert np.allclose(result.observables["mass"], 1.0, rtol=0, atol=1e-13)
    assert np.allclose(result.observables["rho_min"], result.densities.min(axis=1))
    # the written config reproduces the run
    again = load_config(out / "config.toml")
    assert again.data == load_config(SMALL).data | {"output": again.data["output"]}
    # what was read back is what the run held: times, densities, observables
    assert [t for t, _, _ in held] == result.times.tolist()
    assert np.array_equal(np.stack([density for _, density, _ in held]), result.densities)
    for name in ("mass", "rho_min", "rho_max"):
        assert np.array_equal([row[name] for _, _, row in held], result.observables[name]), name


def test_embedded_default_matches_the_example_file():
    example = Path(__file__).parents[1] / "runs" / "examples" / "s2-clustering.toml"
    assert load_config(example).data == load_config(None).data == load_config(DEFAULT_CONFIG).data


def _write(tmp_path, text):
    path = tmp_path / "case.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, field",
    [
        ('name = "x"\nbogus = 1\n', "bogus: unknown key"),
        ('name = "x"\n[model]\nbeta = 0\n', "model.beta: must be a number > 0"),
        ('name = "x"\n[model]\nbeta = -2.0\n', "model.beta: must be a number > 0"),
        ('name = "x"\n[model]\nbetta = 2.0\n', "model.betta: unknown key"),
        ('name = "x"\n[model]\nQ = [[1.0, 0.0], [0.0, 1.0]]\n', "model.Q: must be a 3x3 matrix"),
        ('name = "x"\n[model]\nV = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]\n', "model.V: must be a 3x3 matrix"),
        ('name = "x"\n[initial]\nkind = "expression"\nexpression = "z"\n', "initial: density is -"),
        ('name = "x"\n[initial]\nkind = "expression"\nexpression = "0*x"\n', "initial: density has total mass 0"),
        ('name = "x"\n[initial]\nkind = "expression"\nexpression = "open(1)"\n', "initial.expression"),
        ('name = "x"\n[initial]\nkind = "vmf"\ncenters = [[0, 0]]\n', "initial.centers"),
        ('name = "x"\n[mesh]\nfile = "missing.msh"\n', "mesh.file: no such file"),
        ('name = "x"\n[mesh]\nsphere = "S3"\n', "mesh.sphere"),
        ('name = "x"\n[time]\ncfl = 1.5\n', "time.cfl"),
        ('name = "x"\n[nonlocal]\nmethod = "fmm"\n', "nonlocal.method"),
        ('name = "x"\n[model\n', "not valid TOML"),
    ],
)
def test_bad_configs_give_one_error_and_write_nothing(tmp_path, capsys, text, field):
    out = tmp_path / "out"
    code = main(["run", str(_write(tmp_path, text)), "--out", str(out), "--quiet"])
    printed = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(printed) == 1 and printed[0].startswith("error: ") and field in printed[0], printed
    assert not out.exists()


def test_mesh_off_the_sphere_is_refused_before_writing(tmp_path, capsys):
    from meanfield.mesh import RawMesh, icosphere, write_mesh_file

    m = icosphere(1)
    write_mesh_file(tmp_path / "bad.vtu", RawMesh(m.points * 1.001, m.cells))
    out = tmp_path / "out"
    code = main(["run", str(_write(tmp_path, 'name = "x"\n[mesh]\nfile = "bad.vtu"\n')), "--out", str(out)])
    assert code == 2 and "off the unit sphere" in capsys.readouterr().err and not out.exists()


def test_set_overrides(tmp_path):
    cfg = load_config(SMALL, ["model.beta=9", "time.outputs=[0.1, 0.2]", "name=renamed"])
    assert cfg.data["model"]["beta"] == 9 and Problem(cfg).name == "renamed"
    assert np.allclose(Problem(cfg).time.output_times, [0, 0.1, 0.2, 0.5])
    with pytest.raises(ValueError, match="model.gamma: unknown key"):
        load_config(SMALL, ["model.gamma=1"])


def test_failed_run_keeps_what_it_wrote(tmp_path):
    """A fixed step that becomes unstable as the USA clusters sharpen stops the run with a
    message saying where and why; earlier outputs stay readable and metadata says failed."""
    out = tmp_path / "run"
    case = {**SMALL, "model": {"attention": "unnormalized", "beta": 4.0},
            "time": {"t_final": 3.0, "outputs": 30, "dt": 0.01}}
    with pytest.raises(RuntimeError, match=r"violates the CFL bound at t = "):
        meanfield.run(case, out=out, comm=MPI.COMM_SELF, quiet=True)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["status"] == "failed" and "CFL" in meta["error"]
    partial = meanfield.load_run(out)
    assert 1 <= len(partial.times) < 31 and partial.times[-1] < 3.0
    assert len(partial.observables["t"]) == len(partial.times)


@pytest.mark.mpi
def test_rank_count_independence(parallel_comm, tmp_path):
    """The same run on all ranks and on one rank gives the same densities to 1e-10."""
    comm = parallel_comm
    base = tmp_path  # the fixture shares rank 0's folder
    case = {**SMALL, "mesh": {"sphere": "S2", "resolution": 3}, "time": {"t_final": 1.0, "outputs": 4}}
    parallel = meanfield.run(case, out=base / "parallel", comm=comm, quiet=True)
    if comm.rank == 0:
        serial = meanfield.run(case, out=base / "serial", comm=MPI.COMM_SELF, quiet=True)
        assert parallel.metadata["ranks"] == comm.size
        assert np.allclose(parallel.centroids, serial.centroids, rtol=0, atol=1e-15)
        assert np.abs(parallel.densities - serial.densities).max() <= 1e-10
        for key in ("energy", "mass", "order"):
            assert np.allclose(parallel.observables[key], serial.observables[key], rtol=1e-12, atol=0)
    comm.barrier()


def test_cli_under_mpirun_prints_once(tmp_path):
    """`mpirun -n 2 meanfield run` works and only rank 0 prints the result line."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [str(mpirun()), "-n", "2", sys.executable, "-m", "meanfield.cli", "run", "--out", str(out), "--quiet",
         "--set", "mesh.resolution=2", "--set", "time.t_final=0.2", "--set", "time.outputs=1"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("results:") == 1
    assert json.loads((out / "metadata.json").read_text())["ranks"] == 2


def test_mesh_and_info_commands(tmp_path, capsys):
    assert main(["mesh", "S2", "--level", "2", "-o", str(tmp_path / "s.msh")]) == 0
    assert main(["mesh", "S1", "--cells", "40", "-o", str(tmp_path / "c.vtu")]) == 0
    assert main(["info"]) == 0
    printed = capsys.readouterr().out
    assert "320 cells" in printed and "40 cells" in printed and '"dolfinx"' in printed


def test_mesh_file_run_equals_generated_mesh_run(tmp_path):
    """A config naming a mesh file (relative to the config's folder) runs like the generated mesh."""
    assert main(["mesh", "S2", "--level", "2", "-o", str(tmp_path / "sphere.msh")]) == 0
    cfg = tmp_path / "case.toml"
    cfg.write_text('name = "from-file"\n[mesh]\nfile = "sphere.msh"\n[time]\nt_final = 0.3\noutputs = 1\n')
    from_file = meanfield.run(cfg, out=tmp_path / "a", comm=MPI.COMM_SELF, quiet=True)
    generated = meanfield.run({**SMALL, "time": {"t_final": 0.3, "outputs": 1}}, out=tmp_path / "b",
                              comm=MPI.COMM_SELF, quiet=True)
    assert np.abs(from_file.densities - generated.densities).max() < 1e-13


def test_set_initial_kind_replaces_the_previous_kinds_parameters():
    cfg = load_config(SMALL, ["initial.kind='uniform'"])
    assert cfg.data["initial"] == {"kind": "uniform"}
    cfg = load_config(SMALL, ["initial.kind='harmonic'", "initial.degree=2"])
    assert cfg.data["initial"] == {"kind": "harmonic", "degree": 2}


@pytest.mark.mpi
def test_on_root_and_everywhere_raise_on_every_rank():
    """Rank 0's error (on_root), or the lowest failing rank's (everywhere), reaches every rank:
    bad input as a ValueError, anything else as a RuntimeError, and the failing rank keeps its own."""
    from meanfield.collective import everywhere, is_collective, on_root

    comm = MPI.COMM_WORLD
    assert on_root(comm, lambda: 42) == 42
    with pytest.raises(ValueError, match="bad input") as info:
        on_root(comm, lambda: (_ for _ in ()).throw(ValueError("bad input")))
    assert is_collective(info.value)
    with pytest.raises(OSError if comm.rank == 0 else RuntimeError, match="disk full"):
        on_root(comm, lambda: (_ for _ in ()).throw(OSError("disk full")))
    last = comm.size - 1

    def fail_on_last() -> int:
        if comm.rank == last:
            raise KeyError("only the last rank")
        return comm.rank

    with pytest.raises(KeyError if comm.rank == last else RuntimeError, match="only the last rank") as info:
        everywhere(comm, fail_on_last)
    assert is_collective(info.value)
    assert everywhere(comm, lambda: comm.rank) == comm.rank


@pytest.mark.parametrize("example", sorted((Path(__file__).parents[1] / "runs" / "examples").glob("*.toml")),
                         ids=lambda p: p.stem)
def test_example_configs_are_valid(example):
    cfg = load_config(example)
    assert Problem(cfg).name == example.stem


def test_blow_up_is_reported_with_where_and_when(tmp_path, monkeypatch):
    """A non-finite density stops the run with BlowUpError naming the time and the cell, the run
    keeps its earlier outputs and records the failure, and the CLI exits 1."""
    from meanfield.discretisation.fv import FiniteVolumeScheme
    from meanfield.timestepping import BlowUpError

    real = FiniteVolumeScheme.rhs_and_bound

    def rate(self, state):
        dstate, r = real(self, state)
        if self.calls_after_output is not None:
            self.calls_after_output += 1
            if self.calls_after_output > 6:
                dstate = dstate.copy()
                dstate[7] = np.inf
        return dstate, r

    monkeypatch.setattr(FiniteVolumeScheme, "rhs_and_bound", rate)
    monkeypatch.setattr(FiniteVolumeScheme, "calls_after_output", 0, raising=False)
    with pytest.raises(BlowUpError, match=r"non-finite at t = .* first at cell \d+ at x = "):
        meanfield.run(SMALL, out=tmp_path / "o", comm=MPI.COMM_SELF, quiet=True)
    meta = json.loads((tmp_path / "o" / "metadata.json").read_text())
    assert meta["status"] == "failed" and meta["error"].startswith("BlowUpError")
    assert len(meanfield.load_run(tmp_path / "o").times) == 1
    assert main(["run", "--out", str(tmp_path / "cli"), "--quiet", "--set", "mesh.resolution=2",
                 "--set", "time.t_final=0.5"]) == 1


def test_load_run_stops_before_a_damaged_snapshot_and_names_it(tmp_path, caplog):
    out = tmp_path / "o"
    meanfield.run({**SMALL, "time": {"t_final": 0.5, "outputs": 4}}, out=out, comm=MPI.COMM_SELF, quiet=True)
    damaged = out / "snapshots" / "0002.npz"
    damaged.write_bytes(damaged.read_bytes()[:100])
    run = meanfield.load_run(out)
    assert np.allclose(run.times, [0.0, 0.125]) and len(run.observables["t"]) == 2
    assert run.damaged == [str(damaged)] and str(damaged) in caplog.text
    with pytest.raises(FileNotFoundError, match="not a meanfield run"):
        meanfield.load_run(tmp_path)
