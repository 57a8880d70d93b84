"""Atoms (issue 12) in everything a run stores and reports: snapshots -> load_run, run.nc (CF
contiguous ragged array), ParaView point files, the cluster analysis and the plots.

The runs here are hand-made (tests/helpers/hybrid_runs.py) and written through the real output
writers: atoms appear (capture), move and merge, and every reader must give back exactly the
atoms that were written; known answers for the cluster analysis are the scripted captures and
merge, and that the clusters' masses add up to the total mass of density and atoms.
"""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET
from pathlib import Path

import meshio
import numpy as np
import pytest
import xarray as xr
from helpers.hybrid_runs import bumps, merging_atoms, mesh_of, on_circle, sphere_atoms, write_hybrid_run
from helpers.s1_cases import hybrid_case
from matplotlib.collections import PathCollection

from meanfield.analysis.clusters import analyse_run
from meanfield.analysis.clusters.crossing import first_crossing
from meanfield.analysis.events import Event
from meanfield.atoms import Atoms
from meanfield.merging import crossing_time
from meanfield.rundir import layout
from meanfield.rundir.netcdf import atoms_from_dataset
from meanfield.rundir.results import describe, load_run

U1 = 1.0 / (2.0 * np.pi)


def _assert_same_atoms(got: list[Atoms], expected: list[Atoms | None]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert b is not None
        assert np.array_equal(a.masses, b.masses) and np.array_equal(a.positions, b.positions)
        assert np.array_equal(a.ids, b.ids) and a.ids.dtype == np.int64


@pytest.fixture(params=["S1", "S2"])
def hybrid(request, tmp_path):
    """(run directory, mesh, outputs) of a hand-made hybrid run on S^1 or S^2."""
    mesh = mesh_of(request.param, 128 if request.param == "S1" else 3)
    outputs = merging_atoms(mesh) if request.param == "S1" else sphere_atoms(mesh)
    write_hybrid_run(tmp_path / "run", mesh, outputs)
    return tmp_path / "run", mesh, outputs


def test_load_run_gives_back_the_atoms_of_every_output_exactly(hybrid):
    path, mesh, outputs = hybrid
    run = load_run(path)
    expected = [a for _, _, a in outputs]
    assert run.atoms is not None
    _assert_same_atoms(run.atoms, expected)
    assert [a.count for a in run.atoms][:2] == [0, 2 if mesh.sphere == "S2" else 1]
    assert run.atoms_at(0.9) is run.atoms[1]
    frame = run.to_dataframe()
    assert list(frame["atom_count"]) == [a.count for a in expected]
    np.testing.assert_array_equal(frame["atom_mass"], [a.mass for a in expected])
    table = run.atoms_dataframe()
    assert len(table) == sum(a.count for a in expected)
    last = table[table.output == len(outputs) - 1]
    assert list(last["id"]) == list(expected[-1].ids) and np.array_equal(last["mass"], expected[-1].masses)
    assert np.array_equal(last[list("xyz"[: mesh.d])].to_numpy(), expected[-1].positions)
    facts = describe(path)
    assert facts["atoms"] == {"count": expected[-1].count, "mass": expected[-1].mass}


def test_a_run_without_atoms_is_read_as_before(tmp_path):
    mesh = mesh_of("S1", 64)
    outputs = [(t, rho, None) for t, rho, _ in merging_atoms(mesh)]
    write_hybrid_run(tmp_path / "plain", mesh, outputs)
    run = load_run(tmp_path / "plain")
    assert run.atoms is None and run.atoms_at(1.0).count == 0 and run.atoms_dataframe().empty
    assert "atom_count" not in run.to_dataframe() and "atoms" not in describe(tmp_path / "plain")
    with xr.open_dataset(tmp_path / "plain" / layout.RUN_FILE) as ds:
        assert "atom" not in ds.dims and not any(str(name).startswith("atom") for name in ds.variables)
        assert atoms_from_dataset(ds) == []
    assert not (tmp_path / "plain" / layout.PARAVIEW_ATOMS).exists()
    assert not (tmp_path / "plain" / layout.ATOM_POINTS).exists()


def test_run_file_holds_the_atoms_as_a_cf_contiguous_ragged_array(hybrid):
    path, mesh, outputs = hybrid
    expected = [a for _, _, a in outputs]
    counts = [a.count for a in expected]
    with xr.open_dataset(path / layout.RUN_FILE) as ds:
        assert ds.sizes["atom"] == sum(counts)
        assert ds.atom_count.dims == ("time",) and ds.atom_count.attrs["sample_dimension"] == "atom"
        assert list(ds.atom_count.values) == counts
        assert np.array_equal(ds.atom_time.values, np.repeat([t for t, _, _ in outputs], counts))
        assert ds.atom_masses.dims == ("atom",) and ds.atom_ids.dtype == np.int64
        _assert_same_atoms(atoms_from_dataset(ds), expected)
        positions = np.concatenate([a.positions for a in expected])
        if mesh.sphere == "S2":
            lon, lat = np.radians(ds.atom_lon.values), np.radians(ds.atom_lat.values)
            np.testing.assert_allclose(np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)],
                                                1), positions, atol=1e-12)
        else:
            np.testing.assert_allclose(on_circle(ds.atom_theta.values), positions, atol=1e-12)
        xr.testing.assert_identical(ds, load_run(path).to_xarray())  # appended output by output = built at once


def _pvd(path) -> list[tuple[float, str]]:
    root = ET.parse(path / layout.PARAVIEW_ATOMS).getroot()
    return [(float(d.get("timestep")), d.get("file")) for d in root.iter("DataSet")]


def test_paraview_atom_points_hold_every_atom(hybrid):
    path, mesh, outputs = hybrid
    entries = _pvd(path)
    assert [t for t, _ in entries] == [t for t, _, _ in outputs]
    for (_, name), (_, _, atoms) in zip(entries, outputs):
        assert atoms is not None
        piece = ET.parse(path / name).getroot().find("UnstructuredGrid/Piece")
        assert piece is not None and piece.get("NumberOfPoints") == piece.get("NumberOfCells") == str(atoms.count)
        if not atoms.count:  # meshio reads no empty grid
            continue
        grid = meshio.read(path / name)
        padded = np.column_stack([atoms.positions, np.zeros((atoms.count, 3 - mesh.d))])
        assert np.array_equal(grid.points, padded)
        assert np.array_equal(grid.point_data["mass"], atoms.masses)
        assert np.array_equal(grid.point_data["id"], atoms.ids)
        assert grid.cells[0].type == "vertex" and np.array_equal(grid.cells[0].data.ravel(), np.arange(atoms.count))


@pytest.mark.parametrize("damaged", [False, True])
def test_resume_cuts_atoms_back_in_run_file_and_paraview_files(tmp_path, damaged):
    mesh = mesh_of("S1", 64)
    first = merging_atoms(mesh)
    write_hybrid_run(tmp_path / "r", mesh, first)
    if damaged:
        (tmp_path / "r" / layout.RUN_FILE).write_bytes(b"not HDF5")
    # resumed after output 2: outputs 3.. differ (three atoms, then none)
    later = [(3.0, first[3][1], Atoms([0.1, 0.2, 0.05], on_circle([0.0, 1.0, 2.0]), [0, 1, 2])),
             (4.0, first[4][1], Atoms.none(2))]
    outputs = first[:3] + later
    write_hybrid_run(tmp_path / "r", mesh, outputs, start=3)
    run = load_run(tmp_path / "r")
    _assert_same_atoms(run.atoms or [], [a for _, _, a in outputs])
    with xr.open_dataset(tmp_path / "r" / layout.RUN_FILE) as ds:
        assert ds.sizes["time"] == 5 and ds.sizes["atom"] == 0 + 1 + 2 + 3 + 0
        _assert_same_atoms(atoms_from_dataset(ds), [a for _, _, a in outputs])
        xr.testing.assert_identical(ds, run.to_xarray())
    assert [t for t, _ in _pvd(tmp_path / "r")] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [i for i, _ in layout.atom_point_files(tmp_path / "r")] == [0, 1, 2, 3, 4]
    assert meshio.read(tmp_path / "r" / "atoms" / "0003.vtu").point_data["id"].tolist() == [0, 1, 2]


def test_clusters_of_a_hybrid_run_count_atoms_and_report_their_merge(tmp_path):
    mesh = mesh_of("S1", 128)
    outputs = merging_atoms(mesh)
    write_hybrid_run(tmp_path / "r", mesh, outputs)
    history = analyse_run(tmp_path / "r", out=tmp_path / "c")
    assert list(history.counts) == [3, 3, 3, 3, 2, 2]
    # captures keep the cluster ids (no births or deaths); the two atoms, 0.3 rad apart at t = 3,
    # are one at t = 4: the merge distance 0.01 is reached at 3 + (0.3 - 0.01) / 0.3 (meanfield.merging)
    survivor, absorbed = (int(history.ids[3][np.flatnonzero(history.frames[3].atom_ids == i)[0]]) for i in (0, 1))
    assert len(history.events) == 1 and history.events[0].ids == (survivor, absorbed)
    assert (history.events[0].kind, history.events[0].time) == ("merge", pytest.approx(3.0 + 0.29 / 0.3, rel=1e-12))
    for (_, rho, atoms), frame in zip(outputs, history.frames):
        assert atoms is not None and frame.atom_masses is not None and frame.atom_ids is not None
        # regions partition the circle: the clusters hold all the mass, density and atoms
        assert abs(frame.masses.sum() - (rho @ mesh.areas + atoms.mass)) < 1e-12
        np.testing.assert_array_equal(np.sort(frame.atom_masses[frame.atom_masses > 0]), np.sort(atoms.masses))
        for mass, position, i in zip(atoms.masses, atoms.positions, atoms.ids):
            k = int(np.flatnonzero(frame.atom_ids == i)[0])
            np.testing.assert_allclose(frame.positions[k], position, rtol=0, atol=1e-15)
            assert frame.heights[k] == np.inf
            assert frame.atom_masses[k] == mass and frame.masses[k] > mass
    assert np.isfinite(history.frames[0].heights).all()
    with open(tmp_path / "c" / "clusters.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {"atom_mass", "atom_id"} <= set(rows[0])
    atom_rows = [r for r in rows if r["atom_id"] != "-1"]
    assert len(atom_rows) == sum(a.count for _, _, a in outputs if a is not None)
    assert all(r["height"] == "inf" for r in atom_rows)
    with open(tmp_path / "c" / "events.csv") as fh:
        (row,) = list(csv.DictReader(fh))
    merge = history.events[0]
    assert row == {"kind": "merge", "time": repr(merge.time), "kept": str(survivor), "absorbed": str(absorbed),
                   "kept_mass": repr(merge.masses[0]), "absorbed_mass": repr(merge.masses[1])}
    assert (tmp_path / "c" / "clusters.png").stat().st_size > 0


def test_clusters_of_a_hybrid_run_on_the_sphere(tmp_path):
    mesh = mesh_of("S2", 3)
    outputs = sphere_atoms(mesh)
    write_hybrid_run(tmp_path / "r", mesh, outputs)
    history = analyse_run(tmp_path / "r")
    assert list(history.counts) == [2, 2, 1]
    heavier = int(history.ids[1][np.flatnonzero(history.frames[1].atom_ids == 0)[0]])
    lighter = int(history.ids[1][np.flatnonzero(history.frames[1].atom_ids == 1)[0]])
    # pi/2 apart at t = 1, one at t = 2: 0.01 rad reached at 1 + (pi/2 - 0.01) / (pi/2)
    (merge,) = history.events
    assert merge == Event("merge", pytest.approx(1.0 + (np.pi / 2 - 0.01) / (np.pi / 2), rel=1e-12),
                          (heavier, lighter), merge.masses)
    assert merge.masses[0] > merge.masses[1] > 0  # the two clusters just before, the heavier first
    last = history.frames[-1]
    np.testing.assert_allclose(last.positions[0], outputs[-1][2].positions[0], rtol=0, atol=1e-15)
    assert abs(last.masses.sum() - (outputs[-1][1] @ mesh.areas + 0.52)) < 1e-12


def test_the_rim_that_capture_leaves_is_part_of_the_atoms_cluster():
    from meanfield.analysis.clusters.atoms import WithAtoms
    from meanfield.analysis.clusters.fields import CellAverages
    from meanfield.analysis.clusters.frame import analyse_field

    mesh = mesh_of("S1", 128)
    centre = on_circle(0.5)
    rho = bumps(mesh, [*centre, *on_circle(-2.0)], [0.5, 0.3], kappa=200.0)
    core = mesh.graph.ring(int(mesh.locator.locate(centre)[0]), 1)  # capture empties the core cells
    atoms = Atoms([float(rho[core] @ mesh.areas[core])], centre, [7])
    rho[core] = 0.0
    field = WithAtoms(CellAverages(mesh, rho, mesh.areas), atoms)
    raw = CellAverages(mesh, field.values, mesh.areas).clusters(U1, 0.01)[1]
    assert len(raw) == 4  # the watershed alone: the atom, its rim on either side, the other cluster
    frame = analyse_field(field, 0.0, U1, 0.01)
    assert frame.count == 2 and list(frame.atom_ids) == [7, -1]
    assert abs(frame.masses.sum() - (rho @ mesh.areas + atoms.mass)) < 1e-12
    assert frame.masses[0] > atoms.mass


def test_every_atom_is_a_cluster_until_two_share_a_cell():
    from meanfield.analysis.clusters.atoms import WithAtoms
    from meanfield.analysis.clusters.fields import CellAverages
    from meanfield.analysis.clusters.frame import analyse_field

    mesh = mesh_of("S1", 64)
    h = 2 * np.pi / 64
    rho = bumps(mesh, on_circle(-2.0), [0.4])
    for gap, clusters in ((1.0, 3), (3.0, 3), (0.2, 2)):  # adjacent cells, apart, the same cell
        theta = np.array([0.4, 0.4 + gap * h]) + 0.5 * h * (gap == 0.2)
        atoms = Atoms([0.3, 0.2], on_circle(theta), [0, 1])
        field = WithAtoms(CellAverages(mesh, rho, mesh.areas), atoms)
        frame = analyse_field(field, 0.0, U1, 0.01)
        assert frame.count == clusters, gap
        assert abs(frame.masses.sum() - (rho @ mesh.areas + 0.5)) < 1e-12
        assert sorted(frame.atom_ids) == ([-1, 0] if clusters == 2 else [-1, 0, 1])
        if clusters == 3:  # the raw watershed joins atoms in adjacent cells: the split is needed
            raw = CellAverages(mesh, field.values, mesh.areas).clusters(U1, 0.01)[1]
            assert len(raw) == (2 if gap == 1.0 else 3)


def test_a_moving_atom_keeps_its_cluster_id(tmp_path):
    mesh = mesh_of("S1", 128)
    # a broad density cluster at pi; the atom runs down its flank, leaving its old cell in the
    # density's basin (the cell rule of the tracking would see a merge and a birth)
    theta = 1.8 - 0.6 * np.arange(4)
    outputs = [(float(k), bumps(mesh, on_circle(np.pi), [0.5], kappa=1.0), Atoms([0.3], on_circle(theta[k]), [5]))
               for k in range(4)]
    write_hybrid_run(tmp_path / "r", mesh, outputs)
    history = analyse_run(tmp_path / "r")
    assert list(history.counts) == [2, 2, 2, 2] and history.events == []
    (atom,) = {int(i[f.atom_ids == 5][0]) for f, i in zip(history.frames, history.ids)}
    np.testing.assert_allclose(history.track(atom)["positions"], on_circle(theta), atol=1e-15)


def test_crossing_times_skip_infinite_heights():
    t = np.arange(4.0)
    # exponential growth (exact for the log-cubic), then the peak becomes an atom
    assert abs(first_crossing(t, np.array([1.0, np.e, np.e**2, np.inf]), np.e**1.5) - 1.5) < 1e-12
    # crossed between an output and the atom's first output: known to the output spacing
    assert first_crossing(t, np.array([1.0, 2.0, np.inf, np.inf]), 3.0) == 2.0


@pytest.mark.filterwarnings("error")
def test_plots_of_hybrid_runs_draw_the_atoms(hybrid):
    from meanfield.plotting import plot_run_directory
    from meanfield.plotting.circle import SPACETIME_ATOM_SCALE, circle_spacetime
    from meanfield.plotting.style import ATOM_SCALE

    path, mesh, outputs = hybrid
    written = {p.name for p in plot_run_directory(path, movie=True)}
    stills = {"density.png", "spacetime.png"} if mesh.sphere == "S1" else {"density_initial.png", "density_final.png"}
    assert stills | {"observables.png", "density.gif"} <= written
    if mesh.sphere == "S1":
        run = load_run(path)
        atoms = [(a.positions, a.masses) for a in run.atoms or []]
        fig = circle_spacetime(run.vertices, run.cells, run.times, run.densities, atoms=atoms)
        (markers,) = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
        theta = np.concatenate([np.arctan2(p[:, 1], p[:, 0]) for p, _ in atoms])
        t = np.repeat(run.times, [len(m) for _, m in atoms])
        np.testing.assert_allclose(markers.get_offsets(), np.column_stack([theta, t]))
        np.testing.assert_allclose(markers.get_sizes(), SPACETIME_ATOM_SCALE * np.concatenate([m for _, m in atoms]))
    else:
        from meanfield.plotting.sphere_maps import sphere_map

        _, rho, atoms = outputs[1]
        assert atoms is not None
        fig = sphere_map(mesh.vertices, mesh.cells, rho, points=atoms.positions, masses=atoms.masses)
        sizes = [c.get_sizes() for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection)]
        expected = ATOM_SCALE * atoms.masses
        mollweide, orthographic = sizes  # the orthographic view shows the atoms on its side
        np.testing.assert_allclose(np.sort(mollweide), np.sort(expected))
        assert 0 < len(orthographic) and set(orthographic) <= set(expected)


HYBRID_CASE = hybrid_case(128, 3.5, 7)  # the atoms merge at t = 2.82 at resolution 64, 128 and 256


def _check_hybrid_run(path, plotted: Path | None = None) -> None:
    """What a real hybrid run wrote: snapshots, run.nc, ParaView points, clusters and plots agree
    (the plots drawn here, or those ``meanfield plot`` wrote into ``plotted``)."""
    from meanfield.plotting import plot_run_directory
    from meanfield.rundir.files import load_npz

    run = load_run(path)
    assert run.atoms is not None and run.status == "completed"
    counts = [a.count for a in run.atoms]
    assert counts[0] == 2 and counts[-1] == 1 and list(run.observables["atom_count"]) == counts
    for (_, file), atoms in zip(layout.snapshot_files(path), run.atoms):
        _assert_same_atoms([Atoms.from_arrays(load_npz(file), 2)], [atoms])
    assert np.all(np.abs(run.observables["mass"] - 1.0) < 1e-12)
    np.testing.assert_allclose(run.densities @ run.areas + [a.mass for a in run.atoms], 1.0, rtol=0, atol=1e-12)
    with xr.open_dataset(path / layout.RUN_FILE) as ds:
        _assert_same_atoms(atoms_from_dataset(ds), run.atoms)
        xr.testing.assert_identical(ds, run.to_xarray())
    assert [t for t, _ in _pvd(path)] == list(run.times)
    # the merge: atom 1 (lighter) joins atom 0 between the last output with two atoms and the next
    merged = counts.index(1)
    assert run.atoms[merged].ids.tolist() == [0]
    history = analyse_run(path, out=path / "clusters")
    merges = [e for e in history.events if e.kind == "merge"]
    # the merge time: when the atoms came within 0.01 rad, interpolated (meanfield.merging)
    last = run.atoms[merged - 1]
    apart = float(np.arccos(np.clip(last.positions[0] @ last.positions[1], -1.0, 1.0)))
    expected = crossing_time(run.times[merged - 1], apart, run.times[merged], 0.0)
    assert [e.time for e in merges] == [pytest.approx(expected, rel=1e-12)]
    assert run.times[merged - 1] < expected < run.times[merged] and not [e for e in history.events if e.kind == "birth"]
    before = history.frames[merged - 1]
    survivor, absorbed = (int(history.ids[merged - 1][before.atom_ids == i][0]) for i in (0, 1))
    assert merges[0].ids == (survivor, absorbed)
    written = {p.name for p in (plot_run_directory(path, movie=False) if plotted is None else plotted.iterdir())}
    assert {"density.png", "spacetime.png", "observables.png"} <= written


def test_hybrid_run_through_load_run_clusters_and_plots(tmp_path):
    import meanfield

    (tmp_path / "case.toml").write_text(HYBRID_CASE)
    meanfield.run(tmp_path / "case.toml", out=tmp_path / "run", quiet=True)
    _check_hybrid_run(tmp_path / "run")


@pytest.mark.slow
def test_hybrid_run_under_mpirun(tmp_path, cli_in_process):
    """A hybrid run on 2 ranks, then the commands that read it (on one rank, in this process:
    under mpirun they do all their work on rank 0, as test_mpi_jobs.py runs them; the movie of a
    hybrid run is test_plots_of_hybrid_runs_draw_the_atoms's)."""
    from helpers.mpi import meanfield_job

    (tmp_path / "case.toml").write_text(HYBRID_CASE)
    proc = meanfield_job("run", str(tmp_path / "case.toml"), "--out", str(tmp_path / "run"), "--quiet", timeout=300)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    for args in (["clusters", "run", "--out", "c"], ["plot", "run", "--out", "p", "--no-movie"],
                 ["info", "run", "--json"]):
        proc = cli_in_process(args, tmp_path)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    assert load_run(tmp_path / "run").metadata["ranks"] == 2
    assert '"atoms"' in proc.stdout and (tmp_path / "c" / "clusters.csv").is_file()
    _check_hybrid_run(tmp_path / "run", plotted=tmp_path / "p")


@pytest.mark.slow
def test_resumed_hybrid_run_equals_the_uninterrupted_one(tmp_path, monkeypatch):
    """SIGTERM after the output at t = 1 (two atoms); resume: run.nc, ParaView points and the
    atoms are those of an uninterrupted run (run.nc cut back on resume with its atom rows)."""
    import os
    import signal

    import meanfield
    from meanfield.drivers.pde import PDESimulation
    from meanfield.engine.controller import RunInterrupted

    case = hybrid_case(128, 2.0, 7)
    (tmp_path / "case.toml").write_text(case.replace("outputs = 7", "outputs = 4"))
    real = PDESimulation.step

    def step(self, t_end):
        dt = real(self, t_end)
        if abs(self.t - 1.0) < 1e-12:
            os.kill(os.getpid(), signal.SIGTERM)
        return dt

    monkeypatch.setattr(PDESimulation, "step", step)
    with pytest.raises(RunInterrupted):
        meanfield.run(tmp_path / "case.toml", out=tmp_path / "r", quiet=True)
    monkeypatch.setattr(PDESimulation, "step", real)
    import h5netcdf

    with h5netcdf.File(tmp_path / "r" / layout.RUN_FILE, "a") as f:  # a kill after an output, before its checkpoint
        f.resize_dimension("time", f.dimensions["time"].size + 1)
        f.resize_dimension("atom", f.dimensions["atom"].size + 2)
    resumed = meanfield.resume(tmp_path / "r", quiet=True)
    reference = meanfield.run(tmp_path / "case.toml", out=tmp_path / "ref", quiet=True)
    assert resumed.atoms is not None and reference.atoms is not None
    _assert_same_atoms(resumed.atoms, reference.atoms)
    with xr.open_dataset(tmp_path / "r" / layout.RUN_FILE) as ds:
        _assert_same_atoms(atoms_from_dataset(ds), reference.atoms)
        xr.testing.assert_identical(ds, resumed.to_xarray())
    assert [t for t, _ in _pvd(tmp_path / "r")] == list(reference.times)
