"""Particle run outputs that scale with d: array variables in run.nc (a ``prompt`` dimension,
``component`` dimensions), the pair statistics, the diagnostics (bounded samples with a stated
error, ``--no-diagnostics``) and a SIGTERM while the last output or the diagnostics are written."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from helpers.cli import cli
from helpers.sphere import random_sphere_points
from mpi4py import MPI

import meanfield
from meanfield.analysis.diagnostics import OutputDiagnostics
from meanfield.drivers.particles import run_particles
from meanfield.particles.pairs import cluster_count, clustered_fraction, mean_inner_product, sampled_error
from meanfield.rundir import layout
from meanfield.rundir.header import MeshTable
from meanfield.spheres import S2


def _config(d: int, **time) -> dict:
    return {"name": "p", "mesh": {"sphere": "S2", "resolution": 1}, "model": {"beta": 1.0},
            "initial": {"kind": "uniform"}, "time": {"t_final": 0.5, "outputs": 2, **time},
            "particles": {"d": d, "dt": 0.1}}


def test_high_d_outputs_are_array_variables_and_load_back(tmp_path):
    """d = 16: observables.csv holds scalars only; run.nc the moments as arrays along (time, prompt,
    component[, component_2]), each prompt's scalars along (time, prompt), no variable per entry."""
    n, d = 8, 16
    run = run_particles(_config(d), n=n, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    assert not any(k.startswith(("mean_", "m2_")) for k in run.observables if k != "mean_inner_product")
    with xr.open_dataset(tmp_path / "p" / layout.RUN_FILE) as ds:
        assert ds["mean"].dims == ("time", "prompt", "component") and ds["mean"].shape == (3, 1, d)
        assert ds["second_moment"].dims == ("time", "prompt", "component", "component_2")
        assert ds["energy_by_prompt"].dims == ("time", "prompt") and ds.sizes["prompt"] == 1
        assert len(ds.data_vars) < 25  # not one per entry (d (d + 3) / 2 = 152 of them)
        points = ds["points"].values
        np.testing.assert_allclose(ds["mean"].values[:, 0], points.mean(axis=1), atol=1e-15)
        # the second moments of unit vectors have trace 1; the mean's norm is the order parameter
        np.testing.assert_allclose(np.trace(ds["second_moment"].values[:, 0], axis1=1, axis2=2), 1.0, atol=1e-14)
        np.testing.assert_allclose(np.linalg.norm(ds["mean"].values[:, 0], axis=1), run.observables["order"],
                                   atol=1e-14)
        xr.testing.assert_identical(ds, run.to_xarray())
    # the mean inner product from the order parameter: sum_{i != j} <x_i, x_j> = n^2 |m|^2 - n
    order = run.observables["order"]
    np.testing.assert_allclose(run.observables["mean_inner_product"], (n * n * order**2 - n) / (n * (n - 1)),
                               atol=1e-13)
    assert np.array_equal(meanfield.load_run(tmp_path / "p").points, points)


def test_low_d_run_file_keeps_the_observables_columns_and_adds_the_arrays(tmp_path):
    """On S^2 the moment entries stay columns of observables.csv (the PDE's, compared by validate);
    run.nc holds them once, as arrays."""
    run = run_particles(_config(3), n=6, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    assert {"mean_0", "m2_12"} <= set(run.observables)
    with xr.open_dataset(tmp_path / "p" / layout.RUN_FILE) as ds:
        assert "mean_0" not in ds and "m2_12" not in ds
        np.testing.assert_allclose(ds["second_moment"].values[:, 0, 1, 2], run.observables["m2_12"], atol=1e-15)


def test_pair_statistics_of_identical_and_of_spread_tokens():
    rng = np.random.default_rng(0)
    same = np.tile(random_sphere_points(rng, 1, 128), (32, 1))
    assert cluster_count(same) == 1 and clustered_fraction(same) == 1.0
    assert mean_inner_product(same) == pytest.approx(1.0, abs=1e-14)
    spread = random_sphere_points(rng, 32, 128)  # |<x_i, x_j>| ~ 1/sqrt(128): no pair near 1
    assert cluster_count(spread) == 32 and clustered_fraction(spread) == 0.0
    gram = spread @ spread.T
    assert mean_inner_product(spread) == pytest.approx((gram.sum() - np.trace(gram)) / (32 * 31), abs=1e-15)


def _clusters(rng, n: int, shares=(0.5, 0.3, 0.2), d: int = 3, spread: float = 1e-3) -> np.ndarray:
    centres = random_sphere_points(rng, len(shares), d)
    labels = rng.choice(len(shares), size=n, p=shares)
    x = centres[labels] + spread * rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_sampled_statistics_stay_within_their_stated_errors():
    """2000 tokens in three tight clusters plus uniform ones, analysed from 200: the clustered
    fraction (Hoeffding), each histogram bin (Hoeffding) and the largest cluster's share (normal,
    95%) against the computation over all tokens, over 20 draws."""
    rng = np.random.default_rng(3)
    n, m, misses = 2000, 200, 0
    for _ in range(20):
        x = np.concatenate([_clusters(rng, n - 400), random_sphere_points(rng, 400, 3)])
        assert abs(clustered_fraction(x, sample=m) - clustered_fraction(x, sample=n)) <= sampled_error(m)
        sampled = OutputDiagnostics(MeshTable(S2), n, 3, rule="links", pair_sample=m)
        full = OutputDiagnostics(MeshTable(S2), n, 3, rule="links", pair_sample=n)
        sampled.add(0.0, x)
        full.add(0.0, x)
        a, b = sampled.results(), full.results()
        assert np.max(np.abs(a["histograms"] - b["histograms"])) <= sampled_error(m)
        assert b["largest_error"][0] == 0.0 and a["largest_error"][0] > 0.0
        misses += abs(a["largest"][0] - b["largest"][0]) > a["largest_error"][0]
    assert misses <= 3  # 1 expected at 95%


CASE = """\
name = "p"
[mesh]
sphere = "S2"
resolution = 1
[model]
beta = 1.0
[initial]
kind = "uniform"
[time]
t_final = 0.4
outputs = 2
[particles]
d = 8
n = 16
dt = 0.1
"""


@pytest.mark.slow
def test_no_diagnostics_and_the_api_leaves_what_the_cli_does(tmp_path, cli_in_process):
    (tmp_path / "case.toml").write_text(CASE)
    done = cli_in_process(["particles", "case.toml", "--out", "cli", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    api = meanfield.run_particles(tmp_path / "case.toml", out=tmp_path / "api", quiet=True)
    for run in (tmp_path / "cli", api.path):
        assert (run / layout.DIAGNOSTICS).is_file() and (run / layout.INNER_PRODUCTS).is_file()
        assert "diagnostics" in json.loads((run / layout.METADATA).read_text())["timings"]
    assert (tmp_path / "cli" / layout.DIAGNOSTICS).read_text() == (api.path / layout.DIAGNOSTICS).read_text()
    done = cli_in_process(["particles", "case.toml", "--out", "off", "--quiet", "--no-diagnostics"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "off" / layout.DIAGNOSTICS).exists()
    assert not (tmp_path / "off" / layout.INNER_PRODUCTS).exists()
    assert "diagnostics = false" in (tmp_path / "off" / layout.CONFIG).read_text()


HOOK = """\
import os, signal
from meanfield.{module} import {owner}

real = {owner}.{method}


def hooked(self, *args, **kwargs):
    if {when}:
        os.kill(os.getpid(), signal.SIGTERM)  # recorded by the run; the work goes on to its end
    return real(self, *args, **kwargs)


{owner}.{method} = hooked
"""


@pytest.mark.slow
@pytest.mark.parametrize("module,owner,method,when", [
    ("rundir.writers", "RunFileOutput", "write", "args[1] >= 0.4"),  # the last output's run.nc
    ("analysis.diagnostics", "OutputDiagnostics", "add", "True"),    # the diagnostics' first output
])
def test_sigterm_while_the_end_is_written_leaves_an_interrupted_resumable_run(tmp_path, monkeypatch, cli_in_process,
                                                                              module, owner, method, when):
    """The stopped run in a fresh process (its exit is the subject), the resume in this one."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK.format(module=module, owner=owner, method=method, when=when))
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    (tmp_path / "case.toml").write_text(CASE)
    done = cli(["particles", "case.toml", "--out", "r", "--quiet"], tmp_path)
    assert done.returncode == 128 + 15, done.stderr
    meta = json.loads((tmp_path / "r" / layout.METADATA).read_text())
    assert meta["status"] == "interrupted" and meta["interrupted_by"] == "SIGTERM"
    assert not (tmp_path / "r" / layout.DIAGNOSTICS).exists()
    monkeypatch.delenv("PYTHONPATH")
    done = cli_in_process(["resume", "r", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    run = meanfield.load_run(tmp_path / "r")
    assert run.status == "completed" and list(run.times) == pytest.approx([0.0, 0.2, 0.4])
    assert (tmp_path / "r" / layout.DIAGNOSTICS).is_file()
    reference = run_particles(tmp_path / "case.toml", out=tmp_path / "ref", comm=MPI.COMM_SELF, quiet=True)
    assert np.array_equal(run.points, reference.points)
    with xr.open_dataset(tmp_path / "r" / layout.RUN_FILE) as ds:
        xr.testing.assert_identical(ds, run.to_xarray())
