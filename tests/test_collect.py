"""meanfield collect: one row per run and output (or per run), the parameters as columns, as
CSV or as an xarray Dataset; sweeps, plain runs and folders of runs; bad input writes nothing.

What collect gives is checked against each run's files read here on their own (config.toml with
tomllib, observables.csv with csv, run.nc with h5py), not through ``load_run``, which collect calls."""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import meanfield
from meanfield.analysis.collect import collect, find_runs, write_table
from meanfield.config import ConfigError
from meanfield.studies.sweep import sweep

BASE = {"name": "co", "mesh": {"sphere": "S1", "resolution": 16}, "time": {"t_final": 0.2, "outputs": 2},
        "output": {"xdmf": False}}
GRID = ["model.beta=1,4", "mesh.resolution=16,32"]


def _config(run: Path) -> dict:
    with open(run / "config.toml", "rb") as file:
        return tomllib.load(file)


def _observables(run: Path) -> dict[str, np.ndarray]:
    """observables.csv, column by column."""
    with open(run / "observables.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    return {name: np.array([float(row[name]) for row in rows]) for name in rows[0]}


def _netcdf(run: Path, *names: str) -> list[np.ndarray]:
    """The datasets ``names`` of run.nc."""
    with h5py.File(run / "run.nc", "r") as h5:
        return [h5[name][()] for name in names]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    path = tmp_path_factory.mktemp("collect") / "s"
    sweep(BASE, GRID, out=path, quiet=True)
    return path


def test_one_row_per_run_and_output_with_the_parameters_as_columns(swept):
    table = collect([swept])
    assert list(table.columns[:6]) == ["run", "kind", "status", "model.beta", "mesh.resolution", "t"]
    assert len(table) == 4 * 3 and table["run"].nunique() == 4 and set(table["status"]) == {"completed"}
    for run_dir, rows in table.groupby("run", sort=False):
        config, observables = _config(Path(run_dir)), _observables(Path(run_dir))
        assert list(rows["model.beta"].unique()) == [config["model"]["beta"]]
        assert list(rows["mesh.resolution"].unique()) == [config["mesh"]["resolution"]]
        assert np.array_equal(rows["t"], observables["t"]) and np.array_equal(rows["energy"], observables["energy"])
    final = collect([swept], final=True)
    assert len(final) == 4 and list(final["t"]) == [0.2] * 4
    assert list(zip(final["model.beta"], final["mesh.resolution"])) == [(1, 16), (1, 32), (4, 16), (4, 32)]


def test_netcdf_table_has_the_parameters_as_coordinates(swept, tmp_path):
    write_table(collect([swept]), tmp_path / "t.nc")
    with xr.open_dataset(tmp_path / "t.nc") as ds:
        assert ds.energy.dims == ("run", "time") and ds.sizes == {"run": 4, "time": 3}
        assert list(ds["model.beta"].values) == [1, 1, 4, 4] and ds["model.beta"].dims == ("run",)
        grid = ds.set_index(run=["model.beta", "mesh.resolution"]).unstack("run")
        assert grid.energy.dims == ("time", "model.beta", "mesh.resolution")
        energy = _observables(swept / "3-beta=4,resolution=32")["energy"]
        assert np.array_equal(grid.energy.sel({"model.beta": 4, "mesh.resolution": 32}), energy)
    write_table(collect([swept], final=True), tmp_path / "f.nc", final=True)
    with xr.open_dataset(tmp_path / "f.nc") as ds:
        assert ds.energy.dims == ("run",) and list(ds.t.values) == [0.2] * 4


def test_plain_runs_get_the_config_values_that_differ(tmp_path):
    meanfield.run(BASE, out=tmp_path / "runs" / "a", quiet=True)
    meanfield.run({**BASE, "model": {"beta": 9.0}}, out=tmp_path / "runs" / "b", quiet=True)
    meanfield.run_particles(BASE, n=10, out=tmp_path / "p", quiet=True)
    table = collect([tmp_path / "runs", tmp_path / "p", tmp_path / "runs" / "a"], final=True)  # a folder, a run
    # (and a run already in the folder: each run once)
    assert list(table["run"]) == [str(tmp_path / "runs" / "a"), str(tmp_path / "runs" / "b"), str(tmp_path / "p")]
    assert list(table["kind"]) == ["pde", "pde", "particles"] and list(table["model.beta"]) == [4.0, 9.0, 4.0]
    assert "particles.n" in table.columns and "mesh.resolution" not in table.columns  # the same everywhere
    csv = tmp_path / "t.csv"
    write_table(table, csv)
    assert pd.read_csv(csv).shape == table.shape


def test_bad_input_writes_nothing(swept, tmp_path):
    with pytest.raises(ConfigError, match="must end in .csv or .nc"):
        write_table(collect([swept]), tmp_path / "t.txt")
    (tmp_path / "mine.csv").write_text("precious\n")
    with pytest.raises(ConfigError, match="exists; pass --overwrite"):
        write_table(collect([swept]), tmp_path / "mine.csv")
    assert (tmp_path / "mine.csv").read_text() == "precious\n"
    with pytest.raises(FileNotFoundError, match="no such directory"):
        find_runs([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no meanfield runs"):
        find_runs([tmp_path / "empty"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "mine.csv"]


def test_cli(swept, tmp_path, capsys):
    from meanfield.cli import main

    assert main(["collect", str(swept), "-o", str(tmp_path / "t.csv")]) == 0
    assert "4 runs, 12 rows" in capsys.readouterr().out
    assert main(["collect", str(swept), "-o", str(tmp_path / "t.csv")]) == 2
    assert main(["collect", str(swept), "-o", str(tmp_path / "t.csv"), "--final", "--overwrite"]) == 0
    assert len(pd.read_csv(tmp_path / "t.csv")) == 4


def test_final_densities_of_a_sweep(tmp_path, cli_in_process):
    """``collect --densities``: density(run, cell) equal to each run's last snapshot, the mesh as coordinates."""
    sweep(BASE, ["model.beta=1,4,9"], out=tmp_path / "b", quiet=True)
    done = cli_in_process(["collect", "b", "-o", "final.nc", "--densities"], tmp_path)
    assert done.returncode == 0, done.stderr
    with xr.open_dataset(tmp_path / "final.nc") as ds:
        assert ds.density.dims == ("run", "cell") and ds.sizes == {"run": 3, "cell": 16}
        assert list(ds["model.beta"].values) == [1, 4, 9] and list(ds.t.values) == [0.2] * 3
        for i, path in enumerate(ds.run.values):
            density, x, area = _netcdf(tmp_path / path, "density", "x", "area")
            assert np.array_equal(ds.density.values[i], density[-1])
            assert np.array_equal(ds.cell_x.values, x) and np.array_equal(ds.cell_area.values, area)


def test_final_densities_of_a_sweep_over_slices(tmp_path):
    """A causal sweep over positions.slices: each run's whole token distribution (the mean of
    its positions' last densities, each of mass 1), so runs of different M share one table."""
    causal = {**BASE, "model": {"mask": "causal"},
              "initial": {"kind": "expression", "expression": "exp(2*(1 - s)*x)"}}
    sweep(causal, ["positions.slices=2,5"], out=tmp_path / "m", quiet=True)
    table = write_table(collect([tmp_path / "m"], final=True), tmp_path / "final.nc", densities=True)
    with xr.open_dataset(table) as ds:
        assert ds.density.dims == ("run", "cell") and list(ds["positions.slices"].values) == [2, 5]
        for i, path in enumerate(ds.run.values):
            density, area = _netcdf(Path(path), "density", "area")
            assert density.shape[1] == ds["positions.slices"].values[i]  # (time, position, cell)
            np.testing.assert_allclose(ds.density.values[i], density[-1].mean(axis=0), rtol=1e-15)
            assert ds.density.values[i] @ area == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("args, message", [
    (["-o", "final.csv", "--densities"], "--densities: needs -o TABLE.nc"),
    (["-o", "final.nc", "--densities"], "--densities: "),  # two meshes (16 and 32 cells)
])
def test_densities_refused(swept, tmp_path, args, message, cli_in_process):
    done = cli_in_process(["collect", str(swept), *args], tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_clusters_of_a_beta_sweep_through_the_cli(tmp_path, cli_in_process):
    """``meanfield sweep`` (default folder, where the docs put it: runs/<name>-sweep) then
    ``meanfield collect --clusters``: beta stays a float, every run has its cluster count and
    formation time (the same as ``meanfield clusters`` of that run), and the picture shows them
    against beta (the commands through the CLI's ``main``, in this process)."""
    from matplotlib.image import imread

    from meanfield.analysis.clusters import analyse_run
    from meanfield.analysis.phase import clusters_figure

    (tmp_path / "case.toml").write_text('name = "ph"\n[mesh]\nsphere = "S1"\nresolution = 64\n'
                                         '[time]\nt_final = 8.0\noutputs = 16\n[output]\nxdmf = false\n')
    done = cli_in_process(["sweep", "case.toml", "--grid", "model.beta=1,16", "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "runs" / "ph-sweep" / "sweep.csv").is_file()  # docs/getting-started.rst
    done = cli_in_process(["collect", "runs/ph-sweep", "-o", "table.nc", "--clusters"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "table-clusters.png: clusters against model.beta" in done.stdout
    with xr.open_dataset(tmp_path / "table.nc") as ds:
        assert ds["model.beta"].dtype == np.float64 and ds["model.beta"].values.tolist() == [1.0, 16.0]
        assert ds["formation_time"].dims == ("run",) and ds["clusters"].dims == ("run", "time")
        assert "10 x uniform" in ds["formation_time"].attrs["long_name"]
        for k, run in enumerate(ds["run"].values):
            history = analyse_run(tmp_path / run, factors=(10.0,), plots=False)
            assert ds["clusters"].isel(run=k).values.tolist() == history.counts.tolist()
            assert ds["formation_time"].values[k] == pytest.approx(history.crossing(10.0), nan_ok=True)
        counts = ds["clusters"].isel(time=-1).values
    assert counts[0] < counts[-1]  # more clusters at larger beta (measured 2, 3: the three initial bumps at beta 16)
    figure = clusters_figure(collect([tmp_path / "runs" / "ph-sweep"], clusters=True), ["model.beta"])
    count, formation = figure.axes
    (line,) = count.get_lines()
    assert line.get_xdata().tolist() == [1.0, 16.0] and line.get_ydata().tolist() == counts.tolist()
    assert count.get_xlabel() == "model.beta" and count.get_ylabel() == "clusters at the last output"
    assert formation.get_ylabel() == "t" and "10 x uniform" in formation.get_title()
    assert imread(tmp_path / "table-clusters.png").shape[:2] == (400, 1000)
