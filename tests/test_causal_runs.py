"""Causal runs as users run them: the config keys, their refusals, and the CLI.

The numerics of :mod:`meanfield.masks.causal_slices` are checked against exact facts in test_causal.py;
here the configuration (``[model] mask``, ``[positions] slices``, initial expressions in s)
and the run through ``meanfield run`` (outputs, resume, ranks).
"""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
import xarray
from helpers.cli import S1, cli, refused
from mpi4py import MPI

import meanfield
from meanfield.cli import main
from meanfield.config import DEFAULT_SLICES, load_config
from meanfield.drivers.pde import build_simulation
from meanfield.masks import Causal, NoMask
from meanfield.problem import Problem

CAUSAL = '[model]\nmask = "causal"\n'


@pytest.mark.parametrize("text, field", [
    (S1 + CAUSAL + "[positions]\nslices = 0\n", "positions.slices: must be an integer >= 1"),
    (S1 + CAUSAL + "[positions]\nslices = 2.5\n", "positions.slices: must be an integer >= 1"),
    (S1 + "[positions]\nslices = 4\n", "positions.slices: needs model.mask = 'causal'"),
    (S1 + CAUSAL + "[positions]\nslice = 4\n", "positions.slice: unknown key (did you mean 'slices'?)"),
    (S1 + '[model]\nmask = "decoder"\n', "model.mask: must be 'none'"),
    (S1 + '[initial]\nkind = "expression"\nexpression = "1 + s*x"\n', "initial.expression: uses the position s"),
    (S1 + CAUSAL + "[atoms]\ncapture = true\n", "atoms.capture: atoms are not supported with model.mask = 'causal'"),
    (S1 + CAUSAL + "[atoms]\ninitial = [[0.5, 1.0, 0.0]]\n", "atoms.initial: atoms are not supported"),
    (S1 + '[model]\nmask = "causal"\nvelocity = "rotation"\n', "model.mask: 'causal' needs model.velocity"),
    (S1 + CAUSAL + '[initial]\nkind = "expression"\nexpression = "1 + t*x"\n', "initial.expression: unknown name 't'"),
    (S1 + CAUSAL + "[positions]\ndecay = -1.0\n", "positions.decay: must be a number >= 0"),
    (S1 + "[positions]\ndecay = 1.0\n", "positions.decay: needs model.mask = 'causal'"),
    (S1 + CAUSAL + "[positions]\nnormalise = true\n", "positions.normalise: needs model.attention = 'unnormalized'"),
    (S1 + '[model]\nmask = "causal"\nattention = "unnormalized"\n[[model.layers]]\nt_end = 10.0\n'
     'attention = "softmax"\n[positions]\nnormalise = true\n', "positions.normalise: needs model.attention"),
    (S1 + CAUSAL + '[positions]\nnormalise = "yes"\n', "positions.normalise: must be true or false"),
], ids=["zero", "fraction", "without-mask", "typo", "mask-value", "s-without-mask", "capture", "atoms",
        "rotation", "unknown-name", "negative-decay", "decay-without-mask", "normalise-softmax",
        "normalise-softmax-layer", "normalise-not-bool"])
def test_refused_before_anything_is_written(tmp_path, capsys, text, field):
    refused(tmp_path, capsys, text, field)


def test_problem_has_mask_slices_positions_and_the_density_of_each_position():
    problem = Problem(load_config({"mesh": {"sphere": "S1", "resolution": 16}, "model": {"mask": "causal"},
                                   "positions": {"slices": 4},
                                   "initial": {"kind": "expression", "expression": "1 + s*x"}}))
    assert problem.mask == Causal(4) and problem.mask.slices == 4 and problem.mask.positional
    assert np.allclose(problem.mask.slice_positions(), [0.125, 0.375, 0.625, 0.875])
    points = np.array([[1.0, 0.0], [0.0, 1.0]])
    density = problem.initial()
    assert density.depends_on_position and np.allclose(density.at(points, 0.25), [1.25, 1.0])
    with pytest.raises(ValueError, match="depends on the position s"):
        density(points)


def test_defaults_without_mask_and_without_slices():
    plain = Problem(load_config({"mesh": {"sphere": "S1", "resolution": 16}}))
    assert plain.mask == NoMask() and not plain.mask.positional and plain.mask.slices is None
    assert plain.mask.slice_positions() is None and plain.mask.count == 1
    assert "[positions]" not in plain.config.to_toml()
    causal = load_config({"mesh": {"sphere": "S1", "resolution": 16}, "model": {"mask": "causal"},
                          "initial": {"kind": "vmf", "centers": [[1.0, 0.0]]}})
    assert Problem(causal).mask.slices == DEFAULT_SLICES
    again = Problem(load_config(tomllib.loads(causal.to_toml())))
    assert again.mask.slices == DEFAULT_SLICES and not again.initial().depends_on_position


# -- runs ------------------------------------------------------------------------------------
#: An S^1 causal run whose early positions start near x = (1, 0) and late ones near (0, 1).
S1_CAUSAL = """name = "causal"
[mesh]
sphere = "S1"
resolution = 64
[model]
beta = 4.0
mask = "causal"
[positions]
slices = 4
[initial]
kind = "expression"
expression = "exp(3*(1 - s)*x + 3*s*y)"
[time]
t_final = 0.5
outputs = 2
"""

serial_only = pytest.mark.skipif(MPI.COMM_WORLD.size > 1, reason="starts its own processes: runs in the serial suite")


def whole_mean(M: int, own_weight: float = 0.5) -> np.ndarray:
    """The mean vector of the whole token distribution at T = 0.5 of an SA run with M slices
    whose density depends on s (S^1, 32 cells, fixed dt: the same steps for every M)."""
    sim = build_simulation(load_config({
        "mesh": {"sphere": "S1", "resolution": 32}, "model": {"attention": "softmax", "beta": 4.0, "mask": "causal"},
        "positions": {"slices": M}, "initial": {"kind": "expression", "expression": "exp(3*(1 - s)*x + 3*s*y)"},
        "nonlocal": {"method": "direct"}, "time": {"dt": 0.01, "t_final": 0.5}}), MPI.COMM_SELF)
    sim.positions.velocity.own_weight = own_weight
    points, weights = sim.scheme.measure(sim.positions.whole(sim.stepper.advance(sim.state, 0.0, 0.5)))
    return weights @ points


def observed_orders(own_weight: float) -> np.ndarray:
    """Observed orders in 1/M of the whole-measure mean from successive differences, M = 4..32."""
    means = [whole_mean(M, own_weight) for M in (4, 8, 16, 32)]
    gaps = np.array([np.linalg.norm(a - b) for a, b in zip(means, means[1:])])
    return np.log2(gaps[:-1] / gaps[1:])


def test_whole_measure_moments_converge_at_second_order_in_one_over_M():
    """MODEL.md: with rho0 depending on s, whole-measure moments converge at second order up to
    a logarithm under the midpoint rule (measured 1.75, 1.77 for M = 4..32; a log(M)/M^2 error
    gives 1.58 and 1.68), and at first order when a slice feels all of itself (measured 0.95, 0.96)."""
    midpoint, full = observed_orders(0.5), observed_orders(1.0)
    assert np.all((midpoint > 1.6) & (midpoint < 2.1)), midpoint
    assert np.all((full > 0.85) & (full < 1.15)), full


@pytest.mark.slow
@serial_only
def test_cli_run_writes_a_density_per_position(tmp_path, capsys):
    """``meanfield run`` of a causal config: run.nc with a position dimension, load_run with
    (T, M, C) densities and the positions, each slice a probability density, the whole-measure
    observables the mean of the slices' (first moments are linear in the measure), and info
    and check naming the mask (the commands through the CLI's ``main`` in this process)."""
    (tmp_path / "causal.toml").write_text(S1_CAUSAL)
    assert main(["run", str(tmp_path / "causal.toml"), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    run = meanfield.load_run(tmp_path / "run")
    assert run.mask == Causal(4) and run.densities.shape == (3, 4, 64)
    assert np.allclose(run.positions, [0.125, 0.375, 0.625, 0.875])
    assert np.allclose(run.densities @ run.areas, 1.0, atol=1e-13)
    first_moment = np.einsum("tmc,c,cd->tmd", run.densities, run.areas, run.centroids)
    for i in range(2):
        by_position = run.observables_by_position[f"mean_{i}"]
        assert np.allclose(by_position, first_moment[..., i], atol=1e-12)
        assert np.allclose(run.observables[f"mean_{i}"], by_position.mean(axis=1), atol=1e-14)
    assert run.observables_by_position["mean_0"][0, 0] > run.observables_by_position["mean_0"][0, -1]
    with xarray.open_dataset(tmp_path / "run" / "run.nc") as ds:
        assert ds["density"].dims == ("time", "position", "cell") and ds.attrs["mask"] == "causal"
        assert np.array_equal(ds["position"].values, run.positions)
        assert np.allclose(ds["density"].values, run.densities, rtol=0, atol=0)
    assert run.to_xarray()["mean_0_by_position"].dims == ("time", "position")
    assert len(run.position_dataframe()) == 3 * 4
    capsys.readouterr()
    assert main(["info", str(tmp_path / "run")]) == 0
    info = capsys.readouterr().out
    assert "mask:       causal, M = 4 position slices" in info, info
    assert main(["check", str(tmp_path / "causal.toml")]) == 0
    check = capsys.readouterr().out
    assert "mask:        causal, M = 4 position slices" in check
    assert "per evaluation of 4 measures at once (the position slices), 3 evaluations per step" in check, check
    assert "(64 cells x 4 position slices, 1 rank)" in check, check


@serial_only
@pytest.mark.slow
def test_two_ranks_through_the_cli_equal_one(tmp_path):
    """``mpirun -n 2 meanfield run`` of a causal DG1 run (fast field) equals the one-rank run to round-off."""
    (tmp_path / "causal.toml").write_text(S1_CAUSAL + '[scheme]\nkind = "dg1"\n[nonlocal]\nmethod = "fast"\n')
    meanfield.run(tmp_path / "causal.toml", out=tmp_path / "run1", comm=MPI.COMM_SELF, quiet=True)  # the reference
    done = cli(["run", "causal.toml", "--out", "run2", "--quiet"], tmp_path, ranks=2)
    assert done.returncode == 0, done.stderr
    one, two = meanfield.load_run(tmp_path / "run1"), meanfield.load_run(tmp_path / "run2")
    assert np.abs(one.vertex_densities - two.vertex_densities).max() < 1e-12
    assert np.abs(one.densities - two.densities).max() < 1e-12


def test_softmax_positions_of_an_s_independent_density_follow_the_run_without_mask(tmp_path):
    """Through :func:`meanfield.run`: SA with rho0 independent of s gives every position the
    non-causal solution (MODEL.md), output by output, to round-off."""
    base = tomllib.loads(S1_CAUSAL)
    base["initial"]["expression"] = "exp(3*x) + 0.5*exp(2*y)"
    causal = meanfield.run(base, out=tmp_path / "causal", quiet=True, comm=MPI.COMM_SELF)
    plain_config = {**base, "model": {"beta": 4.0}}
    plain_config.pop("positions")
    plain = meanfield.run(plain_config, out=tmp_path / "plain", quiet=True, comm=MPI.COMM_SELF)
    assert np.array_equal(causal.times, plain.times)
    assert np.abs(causal.densities - plain.densities[:, None, :]).max() < 1e-13 * plain.densities.max()
    assert np.allclose(causal.observables["mean_0"], plain.observables["mean_0"], rtol=0, atol=1e-14)


@pytest.mark.parametrize("slices", [2, 8])
def test_the_first_slice_follows_the_non_causal_dynamics_of_its_own_density(tmp_path, slices):
    """Under SA the first slice feels half of itself and nothing else: numerator and denominator
    are both (1/2M) times its own, so it moves as a run without the mask started from
    rho0(s_0, .) (MODEL.md: position s -> 0 follows the non-causal dynamics of its own density;
    s_0 = 1/(2M) -> 0).  A fixed step, so that both runs take the same steps."""
    base = tomllib.loads(S1_CAUSAL)
    base["initial"]["expression"] = "exp(3*(1 - s)*x) + 0.5*exp(2*s*y)"
    base["positions"] = {"slices": slices}
    base["time"] = {**base["time"], "dt": 0.01}
    causal = meanfield.run(base, out=tmp_path / "causal", quiet=True, comm=MPI.COMM_SELF)
    s0 = 0.5 / slices
    plain_config = {**base, "model": {"beta": 4.0},
                    "initial": {"kind": "expression", "expression": f"exp(3*(1 - {s0!r})*x) + 0.5*exp(2*{s0!r}*y)"}}
    plain_config.pop("positions")
    plain = meanfield.run(plain_config, out=tmp_path / "plain", quiet=True, comm=MPI.COMM_SELF)
    assert np.abs(causal.densities[:, 0] - plain.densities).max() < 1e-12 * plain.densities.max()
    assert np.abs(causal.densities[-1, 1] - plain.densities[-1]).max() > 1e-4  # the next slice does not


@pytest.mark.parametrize("slices", [None, 3])
def test_a_non_finite_value_is_named_at_its_cell_and_slice(slices):
    """The stepper names the cell (and the position slice) of the first non-finite entry of a
    DG1 state, (cells, nv) or stacked (cells, M, nv) (the entry's index modulo the cell count
    named another cell)."""
    from meanfield.timestepping import BlowUpError

    config = {"mesh": {"sphere": "S1", "resolution": 16}, "scheme": {"kind": "dg1"}, "nonlocal": {"method": "direct"}}
    if slices is not None:
        config["model"], config["positions"] = {"mask": "causal"}, {"slices": slices}
    sim = build_simulation(load_config(config), MPI.COMM_SELF)
    g = sim.scheme.geometry
    state = sim.state.copy().reshape(g.num_owned, slices or 1, 2)
    state[5, -1, 1] = np.nan
    where = rf"first at cell {int(g.original_index[5])} at x = .*"
    if slices is not None:
        where += rf", position slice {slices - 1} \(s = {sim.problem.mask.slice_positions()[-1]:.6g}\)"
    with pytest.raises(BlowUpError, match=where):
        sim.stepper._check_finite(state.ravel(), 0.0)
