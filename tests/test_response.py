"""``meanfield response``: values, n_var and sensitivities against independent computations.

The adjoint itself is tested against the forward solver in ``test_adjoint.py``; here the
driver's outputs: ``n_var`` at t = 0 against the variance of the observable under rho0 in
closed form, ``d_value_d_<parameter>`` against central differences of two forward runs, the
CLI as users run it (files, columns, exit codes), one against two ranks, and (slow) the
package's own particle ensembles against ``n_var``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from helpers.cli import cli

import meanfield
from meanfield.adjoint import AdjointSolver
from meanfield.config import load_config
from meanfield.discrete_pde import DiscretePDE
from meanfield.problem import Problem

CASE = {"name": "resp", "mesh": {"sphere": "S1", "resolution": 128},
        "model": {"attention": "softmax", "beta": 3.0, "Q": [[1, 0.3], [0, 1]], "V": [[1, 0.5], [-0.2, 1]]},
        "initial": {"kind": "expression", "expression": "1 + 0.4*cos(x + 2*y)"},
        "time": {"t_final": 1.0, "dt": 0.01}}
TOML = """name = "resp"
[mesh]
sphere = "S1"
resolution = 64
[model]
attention = "softmax"
beta = 3.0
Q = [[1, 0.3], [0, 1]]
[initial]
kind = "expression"
expression = "1 + 0.4*cos(x + 2*y)"
[time]
t_final = 1.0
"""


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_variance_at_time_zero(tmp_path):
    """At t = 0, n_var = Var_rho0(phi): uniform on S^1, phi = x: 1/2; phi = x^2 - y^2: 1/2;
    uniform on S^2 (level 4), phi = z: 1/3 (cell-centroid quadrature, O(h^2))."""
    s1 = {**CASE, "initial": {"kind": "uniform"}}
    result = meanfield.response(s1, ["x", "c2=x**2 - y**2"], [0.0], out=tmp_path / "s1", quiet=True)
    assert [r["observable"] for r in result.rows] == ["x", "c2"]
    for row in result.rows:
        assert abs(row["n_var"] - 0.5) < 1e-3 and abs(row["value"]) < 1e-12
    s2 = {**CASE, "mesh": {"sphere": "S2", "resolution": 4}, "model": {"beta": 1.0}, "initial": {"kind": "uniform"}}
    (row,) = meanfield.response(s2, ["z"], [0.0], out=tmp_path / "s2", quiet=True).rows
    assert abs(row["n_var"] - 1.0 / 3.0) < 2e-3


def forward_value(data: dict, phi, T: float) -> float:
    from mpi4py import MPI

    sim = DiscretePDE(Problem(load_config(data)), MPI.COMM_WORLD)
    state = AdjointSolver(sim).forward([T])[T]
    g = sim.scheme.geometry
    n = g.num_owned
    return float(np.sum(g.measure[:n] * sim.scheme.cell_averages(state) * phi(g.centroid[:n])))


@pytest.mark.parametrize("parameter", ["model.beta", "model.Q[0][1]", "model.V[1][0]"])
def test_parameter_derivative_against_two_runs(parameter, tmp_path):
    """d_value_d_<parameter> (the adjoint's int_0^T <rho grad Phi, dX/dparameter>) against central
    differences of two forward runs with the parameter moved by +-1e-4 (fixed step)."""
    result = meanfield.response(CASE, ["q=x**2 + 0.3*y"], [1.0], wrt=[parameter], out=tmp_path / "r", quiet=True)
    derivative = result.rows[0][f"d_value_d_{parameter}"]
    h = 1e-4
    from meanfield.studies.response import moved_config, parse_parameter

    base = load_config(CASE)
    moved = [moved_config(base, parse_parameter(parameter), parameter, s * h) for s in (1, -1)]
    values = [forward_value(config.data, lambda p: p[:, 0] ** 2 + 0.3 * p[:, 1], 1.0) for config, _ in moved]
    fd = (values[0] - values[1]) / (moved[0][1] - moved[1][1])
    assert abs(fd) > 1e-3 and abs(derivative - fd) < 1e-5 * max(1.0, abs(fd)), (derivative, fd)


@pytest.mark.slow
def test_cli_writes_the_table_the_functions_and_pictures(cli_in_process, tmp_path):
    (tmp_path / "case.toml").write_text(TOML)
    done = cli_in_process(["response", "case.toml", "--observable", "z2=x**2", "--observable", "y", "--at",
                           "0,0.5", "--wrt", "model.beta", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "runs" / "resp-response"
    rows = read_rows(out / "response.csv")
    assert list(rows[0]) == ["observable", "t", "value", "n_var", "d_value_d_model.beta"]
    assert [(r["observable"], float(r["t"])) for r in rows] == [("z2", 0.0), ("y", 0.0), ("z2", 0.5), ("y", 0.5)]
    with xr.open_dataset(out / "influence.nc") as ds:
        assert ds.attrs["Conventions"].startswith("CF") and ds["influence_0"].dims == ("time", "cell")
        assert ds["influence_0"].attrs["observable"] == "z2"
        np.testing.assert_allclose(ds["influence_0"].values[0], ds["x"].values ** 2)  # Phi(t=0) = phi
    assert (out / "influence-z2.png").is_file() and (out / "influence-y.png").is_file()  # named as the docs say
    assert (out / "metadata.json").is_file()


def test_cli_shows_the_progress_of_both_sweeps_unless_quiet(cli_in_process, tmp_path, monkeypatch):
    """Without a terminal the forward run and the backward sweep log their progress on stderr
    (a line at every tenth, the last at 100%), before the table on stdout; --quiet shows none.
    The adjoint's memory decision is logged and in the metadata: every step's stages kept by
    default, none under ``MEANFIELD_ADJOINT_MEMORY=0``."""
    (tmp_path / "case.toml").write_text(TOML)
    args = ["response", "case.toml", "--observable", "y", "--at", "0.3", "--set", "time.t_final=0.3", "--set",
            "time.dt=0.01"]
    done = cli_in_process([*args, "--out", "loud"], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    backward = [line for line in lines if "backward sweep: step" in line]
    assert any("forward run: t" in line and "(100%)" in line for line in lines), done.stderr
    assert len(backward) == 10 and "(100%)" in backward[-1] and "ETA" in backward[-1], done.stderr
    assert "n_var" in done.stdout
    assert "adjoint memory: stages of 30 of 30 steps kept" in done.stderr and "0 steps recomputed" in done.stderr
    memory = json.loads((tmp_path / "loud" / "metadata.json").read_text())["adjoint_memory"]
    assert memory["stages_kept"] == memory["steps"] == 30 and memory["steps_recomputed"] == 0
    monkeypatch.setenv("MEANFIELD_ADJOINT_MEMORY", "0")
    quiet = cli_in_process([*args, "--out", "quiet", "--quiet"], tmp_path)
    assert quiet.returncode == 0 and "sweep" not in quiet.stderr + quiet.stdout, quiet.stderr
    memory = json.loads((tmp_path / "quiet" / "metadata.json").read_text())["adjoint_memory"]
    assert memory["stages_kept"] == 0 and memory["steps_recomputed"] == 30
    assert memory["budget"] == "MEANFIELD_ADJOINT_MEMORY=0"


@pytest.mark.parametrize(("extra", "field"), [
    (["--observable", "w + x", "--at", "1"], "--observable"),
    (["--observable", "rho*x", "--at", "1"], "--observable"),
    (["--observable", "x", "--at", "1.5"], "--at"),
    (["--observable", "x", "--at", "-1"], "--at"),
    (["--observable", "x", "--at", "1", "--wrt", "model.gamma"], "--wrt"),
    (["--observable", "x", "--at", "1", "--set", "atoms.initial=[[0.1, 1.0, 0.0]]"], "atoms"),
])
def test_cli_refuses_bad_input(cli_in_process, extra, field, tmp_path):
    """Exit 2, one line naming the field, nothing written."""
    (tmp_path / "case.toml").write_text(TOML)
    done = cli_in_process(["response", "case.toml", "--out", "out", "--quiet", *extra], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and field in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_one_and_two_ranks_agree(tmp_path, cli_in_process):
    """mpirun -n 2 gives the table and the influence functions of one rank, to round-off."""
    (tmp_path / "case.toml").write_text(TOML.replace('sphere = "S1"\nresolution = 64', 'sphere = "S2"\nresolution = 2'))
    outs = []
    for ranks in (1, 2):  # the one-rank reference in this process; the subject is the two-rank job
        args = ["response", "case.toml", "--observable", "z", "--at", "0.5,1", "--wrt", "model.beta", "--quiet",
                "--set", "model.Q=[[1, 0.3, 0], [0, 1, 0], [0, 0, 1]]", "--out", f"r{ranks}"]
        done = cli_in_process(args, tmp_path) if ranks == 1 else cli(args, tmp_path, ranks=ranks)
        assert done.returncode == 0, done.stderr
        outs.append(tmp_path / f"r{ranks}")
    one, two = (read_rows(o / "response.csv") for o in outs)
    for a, b in zip(one, two):
        for key in ("value", "n_var", "d_value_d_model.beta"):
            assert abs(float(a[key]) - float(b[key])) <= 1e-10 * max(1.0, abs(float(a[key]))), key
    with xr.open_dataset(outs[0] / "influence.nc") as d1, xr.open_dataset(outs[1] / "influence.nc") as d2:
        scale = np.abs(d1["influence_0"].values).max()
        assert np.abs(d1["influence_0"].values - d2["influence_0"].values).max() <= 1e-10 * scale


@pytest.mark.slow
def test_particle_ensembles_match_n_var(tmp_path):
    """n Var <phi, mu_n(T)> over 200 seeds of n = 400 iid tokens (the package's particle system)
    against n_var within three standard errors of the sample variance (chi-square: relative
    standard error sqrt(2/(seeds-1)) = 0.1).  Measured: n Var = 0.343 against n_var = 0.359.  The
    tokens take RK4 steps of 0.05 (n Var the same to 1e-7 relative with the PDE's 0.01)."""
    T, n, seeds = 1.0, 400, 200
    data = {**CASE, "mesh": {"sphere": "S1", "resolution": 256}, "time": {"t_final": T}, "particles": {"dt": 0.05},
            "model": {"attention": "softmax", "beta": 4.0}}
    (row,) = meanfield.response(data, ["x**2"], [T], out=tmp_path / "r", quiet=True).rows
    from meanfield.drivers.particles import build_particles

    values = []
    for seed in range(seeds):
        sim = build_particles(data, n=n, seed=seed)
        while T - sim.t > 1e-12:
            sim.step(T)
        values.append(float(np.mean(sim.x[:, 0] ** 2)))
    measured = n * np.var(values, ddof=1)
    assert abs(measured / row["n_var"] - 1.0) < 3 * np.sqrt(2.0 / (seeds - 1)), (measured, row["n_var"])
