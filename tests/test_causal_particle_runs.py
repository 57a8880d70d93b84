"""Causal particle runs: samplers by position, ``meanfield particles`` and ``meanfield validate``
with ``model.mask = "causal"``, and the mean-field limit at rate n^-1/2."""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from helpers.cli import refused
from helpers.mpi import meanfield_job
from mpi4py import MPI
from scipy.special import ive

import meanfield
from meanfield.cli import main
from meanfield.config import ConfigError, load_config
from meanfield.drivers.particles import build_particles
from meanfield.initial import make_initial_density
from meanfield.observables import moment_observables
from meanfield.particles import advance
from meanfield.particles.sampling import SamplingError, sample_initial, sample_tokens
from meanfield.studies.validation import PDEReference, fit_slope, validate

#: Position-dependent S^1 case: the density of position s is proportional to exp(2 (1 - s) x).
CASE = """name = "causal"
[mesh]
sphere = "S1"
resolution = 64
[model]
beta = 2.0
mask = "causal"
[positions]
slices = 8
[initial]
kind = "expression"
expression = "exp(2 * (1 - s) * x)"
[time]
t_final = 0.5
outputs = 1
[nonlocal]
method = "{method}"
[particles]
dt = 0.25
[output]
xdmf = false
"""


@pytest.fixture
def serial():
    if MPI.COMM_WORLD.size > 1:
        pytest.skip("starts its own processes: runs in the serial pass")


# --- samplers --------------------------------------------------------------------------------

def test_each_token_draws_from_the_density_of_its_position():
    """exp(k x) on S^1 with k = 2 (1 - s): E[x] = I_1(k) / I_0(k) at every position; binned
    tokens agree within 4 standard errors."""
    density = make_initial_density({"kind": "expression", "expression": "exp(2 * (1 - s) * x)"}, 2, causal=True)
    n, bins = 8000, 8
    positions = (np.arange(n) + 0.5) / n
    x = sample_tokens(density, positions, np.random.default_rng(5))[:, 0]
    k = 2.0 * (1.0 - positions)
    mean, second = ive(1, k) / ive(0, k), 0.5 * (1.0 + ive(2, k) / ive(0, k))  # E x, E x^2 at each position
    for b in np.array_split(np.arange(n), bins):
        spread = np.sqrt((second[b] - mean[b] ** 2).mean() / len(b))
        assert abs(x[b].mean() - mean[b].mean()) < 4.0 * spread


def test_a_density_without_s_gives_the_noncausal_tokens():
    density = make_initial_density({"kind": "vmf", "centers": [[1.0, 0.0]], "kappas": [3.0]}, 2, causal=True)
    positions = (np.arange(50) + 0.5) / 50
    causal = sample_tokens(density, positions, np.random.default_rng(1))
    assert np.array_equal(causal, sample_initial(density, 50, np.random.default_rng(1)))


@pytest.mark.parametrize("sampler", ["quantile", "mesh"])
def test_samplers_that_cannot_draw_by_position_are_refused(sampler):
    density = make_initial_density({"kind": "expression", "expression": "1 + s * x"}, 2, causal=True)
    with pytest.raises(SamplingError, match="particles.sampler"):
        sample_tokens(density, np.array([0.25, 0.75]), np.random.default_rng(0), sampler)


# --- the CLI ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_causal_particles_serial_and_on_two_ranks(tmp_path, capsys, serial):
    """``meanfield particles`` (its ``main`` in this process) and ``mpirun -n 2 meanfield
    particles`` on a causal config (fast field): the same tokens to round-off, positions in
    run.nc and on the run."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(CASE.format(method="fast"))
    assert main(["particles", str(cfg), "--n", "301", "--out", str(tmp_path / "one"), "--quiet"]) == 0
    two = meanfield_job("particles", str(cfg), "--n", "301", "--out", str(tmp_path / "two"), "--quiet")
    assert two.returncode == 0, two.stderr
    a, b = meanfield.load_run(tmp_path / "one"), meanfield.load_run(tmp_path / "two")
    assert a.points.shape == (2, 301, 2) and np.allclose(a.positions, (np.arange(301) + 0.5) / 301)
    assert np.abs(a.points - b.points).max() < 1e-12
    assert a.metadata["causal_field"] == {"route": "fast", "block": 256}
    with xr.open_dataset(tmp_path / "one" / "run.nc") as ds:
        assert np.array_equal(ds["position"].values, a.positions) and ds["position"].dims == ("token",)
    mean = moment_observables(None, a.points[-1], np.full(301, 1.0 / 301))  # the whole measure's columns
    assert a.observables["mean_0"][-1] == pytest.approx(mean["mean_0"], abs=1e-12)
    capsys.readouterr()
    assert main(["info", str(tmp_path / "one")]) == 0
    assert "token i at s_i = (i + 1/2)/n attends to the tokens j <= i" in capsys.readouterr().out


@pytest.mark.slow
def test_causal_particles_with_decay_serial_and_on_two_ranks(tmp_path, serial):
    """``meanfield particles`` on DGR's model (unnormalized attention, ``positions.decay`` and
    ``normalise``; fast field, blocks cut across ranks): 1 and 2 ranks give the same tokens to
    round-off, and the keys move the tokens (against the run without them)."""
    text = CASE.format(method="fast").replace('[model]\n', '[model]\nattention = "unnormalized"\n')
    runs = {}
    for name, keys in (("plain", ""), ("dgr", "decay = 2.0\nnormalise = true\n")):  # one rank: through the API
        cfg = tmp_path / f"{name}.toml"
        cfg.write_text(text.replace("slices = 8\n", "slices = 8\n" + keys))
        runs[name] = meanfield.run_particles(cfg, n=301, out=tmp_path / f"{name}-one", comm=MPI.COMM_SELF, quiet=True)
    two = meanfield_job("particles", str(tmp_path / "dgr.toml"), "--n", "301", "--out", str(tmp_path / "dgr-two"),
                        "--quiet")
    assert two.returncode == 0, two.stderr
    assert np.abs(meanfield.load_run(tmp_path / "dgr-two").points - runs["dgr"].points).max() < 1e-12
    assert np.abs(runs["dgr"].points[-1] - runs["plain"].points[-1]).max() > 1e-3


def test_an_ordered_sampler_is_refused_in_one_line(tmp_path, capsys, serial):
    refused(tmp_path, capsys, CASE.format(method="direct"), "particles.sampler", "--n", "20", "--set",
            'particles.sampler="quantile"', command="particles")


@pytest.mark.slow
def test_resumed_causal_particles_take_the_same_steps(tmp_path, serial):
    """A causal particle run stopped at t = 0.25 and resumed to 0.5 ends where an uninterrupted one
    does (the commands through the CLI's ``main`` in this process: the subject is the state resumed)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(CASE.format(method="fast"))
    meanfield.run_particles(cfg, n=200, overrides=["time.outputs=2"], out=tmp_path / "whole", comm=MPI.COMM_SELF,
                            quiet=True)  # the uninterrupted reference
    assert main(["particles", str(cfg), "--n", "200", "--quiet", "--set", "time.t_final=0.25", "--out",
                 str(tmp_path / "cut")]) == 0
    assert main(["resume", str(tmp_path / "cut"), "--t-final", "0.5", "--quiet"]) == 0
    whole, cut = meanfield.load_run(tmp_path / "whole"), meanfield.load_run(tmp_path / "cut")
    assert np.allclose(cut.times, [0.0, 0.25, 0.5]) and np.array_equal(cut.positions, whole.positions)
    assert np.abs(cut.at(0.5) - whole.at(0.5)).max() < 1e-14


def _validate(tmp_path: Path, n: str, seeds: str) -> Path:
    """``meanfield validate`` of the causal case (direct field) into tmp_path/v, checked to succeed."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(CASE.format(method="direct"))
    assert main(["validate", str(cfg), "--n", n, "--seeds", seeds, "--no-refine", "--out", str(tmp_path / "v"),
                 "--quiet"]) == 0
    return tmp_path / "v"


@pytest.mark.slow
def test_validate_a_causal_config(tmp_path, serial):
    """``meanfield validate --n 50,200,800 --seeds 6``: causal particles against the causal PDE, a
    first-moment metric of the whole measure and one position by position in validation.csv, and
    summary.csv's slopes of both first-moment errors about -1/2."""
    _validate(tmp_path, "50,200,800", "6")
    with open(tmp_path / "v" / "validation.csv") as fh:
        rows = list(csv.DictReader(fh))
    names = {r["metric"] for r in rows}
    assert {"mean_error", "mean_error_by_position", "mmd", "w1", "cluster_count_error"} <= names
    assert meanfield.load_run(tmp_path / "v" / "pde").densities.shape == (2, 8, 64)
    with open(tmp_path / "v" / "summary.csv") as fh:
        slopes = {row["metric"]: float(row["slope_rms"]) for row in csv.DictReader(fh)}
    for metric in ("mean_error", "mean_error_by_position"):
        assert -0.75 <= slopes[metric] <= -0.25, slopes


# --- the mean-field limit, at rate n^-1/2 ----------------------------------------------------

def _rms_errors(config, ns, seeds, t, errors) -> np.ndarray:
    """RMS over seeds of the errors ``errors(tokens, positions)`` (a tuple) of causal tokens at
    time t: shape (len(ns), number of errors)."""
    out = []
    for n in ns:
        values = []
        for seed in range(seeds):
            sim = build_particles(config, n, seed, MPI.COMM_SELF)
            x, _ = advance(sim.system.velocity, sim.x, 0.0, t, sim.dt)
            values.append(errors(x, sim.positions.s))
        out.append(np.sqrt(np.mean(np.square(values), axis=0)))
    return np.array(out)


def test_causal_particles_converge_to_the_causal_pde(tmp_path):
    """The first moment of the whole measure and position by position (tokens binned into the
    slices) against the causal PDE: both errors fall like n^-1/2 (12 seeds, n = 50 ... 800)."""
    config = load_config(tomllib.loads(CASE.format(method="direct")))
    reference = PDEReference(meanfield.run(config, out=tmp_path / "pde", comm=MPI.COMM_SELF, quiet=True))
    ref = reference.observables(0.5)
    whole = np.array([ref["mean_0"], ref["mean_1"]])
    ns = [50, 100, 200, 400, 800]
    rms = _rms_errors(config, ns, 12, 0.5, lambda x, s: (np.linalg.norm(x.mean(axis=0) - whole),
                                                         reference.slice_mean_error(x, s, 0.5)))
    for errors in rms.T:
        assert -0.65 <= fit_slope(ns, errors) <= -0.35, rms


@pytest.mark.slow
@pytest.mark.parametrize("attention, positions", [("softmax", {"decay": 3.0}),
                                                  ("unnormalized", {"decay": 2.0, "normalise": True})])
def test_positional_decay_changes_particles_as_it_changes_the_pde(tmp_path, attention, positions):
    """Positional decay (SA), and decay normalised over positions (USA, the model of DGR): the
    change of the whole measure's first moment at t = 0.5 that the keys make, on the tokens (n =
    1000, the same 4 seeds with and without the keys, so the noise largely cancels) against the
    change on the PDE (64 cells, 8 slices: within 15 % (the slices' error) plus 3 standard errors).
    The change is 1e-2 (SA) and 1e-1 (USA), 10 standard errors and more: tokens that ignored the
    keys would fail."""
    changes = []
    for keys in ({}, positions):
        data = tomllib.loads(CASE.format(method="direct"))
        data["model"]["attention"] = attention
        data["positions"].update(keys)
        config = load_config(data)
        pde = meanfield.run(config, out=tmp_path / f"pde{len(changes)}", comm=MPI.COMM_SELF, quiet=True)
        tokens = []
        for seed in range(4):
            sim = build_particles(config, 1000, seed, MPI.COMM_SELF)
            tokens.append(advance(sim.system.velocity, sim.x, 0.0, 0.5, sim.dt)[0].mean(axis=0))
        changes.append((np.array([pde.observables["mean_0"][-1], pde.observables["mean_1"][-1]]), np.array(tokens)))
    expected = changes[1][0] - changes[0][0]
    measured = changes[1][1] - changes[0][1]
    error = np.linalg.norm(measured.mean(axis=0) - expected)
    standard_error = np.linalg.norm(measured.std(axis=0, ddof=1)) / 2.0
    assert np.linalg.norm(expected) > 10 * standard_error, (expected, measured)
    assert error < 0.15 * np.linalg.norm(expected) + 3 * standard_error, (expected, measured)


def test_softmax_with_a_density_independent_of_s_has_the_noncausal_limit(tmp_path):
    """SA, rho0 independent of s: the causal tokens are not exchangeable, yet at every position
    their limit is the non-causal solution.  The first moment of the early and the late tokens
    (s < 1/2, s > 1/2) against the non-causal PDE falls like n^-1/2 (16 seeds, n = 100 ... 800)."""
    base = {"name": "sa", "mesh": {"sphere": "S1", "resolution": 128}, "model": {"beta": 2.0},
            "initial": {"kind": "vmf", "centers": [[1, 0], [-0.5, 0.8]], "kappas": [2.0, 2.0], "weights": [0.6, 0.4]},
            "time": {"t_final": 1.0, "outputs": [1.0]}, "nonlocal": {"method": "direct"},
            "particles": {"dt": 0.25}, "output": {"xdmf": False}}
    pde = meanfield.run(load_config(base), out=tmp_path / "pde", comm=MPI.COMM_SELF, quiet=True)
    ref = np.array([pde.observables["mean_0"][-1], pde.observables["mean_1"][-1]])
    causal = load_config({**base, "model": {"beta": 2.0, "mask": "causal"}})
    ns = [100, 200, 400, 800]
    rms = _rms_errors(causal, ns, 16, 1.0, lambda x, s: (np.linalg.norm(x[s < 0.5].mean(axis=0) - ref),
                                                         np.linalg.norm(x[s > 0.5].mean(axis=0) - ref)))
    for errors in rms.T:
        assert -0.7 <= fit_slope(ns, errors) <= -0.3, rms
    with pytest.raises(ConfigError, match="model.mask"):  # validate refuses a PDE run without the mask
        validate(causal, ns=[10], seeds=1, pde=tmp_path / "pde", out=tmp_path / "v", comm=MPI.COMM_SELF, quiet=True)
    assert not (tmp_path / "v").exists()
