"""``[[output.observables]]``: observables of one's own, evaluated on the density at their own cadence."""

from __future__ import annotations

import numpy as np
import pytest
import xarray
from helpers.cli import refused
from mpi4py import MPI

import meanfield
from meanfield.cli import main
from meanfield.config import ConfigError, load_config
from meanfield.expression import ExpressionError
from meanfield.own_observables import OwnObservables
from meanfield.problem import Problem

TIMES = np.linspace(0.0, 1.0, 5)
OWN_OBSERVABLES = [
    {"name": "total", "expression": "integral(rho)"},
    {"name": "zbar", "expression": "integral(rho * z)"},
    {"name": "peak", "expression": "max(rho)", "every": 0.5},
    {"name": "spread", "expression": "max(rho) / min(rho) - 1"},
]
CASE = {"name": "trk", "mesh": {"sphere": "S2", "resolution": 2}, "time": {"t_final": 1.0, "outputs": 4},
        "output": {"observables": OWN_OBSERVABLES}}


def test_values_on_cells():
    """Three cells of areas 1, 2, 3: the reductions and their combination, nan when not due."""
    own_observables = OwnObservables.from_config(OWN_OBSERVABLES, TIMES)
    rho, areas = np.array([1.0, 2.0, 4.0]), np.array([1.0, 2.0, 3.0])
    points = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
    at_quarter = own_observables.evaluate(0.25, rho, points, areas, None)
    assert at_quarter["total"] == 17.0 and at_quarter["zbar"] == 1.0 - 12.0 and at_quarter["spread"] == 3.0
    assert np.isnan(at_quarter["peak"])
    assert own_observables.evaluate(0.5, rho, points, areas, None)["peak"] == 4.0
    empty = OwnObservables.from_config([], TIMES)
    assert len(empty) == 0 and empty.evaluate(0.0, rho, points, areas, None) == {}


@pytest.mark.parametrize("entry, message", [
    ({"name": "a", "expression": "rho * z"}, "output.observables[0].expression: 'rho' outside"),
    ({"name": "a", "expression": "integral(rho * w)"}, "output.observables[0].expression: unknown name 'w'"),
    ({"name": "a", "expression": "integral(rho, z)"}, "output.observables[0].expression: integral takes one"),
    ({"name": "a", "expression": "integral(rho"}, "output.observables[0].expression: cannot parse"),
    ({"name": "a", "expression": "2"}, "output.observables[0].expression: '2' reduces nothing"),
    ({"name": "a", "expression": 3}, "output.observables[0].expression: must be a string"),
    ({"name": "mass", "expression": "max(rho)"}, "output.observables[0].name: 'mass' is already a column"),
    ({"name": "a b", "expression": "max(rho)"}, "output.observables[0].name: must be a name"),
    ({"name": "a", "expression": "max(rho)", "every": 0.3}, "output.observables[0].every: 0.3 is not a multiple"),
    ({"name": "a", "expression": "max(rho)", "every": 0.01}, "output.observables[0].every: 0.01 is shorter"),
    ({"name": "a", "expression": "max(rho)", "every": -1}, "output.observables[0].every: must be a model time"),
    ({"name": "a", "expression": "max(rho)", "when": 1}, "output.observables[0].when: unknown key"),
])
def test_refused_entries(entry, message):
    with pytest.raises(ExpressionError, match=None) as info:
        OwnObservables.from_config([entry], TIMES)
    assert str(info.value).startswith(message), info.value
    with pytest.raises(ConfigError) as info:
        Problem(load_config({**CASE, "output": {"observables": [entry]}}))  # built (and checked) by the problem
    assert str(info.value).startswith(message)


def test_duplicate_name_and_table_check():
    with pytest.raises(ConfigError, match=r"output.observables\[1\].name: 'a' is already"):
        Problem(load_config({**CASE, "output": {"observables": [{"name": "a", "expression": "max(rho)"}] * 2}}))
    with pytest.raises(ConfigError, match="output.observables: must be a list of tables"):
        Problem(load_config({**CASE, "output": {"observables": ["max(rho)"]}}))


def test_cli_refuses_a_bad_expression(tmp_path, capsys):
    """``meanfield run``: exit 2, one line naming the field, no run directory."""
    refused(tmp_path, capsys, 'name = "x"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\noutputs = 2\n'
            '[[output.observables]]\nname = "zbar"\nexpression = "integral(rho * q)"\n',
            "output.observables[0].expression")


def test_run_writes_own_observables_to_csv_and_run_nc(tmp_path):
    """FV: integral(rho) is the mass, integral(rho * z) the mean's z, max(rho) rho_max, to round-off."""
    result = meanfield.run(CASE, out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)
    obs = result.observables
    np.testing.assert_allclose(obs["total"], obs["mass"], rtol=1e-13)
    np.testing.assert_allclose(obs["zbar"], obs["mean_2"], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(obs["spread"], obs["rho_max"] / obs["rho_min"] - 1, rtol=1e-13)
    due = np.isclose(result.times % 0.5, 0) | np.isclose(result.times % 0.5, 0.5)
    assert due.tolist() == [True, False, True, False, True]
    np.testing.assert_allclose(obs["peak"][due], obs["rho_max"][due], rtol=1e-15)
    assert np.isnan(obs["peak"][~due]).all()
    with xarray.open_dataset(tmp_path / "run" / "run.nc") as ds:
        np.testing.assert_allclose(ds["zbar"].values, obs["zbar"], rtol=1e-15)
        assert np.isnan(ds["peak"].values[~due]).all()


@pytest.mark.mpi
def test_rank_count_independence(parallel_comm, tmp_path):
    parallel = meanfield.run(CASE, out=tmp_path / "parallel", comm=parallel_comm, quiet=True)
    if parallel_comm.rank == 0:
        serial = meanfield.run(CASE, out=tmp_path / "serial", comm=MPI.COMM_SELF, quiet=True)
        for name in ("total", "zbar", "peak", "spread"):
            np.testing.assert_allclose(parallel.observables[name], serial.observables[name], rtol=1e-12, atol=1e-15)
    parallel_comm.barrier()


TOKEN_TRACKERS = [{"name": "zbar", "expression": "integral(rho * z)"}, {"name": "top", "expression": "max(z)"},
                  {"name": "spread", "expression": "max(x) - min(x)", "every": 0.5}]
TOKENS = {**CASE, "output": {"observables": TOKEN_TRACKERS}, "particles": {"n": 200, "seed": 3}}


def test_particle_runs_evaluate_own_observables_on_their_tokens(tmp_path):
    """On tokens, integral(rho * z) is the tokens' mean z (the mean_2 column) and max/min reduce
    over the tokens (their snapshots), at each own observable's cadence."""
    run = meanfield.run_particles(TOKENS, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    obs = run.observables
    np.testing.assert_allclose(obs["zbar"], obs["mean_2"], rtol=1e-12, atol=1e-15)
    points = np.array([run.at(t) for t in run.times])
    np.testing.assert_array_equal(obs["top"], points[:, :, 2].max(axis=1))
    due = np.isclose(run.times % 0.5, 0) | np.isclose(run.times % 0.5, 0.5)
    spread = points[:, :, 0].max(axis=1) - points[:, :, 0].min(axis=1)
    np.testing.assert_array_equal(obs["spread"][due], spread[due])
    assert np.isnan(obs["spread"][~due]).all()


@pytest.mark.parametrize("expression", ["max(rho)", "integral(rho**2)", "integral(rho * z + 1)"])
def test_particle_runs_refuse_own_observables_that_need_a_density(tmp_path, capsys, expression):
    """``meanfield particles``: exit 2, one line naming the field and what tokens take, nothing written."""
    refused(tmp_path, capsys, 'name = "x"\n[mesh]\nsphere = "S2"\nresolution = 1\n[time]\nt_final = 0.2\noutputs = 2\n'
            f'[[output.observables]]\nname = "q"\nexpression = "{expression}"\n',
            f"output.observables[0].expression: '{expression}' has no value on tokens", "--n", "50",
            command="particles")


@pytest.mark.mpi
def test_token_own_observables_rank_count_independence(parallel_comm, tmp_path):
    parallel = meanfield.run_particles(TOKENS, out=tmp_path / "parallel", comm=parallel_comm, quiet=True)
    if parallel_comm.rank == 0:
        serial = meanfield.run_particles(TOKENS, out=tmp_path / "serial", comm=MPI.COMM_SELF, quiet=True)
        for name in ("zbar", "top", "spread"):
            np.testing.assert_allclose(parallel.observables[name], serial.observables[name], rtol=1e-12, atol=1e-15)
    parallel_comm.barrier()


ORDER = "sqrt(integral(rho * x)**2 + integral(rho * y)**2 + integral(rho * z)**2) / integral(rho)"
OWN = [{"name": "op", "expression": ORDER}, {"name": "lean", "expression": "arctan2(integral(rho * y), max(x) + 1)",
                                             "every": 0.5}]


def test_functions_of_integrals_through_the_cli(tmp_path):
    """The run's config as users write it, its pictures by ``meanfield plot``: an order parameter
    written as a function of integrals equals the built-in ``order`` column (FV: the integrals
    are the mean vector's components, mass 1); run.nc names its expression (CF attributes), and
    observables.png draws it (its panel's data and labels)."""
    from meanfield.plotting.data import run_data
    from meanfield.plotting.series import time_series

    (tmp_path / "case.toml").write_text(
        'name = "own"\n[mesh]\nsphere = "S2"\nresolution = 2\n[time]\nt_final = 1.0\noutputs = 4\n'
        '[initial]\nkind = "expression"\nexpression = "1 + 0.5*z + 0.3*x"\n'
        + "".join(f'[[output.observables]]\nname = "{e["name"]}"\nexpression = "{e["expression"]}"\n'
                  + (f'every = {e["every"]}\n' if "every" in e else "") for e in OWN))
    run = meanfield.run(tmp_path / "case.toml", out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)  # plot reads it
    np.testing.assert_allclose(run.observables["op"], run.observables["order"], rtol=1e-12)
    assert run.observables["order"][0] > 0.1  # not a uniform density: the order parameter is not 0
    due = np.isfinite(run.observables["lean"])
    assert due.tolist() == [True, False, True, False, True]
    with xarray.open_dataset(tmp_path / "run" / "run.nc") as ds:
        assert ds["op"].attrs["expression"] == ORDER and ORDER in ds["op"].attrs["long_name"]
        assert "every 0.5" in ds["lean"].attrs["comment"] and ds["order"].attrs["long_name"].startswith("order")
    assert main(["plot", str(tmp_path / "run"), "--no-movie", "--quiet"]) == 0  # in this process
    assert (tmp_path / "run" / "plots" / "observables.png").is_file()
    figure = time_series(run_data(run).observables, own_observables=run_data(run).own_observables)
    panels = {ax.get_title(): ax for ax in figure.axes if ax.get_visible()}
    assert {"op", "lean", "order parameter |mean|"} <= set(panels)
    np.testing.assert_allclose(panels["op"].get_lines()[0].get_ydata(), run.observables["op"], rtol=1e-15)
    assert panels["op"].get_ylabel().startswith("sqrt(integral(rho * x)**2")
    np.testing.assert_array_equal(panels["lean"].get_lines()[0].get_xdata(), run.times[due])


def test_particle_runs_take_functions_of_token_sums(tmp_path):
    """On tokens the integrals are sums over the tokens: the same order parameter equals the
    particle run's ``order`` column, and run.nc has its attributes."""
    case = {**TOKENS, "output": {"observables": OWN[:1]}}
    run = meanfield.run_particles(case, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    np.testing.assert_allclose(run.observables["op"], run.observables["order"], rtol=1e-12)
    with xarray.open_dataset(tmp_path / "p" / "run.nc") as ds:
        assert ds["op"].attrs["expression"] == ORDER


@pytest.mark.parametrize("expression, message", [
    ("sqrt(integral(rho), 2)", "sqrt takes 1 argument(s)"),
    ("foo(integral(rho))", "unknown function 'foo'"),
    ("sqrt(rho)", "'rho' outside"),
])
def test_functions_of_integrals_refused(tmp_path, capsys, expression, message):
    """What cannot be evaluated is refused by ``meanfield run``: exit 2, one line naming the field."""
    refused(tmp_path, capsys, 'name = "x"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\noutputs = 2\n'
            f'[[output.observables]]\nname = "q"\nexpression = "{expression}"\n',
            f"output.observables[0].expression: {message}")
