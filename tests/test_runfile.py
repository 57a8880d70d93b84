"""The run file run.nc: xarray opens it, it holds the snapshots entry by entry in global order,
it follows CF/UGRID where they fit, the XDMF files point into it, and resume keeps it equal to
the snapshots (cut back, or rebuilt when damaged)."""

from __future__ import annotations

import os
import signal
import xml.etree.ElementTree as ET

import h5py
import meshio
import numpy as np
import pytest
import xarray as xr

import meanfield
from meanfield.engine.controller import RunInterrupted
from meanfield.rundir import layout
from meanfield.rundir.files import load_npz

pytestmark = pytest.mark.mpi


def _config(sphere: str = "S2", kind: str = "fv", **time) -> dict:
    return {"name": "file", "mesh": {"sphere": sphere, "resolution": 1 if sphere == "S2" else 32},
            "scheme": {"kind": kind}, "time": {"t_final": 0.2, "outputs": 2, **time}}


def _snapshots(run) -> list[dict[str, np.ndarray]]:
    return [load_npz(p) for _, p in layout.snapshot_files(run)]


@pytest.mark.parametrize("kind", ["fv", "dg1"])
def test_run_file_holds_every_snapshot_in_global_order(tmp_path, kind):
    run = meanfield.run(_config(kind=kind), out=tmp_path / "r", quiet=True)
    with xr.open_dataset(tmp_path / "r" / layout.RUN_FILE) as ds:
        assert ds.density.dims == ("time", "cell") and ds.sizes["cell"] == 80
        snaps = _snapshots(tmp_path / "r")
        assert len(snaps) == ds.sizes["time"] == 3
        for k, snap in enumerate(snaps):
            assert float(ds.time[k]) == float(snap["t"])
            assert np.array_equal(ds.density[k].values, snap["density"])
            if kind == "dg1":
                assert np.array_equal(ds.vertex_density[k].values, snap["vertex_density"])
        mesh = load_npz(tmp_path / "r" / layout.MESH)
        assert np.array_equal(ds.face_node_connectivity.values, mesh["cells"])
        assert np.array_equal(np.stack([ds.node_x, ds.node_y, ds.node_z], axis=1), mesh["vertices"])
        assert np.array_equal(np.stack([ds.x, ds.y, ds.z], axis=1), mesh["centroids"])
        assert np.array_equal(ds.area.values, mesh["areas"]) and ds.area.attrs["units"] == "sr"
        lon, lat = np.radians(ds.lon.values), np.radians(ds.lat.values)
        np.testing.assert_allclose(np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], 1),
                                   mesh["centroids"], atol=1e-12)
        assert np.array_equal(ds.energy.values, run.observables["energy"])
        # CF / UGRID
        assert ds.attrs["Conventions"] == "CF-1.11 UGRID-1.0" and ds.attrs["scheme"] == kind
        assert ds.mesh.attrs["cf_role"] == "mesh_topology" and ds.mesh.attrs["topology_dimension"] == 2
        assert ds.face_node_connectivity.attrs["start_index"] == 0
        assert ds.density.attrs["location"] == "face" and ds.density.attrs["units"] == "sr-1"
        if kind == "dg1":
            assert "negative" in ds.vertex_density.attrs["comment"]
        xr.testing.assert_identical(ds, run.to_xarray())
    frame = run.to_dataframe()
    assert list(frame["t"]) == [0.0, 0.1, 0.2] and frame.index.name == "output"


def test_run_file_on_the_circle(tmp_path):
    run = meanfield.run(_config("S1"), out=tmp_path / "r", quiet=True)
    with xr.open_dataset(tmp_path / "r" / layout.RUN_FILE) as ds:
        assert ds.density.dims == ("time", "cell") and ds.sizes["cell"] == 32 and ds.sizes["corner"] == 2
        assert ds.mesh.attrs["topology_dimension"] == 1 and ds.density.attrs["location"] == "edge"
        np.testing.assert_allclose(np.stack([np.cos(ds.theta), np.sin(ds.theta)], 1), run.centroids, atol=1e-12)
        assert np.array_equal(ds.edge_node_connectivity.values, run.cells)
        assert np.array_equal(ds.density.values, run.densities)
        xr.testing.assert_identical(ds, run.to_xarray())


def test_particle_run_file(tmp_path):
    run = meanfield.run_particles(_config("S1"), n=20, out=tmp_path / "p", quiet=True)
    with xr.open_dataset(tmp_path / "p" / layout.RUN_FILE) as ds:
        assert ds.points.dims == ("time", "token", "coordinate") and list(ds.coordinate.values) == ["x", "y"]
        assert np.array_equal(ds.points.values, np.array([s["points"] for s in _snapshots(tmp_path / "p")]))
        xr.testing.assert_identical(ds, run.to_xarray())
    assert list(run.to_dataframe().columns[:2]) == ["t", "mass"]


def _hdf_paths(xdmf) -> list[tuple[str, tuple[int, ...]]]:
    """(dataset path, shape of the dataset described) of every HDF DataItem of an XDMF file: its
    Dimensions, or the dataspace of a selection (``run.nc:/density|start:stride:count:dataspace``)."""
    paths = []
    for item in ET.parse(xdmf).getroot().iter("DataItem"):
        if item.get("Format") == "HDF":
            where, _, selection = item.text.partition("|")
            shape = selection.split(":")[3] if selection else item.get("Dimensions")
            paths.append((where.split(":")[1], tuple(map(int, shape.split()))))
    return paths


def test_xdmf_files_point_into_the_run_file_and_meshio_reads_their_mesh(tmp_path):
    run = meanfield.run(_config(kind="dg1"), out=tmp_path / "r", quiet=True)
    root = tmp_path / "r"
    with h5py.File(root / layout.RUN_FILE, "r") as h5:
        for name in (layout.PARAVIEW_CELLS, layout.PARAVIEW_DG1):
            paths = _hdf_paths(root / name)
            assert len(paths) == 3 * len(run.times)
            for path, dims in paths:
                assert h5[path].shape == dims, (name, path)
    points, cells = meshio.xdmf.TimeSeriesReader(root / layout.PARAVIEW_CELLS).read_points_cells()
    assert np.array_equal(points, run.vertices) and np.array_equal(cells[0].data, run.cells)
    points, cells = meshio.xdmf.TimeSeriesReader(root / layout.PARAVIEW_DG1).read_points_cells()
    assert np.array_equal(points, run.vertices[run.cells].reshape(-1, 3))


def test_no_xdmf_files_when_output_xdmf_is_off(tmp_path):
    meanfield.run({**_config(), "output": {"xdmf": False}}, out=tmp_path / "r", quiet=True)
    assert (tmp_path / "r" / layout.RUN_FILE).is_file() and not (tmp_path / "r" / layout.PARAVIEW_CELLS).exists()
    assert not (tmp_path / "r" / layout.PARAVIEW_SCRIPT).exists()


def _interrupted(tmp_path, monkeypatch, kind: str = "dg1"):
    """A DG1 run stopped by SIGTERM after its second output (checkpoint at t = 0.25)."""
    from meanfield.drivers.pde import PDESimulation

    real = PDESimulation.step

    def step(self, t_end):
        dt = real(self, t_end)
        if abs(self.t - 0.25) < 1e-12:
            os.kill(os.getpid(), signal.SIGTERM)
        return dt

    monkeypatch.setattr(PDESimulation, "step", step)
    cfg = _config(kind=kind, t_final=0.5, outputs=4, dt=0.05)
    with pytest.raises(RunInterrupted):
        meanfield.run(cfg, out=tmp_path / "r", quiet=True)
    monkeypatch.setattr(PDESimulation, "step", real)
    return cfg


def _assert_equals_uninterrupted(tmp_path, cfg):
    run = meanfield.resume(tmp_path / "r", quiet=True)
    reference = meanfield.run(cfg, out=tmp_path / "ref", quiet=True)
    with xr.open_dataset(tmp_path / "r" / layout.RUN_FILE) as ds:
        xr.testing.assert_identical(ds, run.to_xarray())
        assert np.array_equal(ds.vertex_density.values, reference.vertex_densities)
    assert len(_hdf_paths(tmp_path / "r" / layout.PARAVIEW_DG1)) == 3 * 5


def test_resume_cuts_the_run_file_back_to_the_checkpoint(tmp_path, monkeypatch, comm):
    cfg = _interrupted(tmp_path, monkeypatch)
    if comm.rank == 0:  # a kill between writing an output and its checkpoint leaves an extra row
        import h5netcdf

        with h5netcdf.File(tmp_path / "r" / layout.RUN_FILE, "a") as f:
            f.resize_dimension("time", 4)
    _assert_equals_uninterrupted(tmp_path, cfg)


@pytest.mark.slow
def test_resume_rebuilds_a_damaged_run_file_from_the_snapshots(tmp_path, monkeypatch, comm):
    cfg = _interrupted(tmp_path, monkeypatch)
    if comm.rank == 0:
        (tmp_path / "r" / layout.RUN_FILE).write_bytes(b"not HDF5")
    _assert_equals_uninterrupted(tmp_path, cfg)


def test_mesh_command_writes_xdmf_that_meshio_reads(tmp_path, capsys):
    from meanfield.cli import main

    assert main(["mesh", "S1", "--cells", "10", "-o", str(tmp_path / "c.xdmf")]) == 0
    mesh = meshio.read(tmp_path / "c.xdmf")
    assert len(mesh.points) == 10 and len(mesh.cells_dict["line"]) == 10
