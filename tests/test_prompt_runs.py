"""A batch of prompts as a run (``[particles] prompts``): prompt b is the single run with seed + b,
through the run API and the CLI, with its run files, signals and resume, ranks and refusals."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest
import xarray as xr

from meanfield.config import load_config
from meanfield.drivers.batch_size import BatchSize
from meanfield.problem import Problem
from meanfield.rundir import layout
from tests.helpers.cli import refused
from tests.helpers.tokens import single_runs

SCALARS = ("energy", "order", "mean_inner_product", "clustered_fraction", "clusters")
#: Default keys but the size: SA, beta = 4, Q = K = V = I, uniform tokens, the default step.
CASE = {"name": "batch", "mesh": {"sphere": "S2", "resolution": 1}, "initial": {"kind": "uniform"},
        "particles": {"n": 8, "d": 4, "seed": 5, "prompts": 3}, "time": {"t_final": 0.6, "outputs": 2}}


def test_batch_run_is_the_single_runs_and_resumes_after_sigterm(tmp_path, monkeypatch):
    """SIGTERM after the output at t = 0.3, then resume: every prompt's tokens and scalars are those
    of its single run (1e-12), observables.csv holds their means and standard errors, run.nc the
    prompt dimension, and it equals the run read back."""
    import meanfield
    from meanfield.drivers.prompts import PromptSimulation
    from meanfield.engine.controller import RunInterrupted

    real = PromptSimulation.step

    def step(self, t_end):
        dt = real(self, t_end)
        if abs(self.t - 0.3) < 1e-12:
            os.kill(os.getpid(), signal.SIGTERM)
        return dt

    monkeypatch.setattr(PromptSimulation, "step", step)
    with pytest.raises(RunInterrupted):
        meanfield.run_particles(CASE, out=tmp_path / "b", quiet=True)
    monkeypatch.setattr(PromptSimulation, "step", real)
    assert meanfield.load_run(tmp_path / "b").status == "interrupted"
    run = meanfield.resume(tmp_path / "b", quiet=True)
    assert run.status == "completed" and run.points.shape == (3, 3, 8, 4)
    rows: list = []
    single = single_runs(CASE, 3, [0.0, 0.3, 0.6], rows=rows)
    assert np.abs(run.points[-1] - run.points[0]).max() > 1e-2  # the tokens moved
    assert np.abs(run.points - single.transpose(1, 0, 2, 3)).max() < 1e-12
    for name in SCALARS:
        by_prompt = run.by_prompt[f"{name}_by_prompt"]
        expected = np.array([[row[name] for row in prompt] for prompt in rows]).T
        assert np.abs(by_prompt - expected).max() < 1e-12, name
        assert np.allclose(run.observables[name], by_prompt.mean(axis=1), rtol=1e-14)
        assert np.allclose(run.observables[f"{name}_se"], by_prompt.std(axis=1, ddof=1) / np.sqrt(3), rtol=1e-12)
    assert not (tmp_path / "b" / "diagnostics.csv").exists()  # a batch's statistics are its observables
    with xr.open_dataset(tmp_path / "b" / layout.RUN_FILE) as ds:
        assert ds["points"].dims == ("time", "prompt", "token", "coordinate")
        assert ds["energy_by_prompt"].dims == ("time", "prompt") and ds.sizes["prompt"] == 3
        assert ds["second_moment"].dims == ("time", "component", "component_2")  # the mean over the prompts
        second = np.mean([[x.T @ x / 8 for x in frame] for frame in single.transpose(1, 0, 2, 3)], axis=1)
        assert np.abs(ds["second_moment"].values - second).max() < 1e-12
        assert np.abs(ds["mean"].values - single.transpose(1, 0, 2, 3).mean(axis=2)).max() < 1e-12
        xr.testing.assert_identical(ds, run.to_xarray())
    size = BatchSize.measure(Problem(load_config(CASE)), ranks=2)  # what `meanfield check` says of the batch
    assert size.steps == run.metadata["steps"]["steps"] and (size.chunk, size.chunks) == (2, 1)
    assert "3 prompts of 8 tokens on S^3" in "\n".join(size.lines(3))


def test_cli_batch_with_weights_per_prompt(tmp_path):
    """``meanfield particles --prompts 3`` with ``[model.random] per_prompt``: prompt b is the run
    with both seeds shifted by b (a fixed step: the default one is the smallest over the prompts)."""
    from meanfield.cli import main
    from meanfield.rundir.results import load_particle_run

    config = {**CASE, "model": {"beta": 1.0, "random": {"layers": 2, "eta": 0.3, "seed": 3, "per_prompt": True}},
              "particles": {**CASE["particles"], "dt": 0.05}}
    (tmp_path / "c.toml").write_text(
        '[mesh]\nsphere = "S2"\nresolution = 1\n[initial]\nkind = "uniform"\n[model]\nbeta = 1.0\n'
        '[model.random]\nlayers = 2\neta = 0.3\nseed = 3\nper_prompt = true\n'
        '[particles]\nn = 8\nd = 4\nseed = 5\ndt = 0.05\n[time]\nt_final = 0.6\noutputs = 2\n')
    assert main(["particles", str(tmp_path / "c.toml"), "--prompts", "3", "--out", str(tmp_path / "p"),
                 "--quiet"]) == 0
    run = load_particle_run(tmp_path / "p")
    single = single_runs(config, 3, [0.0, 0.3, 0.6], shift_random=True)
    assert np.abs(run.points - single.transpose(1, 0, 2, 3)).max() < 1e-12
    assert run.metadata["prompts"] == 3 and run.metadata["weights"] == "per prompt"
    assert main(["plot", str(tmp_path / "p")]) == 0  # the observables (means over the prompts) alone
    assert sorted(p.name for p in (tmp_path / "p" / "plots").iterdir()) == ["observables.png"]
    assert main(["clusters", str(tmp_path / "p"), "--out", str(tmp_path / "c")]) == 2  # one prompt's tokens only
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("text, field", [
    ("[particles]\nprompts = 0\n", "particles.prompts"),
    ("[particles]\nprompts = 2\ndevice = \"gpu\"\n", "particles.device"),
    ("[particles]\nprompts = 2\n[model.random]\nper_prompt = true\n", "model.random.per_prompt"),
    ("[particles]\nprompts = 2\nintegrator = \"residual\"\n[model.random]\nlayers = 2\neta = 0.3\n", "time.outputs"),
])
def test_batch_refusals(tmp_path, capsys, monkeypatch, text, field):
    """Refused in one line, exit 2, nothing written: no prompt, a GPU without JAX (JAX hidden here,
    so that a machine with a GPU refuses too), weights per prompt without random weights, residual
    steps whose outputs are not on layer boundaries."""
    monkeypatch.setitem(sys.modules, "jax", None)
    head = '[mesh]\nsphere = "S2"\nresolution = 1\n[initial]\nkind = "uniform"\n[time]\nt_final = 0.2\n'
    refused(tmp_path, capsys, head + text.replace("[particles]\n", "[particles]\nn = 4\nd = 3\n"), field,
            command="particles")


@pytest.mark.mpi
def test_prompts_split_over_ranks(parallel_comm, tmp_path):
    """1 and 2 ranks (prompts split 2 + 1) give the same tokens and scalars."""
    from mpi4py import MPI

    import meanfield

    config = {**CASE, "model": {"beta": 2.0, "mask": "causal"}, "time": {"t_final": 0.3, "outputs": 1}}
    split = meanfield.run_particles(config, out=tmp_path / "split", comm=parallel_comm, quiet=True)
    alone = meanfield.run_particles(config, out=tmp_path / f"alone{parallel_comm.rank}", comm=MPI.COMM_SELF,
                                    quiet=True)
    runs = [split, alone]
    if parallel_comm.rank == 0:
        assert runs[0].metadata["prompts_per_rank"] == [2, 1]
        assert np.abs(runs[0].points - runs[1].points).max() < 1e-12
        for name in SCALARS:
            assert np.abs(runs[0].by_prompt[f"{name}_by_prompt"] - runs[1].by_prompt[f"{name}_by_prompt"]).max() \
                < 1e-12


@pytest.mark.slow
def test_batch_run_in_float32_and_on_jax(tmp_path, monkeypatch):
    """The run's GPU path, JAX, here on the CPU: the numpy run's numbers to 1e-12; float32 on request
    computes in float32 (close to float64, not equal)."""
    import meanfield
    from meanfield.drivers import prompts
    from meanfield.particles.arrays import ArrayBackend

    expected = meanfield.run_particles(CASE, out=tmp_path / "numpy", quiet=True)
    single = meanfield.run_particles({**CASE, "particles": {**CASE["particles"], "precision": "float32"}},
                                     out=tmp_path / "float32", quiet=True)
    assert 1e-9 < np.abs(single.points - expected.points).max() < 1e-4
    monkeypatch.setattr(prompts.ArrayBackend, "for_device",
                        lambda device, precision: ArrayBackend.make("jax", "cpu", precision))
    got = meanfield.run_particles(CASE, out=tmp_path / "jax", quiet=True)
    assert got.metadata["backend"] == "jax float64 on the CPU"
    assert np.abs(got.points - expected.points).max() < 1e-12
    for name in SCALARS:
        assert np.abs(got.by_prompt[f"{name}_by_prompt"] - expected.by_prompt[f"{name}_by_prompt"]).max() < 1e-12
