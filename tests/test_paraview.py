"""ParaView opens what a run writes, with its default readers.

Three kinds of checks:

* always: the XDMF files' structure, read without ParaView (XML + h5py): every DataItem has what
  Xdmf3 (ParaView's default XDMF reader) needs to read it (a number type and precision, no
  HyperSlab or Function item, which Xdmf3's VTK reader skips as "unrecognized array type
  [None]"), its dimensions and selection match the HDF5 dataset, the selected row of output k is
  run.nc's output k, the times increase; a file in the old HyperSlab form is rejected;
* where the ``vtk`` wheel is installed (the test extra), VTK's own readers: its XDMF2 reader opens
  each .xdmf and gives back run.nc's times, cells and points (on the unit sphere); its XML reader
  (ParaView's reader of .vtu files) gives back the atoms' points, masses and ids.  The wheel has
  no Xdmf3 reader, and XDMF2 does not read Xdmf3's row selections, so the density values as
  ParaView reads them are left to pvbatch;
* where ParaView is installed: ``pvbatch`` opens the files as users do (``OpenDataFile`` ->
  update at every time step) and gives back run.nc's cells, points, ``density`` values and
  times, for FV S^2, DG1 S^1 and S^2 and a run of 2 ranks; ``view-in-paraview.py`` draws every
  atom as a glyph and saves a picture, on the session's one Xvfb (:mod:`helpers.display`:
  Debian's pvbatch draws through X only).  These are skipped, each with a line saying why, where
  ``pvbatch`` (Debian: ``apt-get install paraview python3-paraview``; ``make test`` installs it
  when run as root) or ``Xvfb`` (``xvfb``) is missing, or ``MEANFIELD_TEST_NO_PARAVIEW=1`` hides
  them (as on a machine without ParaView).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
from helpers.display import shared_display
from helpers.hybrid_runs import mesh_of, sphere_atoms, write_hybrid_run
from helpers.mpi import mpirun
from helpers.s1_cases import hybrid_case

import meanfield
from meanfield.rundir import layout
from meanfield.rundir.results import load_run

#: Set to 1 to test as on a machine without ParaView (the pvbatch checks skip, VTK's readers check).
HIDE_PARAVIEW = "MEANFIELD_TEST_NO_PARAVIEW"
HIDDEN = os.environ.get(HIDE_PARAVIEW, "0") not in ("", "0")
PVBATCH = None if HIDDEN else shutil.which("pvbatch")
XVFB = shutil.which("Xvfb")
#: Tries of a pvbatch command whose X display failed it (see :func:`_paraview`).
DISPLAY_TRIES = 3


def needs_pvbatch(unchecked: str) -> pytest.MarkDecorator:
    """Skip where pvbatch is missing or hidden, saying what goes ``unchecked``."""
    why = f"{HIDE_PARAVIEW}=1" if HIDDEN else "apt-get install paraview"
    return pytest.mark.skipif(PVBATCH is None, reason=f"no ParaView pvbatch ({why}): {unchecked}")


needs_vtk = pytest.mark.skipif(importlib.util.find_spec("vtkmodules") is None,
                               reason="the vtk wheel is not installed (pip install vtk, or the test extra): "
                                      "the files are not opened with VTK's readers")

#: numpy dtype -> (NumberType, Precision) as XDMF writes them
XDMF_TYPES = {np.dtype("float64"): ("Float", "8"), np.dtype("float32"): ("Float", "4"),
              np.dtype("int32"): ("Int", "4"), np.dtype("int64"): ("Int", "8")}


def _config(sphere: str, kind: str) -> dict:
    return {"name": "pv", "mesh": {"sphere": sphere, "resolution": 1 if sphere == "S2" else 32},
            "scheme": {"kind": kind}, "time": {"t_final": 0.2, "outputs": 2}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """FV S^2, DG1 S^1, DG1 S^2 runs (serial, in this process)."""
    root = tmp_path_factory.mktemp("paraview")
    out = {}
    for sphere, kind in (("S2", "fv"), ("S1", "dg1"), ("S2", "dg1")):
        out[f"{kind}-{sphere}"] = root / f"{kind}-{sphere}"
        meanfield.run(_config(sphere, kind), out=out[f"{kind}-{sphere}"], quiet=True)
    return out


# -- the structure, without ParaView --------------------------------------------------------
def _numbers(text: str) -> list[int]:
    return [int(v) for v in text.split()]


def _selection(item: ET.Element, folder: Path) -> tuple[Path, str, tuple[slice, ...] | None]:
    """(file, dataset, index of the selected part or None) of an HDF DataItem."""
    text = (item.text or "").strip()
    where, _, selection = text.partition("|")
    file, _, dataset = where.partition(":")
    if not selection:
        return folder / file, dataset, None
    start, stride, count, _ = (_numbers(part) for part in selection.split(":"))
    return folder / file, dataset, tuple(slice(a, a + c * s, s) for a, s, c in zip(start, stride, count))


def item_problems(item: ET.Element, folder: Path) -> list[str]:
    """What in one DataItem Xdmf3 does not read, or reads other than meant."""
    where = (item.text or "").strip()
    if item.get("ItemType", "Uniform") != "Uniform":
        return [f"ItemType={item.get('ItemType')} (Xdmf3's VTK reader gives it no number type)"]
    keys = ("Dimensions", "NumberType", "Precision", "Format")
    problems = [f"{where}: no {key}" for key in keys if not item.get(key)]
    if problems:
        return problems
    if item.get("Format") != "HDF":
        return [f"{where}: Format={item.get('Format')}"]
    dims = tuple(_numbers(item.get("Dimensions", "")))
    file, dataset, index = _selection(item, folder)
    if not file.is_file():
        return [f"{where}: no file {file}"]
    text = (item.text or "").strip()
    with h5py.File(file, "r") as h5:
        if dataset not in h5:
            return [f"{where}: no dataset {dataset}"]
        data = h5[dataset]
        if XDMF_TYPES.get(data.dtype) != (item.get("NumberType"), item.get("Precision")):
            problems.append(f"{where}: {data.dtype} described as {item.get('NumberType')} {item.get('Precision')}")
        if index is None:
            if data.shape != dims:
                problems.append(f"{where}: Dimensions {dims}, dataset {data.shape}")
        else:
            space = tuple(_numbers(text.split("|")[1].split(":")[3]))
            selected = data[index].shape
            if space != data.shape or selected != dims:
                problems.append(f"{where}: dataspace {space} / selects {selected} / Dimensions {dims}, "
                                f"dataset {data.shape}")
    return problems


def xdmf_problems(path: Path) -> list[str]:
    """What in the XDMF file at ``path`` ParaView's Xdmf3 reader would not read, or read wrongly."""
    root = ET.parse(path).getroot()
    if root.tag != "Xdmf" or root.get("Version") != "3.0":
        return [f"root {root.tag} Version={root.get('Version')}"]
    series = root.findall("Domain/Grid")
    if len(series) != 1 or series[0].get("CollectionType") != "Temporal":
        return ["not one temporal collection"]
    problems, times = [], []
    for grid in series[0].findall("Grid"):
        time = grid.find("Time")
        times.append(float(time.get("Value", "nan")) if time is not None else float("nan"))
        topology, geometry = grid.find("Topology"), grid.find("Geometry")
        attributes = grid.findall("Attribute")
        if topology is None or geometry is None or not attributes:
            problems.append(f"grid {grid.get('Name')}: no topology, geometry or attribute")
            continue
        for element in (topology, geometry, *attributes):
            problems += [f"{element.tag}: {p}" for item in element.findall("DataItem")
                         for p in item_problems(item, path.parent)]
        cells, nodes = (_numbers(e.find("DataItem").get("Dimensions", ""))[0] for e in (topology, geometry))
        if topology.get("NumberOfElements") != str(cells):
            problems.append(f"grid {grid.get('Name')}: NumberOfElements {topology.get('NumberOfElements')}, "
                            f"{cells} rows")
        for attribute in attributes:
            size = int(np.prod(_numbers(attribute.find("DataItem").get("Dimensions", ""))))
            expected = cells if attribute.get("Center") == "Cell" else nodes
            if attribute.get("Center") not in ("Cell", "Node") or size != expected:
                problems.append(f"{attribute.get('Name')}: {size} values at {attribute.get('Center')}")
    if not times or not all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
        problems.append(f"times {times} not finite and increasing")
    return problems


def _attribute_rows(path: Path) -> list[tuple[float, np.ndarray]]:
    """(time, the values of the density attribute) of every grid, read with h5py."""
    rows = []
    for grid in ET.parse(path).getroot().iter("Grid"):
        if grid.get("GridType") != "Uniform":
            continue
        time, item = grid.find("Time"), grid.find("Attribute/DataItem")
        assert time is not None and item is not None
        file, dataset, index = _selection(item, path.parent)
        assert index is not None
        with h5py.File(file, "r") as h5:
            rows.append((float(time.get("Value", "nan")), h5[dataset][index].ravel()))
    return rows


@pytest.mark.parametrize("case", ["fv-S2", "dg1-S1", "dg1-S2"])
def test_xdmf_files_have_what_xdmf3_reads_and_select_each_output(runs, case):
    path = runs[case]
    files = [layout.PARAVIEW_CELLS] + ([layout.PARAVIEW_DG1] if case.startswith("dg1") else [])
    with xr.open_dataset(path / layout.RUN_FILE) as ds:
        for name, variable in zip(files, ("density", "vertex_density")):
            assert xdmf_problems(path / name) == [], name
            rows = _attribute_rows(path / name)
            assert [t for t, _ in rows] == ds.time.values.tolist()
            for k, (_, values) in enumerate(rows):
                assert np.array_equal(values, ds[variable].values[k].ravel())
    assert (path / layout.PARAVIEW_SCRIPT).is_file()


def test_structure_check_rejects_the_hyperslab_form_and_wrong_dimensions(runs, tmp_path):
    """The check above can fail: a HyperSlab attribute (what ParaView's Xdmf3 reader skipped)
    and an attribute whose Dimensions do not match its selection are reported."""
    path = runs["fv-S2"]
    tree = ET.parse(path / layout.PARAVIEW_CELLS)
    first, second = list(tree.getroot().iter("Attribute"))[:2]
    item = first.find("DataItem")
    assert item is not None
    cells = item.get("Dimensions", "").split()[1]
    first.remove(item)
    slab = ET.SubElement(first, "DataItem", ItemType="HyperSlab", Dimensions=f"1 {cells}", Type="HyperSlab")
    ET.SubElement(slab, "DataItem", Dimensions="3 2", Format="XML").text = f"0 0 1 1 1 {cells}"
    ET.SubElement(slab, "DataItem", Dimensions=f"3 {cells}", NumberType="Float", Precision="8",
                  Format="HDF").text = f"{layout.RUN_FILE}:/density"
    wrong = second.find("DataItem")
    assert wrong is not None
    wrong.set("Dimensions", f"1 {int(cells) - 1}")
    (tmp_path / layout.RUN_FILE).symlink_to(path / layout.RUN_FILE)
    tree.write(tmp_path / "broken.xdmf")
    problems = xdmf_problems(tmp_path / "broken.xdmf")
    assert len(problems) == 3, problems  # the hyperslab, and the wrong attribute twice (selection, count)
    assert problems[0].startswith("Attribute: ItemType=HyperSlab") and "Dimensions (1, 79)" in problems[1]
    assert problems[2] == "density: 79 values at Cell"


# -- ParaView's own reader ------------------------------------------------------------------
OPEN = '''
import json, sys
from paraview import servermanager
from paraview.simple import ForceTime, OpenDataFile
from vtkmodules.util.numpy_support import vtk_to_numpy

seen = []
for path in sys.argv[1:]:
    reader = OpenDataFile(path)
    out = {"reader": reader.GetXMLName(), "times": list(reader.TimestepValues), "steps": []}
    for t in out["times"]:
        data = servermanager.Fetch(ForceTime(Input=reader, ForcedTime=t, IgnorePipelineTime=1))
        step = {"points": data.GetNumberOfPoints(), "cells": data.GetNumberOfCells()}
        for where, arrays in (("cell", data.GetCellData()), ("point", data.GetPointData())):
            step[where] = {arrays.GetArrayName(i): vtk_to_numpy(arrays.GetArray(i)).tolist()
                           for i in range(arrays.GetNumberOfArrays())}
        out["steps"].append(step)
    seen.append(out)
print("RESULT " + json.dumps(seen))
'''


#: What pvbatch prints when its X display failed it (the display, not the files under test).
DISPLAY_FAILURES = ("bad X server connection", "Could not open display", "Signal: SIGABRT")


@pytest.fixture(scope="session")
def display(request, tmp_path_factory) -> Iterator[str]:
    """The ``DISPLAY`` of the test session's one Xvfb, shared by its xdist workers (through the
    session's temporary folder, the parent of the workers' own)."""
    if XVFB is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb): Debian's pvbatch draws through X only, "
                    "no picture drawn")
    session = tmp_path_factory.getbasetemp()
    with shared_display(XVFB, (session.parent if hasattr(request.config, "workerinput") else session) / "xvfb") as name:
        yield name


def _paraview(script: str, *args: str | Path, folder: Path, display: str | None = None) -> Any:
    """Run ``script`` in pvbatch (on X ``display`` if given) and return what it printed after RESULT.

    A run that the X display failed (pvbatch aborts in ``CreateAWindow``) is tried again, up to
    :data:`DISPLAY_TRIES` times in all."""
    (folder / "probe.py").write_text(script)
    command = [str(PVBATCH), str(folder / "probe.py"), *map(str, args)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DISPLAY")}  # pvbatch runs its own Python
    if display is not None:
        env["DISPLAY"] = display
    for _ in range(DISPLAY_TRIES if display else 1):
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=folder, env=env)
        if done.returncode == 0 or not any(text in done.stdout + done.stderr for text in DISPLAY_FAILURES):
            break
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    assert "Skipping unrecognized array type" not in done.stdout + done.stderr
    return json.loads(lines[-1][len("RESULT "):])


def _paraview_opens(*files: Path, folder: Path) -> list[dict]:
    """What pvbatch's default reader gives of each file (one pvbatch for all: its start-up is
    most of its time)."""
    return _paraview(OPEN, *files, folder=folder)


def _assert_paraview_reads(path: Path, name: str, seen: dict) -> None:
    """pvbatch's view ``seen`` of ``path/name`` is run.nc's: points, cells, ``density`` at every time."""
    with xr.open_dataset(path / layout.RUN_FILE) as ds:
        cells, corners = ds.sizes["cell"], ds.sizes["corner"]
        vertices = ds.sizes["node"]
        assert seen["reader"].startswith("Xdmf3Reader")
        assert seen["times"] == ds.time.values.tolist()
        for k, step in enumerate(seen["steps"]):
            assert step["cells"] == cells
            if name == layout.PARAVIEW_DG1:  # the broken mesh: every cell its own vertices
                assert step["points"] == cells * corners and step["cell"] == {} and list(step["point"]) == ["density"]
                assert np.array_equal(step["point"]["density"], ds.vertex_density.values[k].ravel())
            else:
                assert step["points"] == vertices and step["point"] == {} and list(step["cell"]) == ["density"]
                assert np.array_equal(step["cell"]["density"], ds.density.values[k])


FILES = [("fv-S2", layout.PARAVIEW_CELLS), ("dg1-S1", layout.PARAVIEW_CELLS), ("dg1-S1", layout.PARAVIEW_DG1),
         ("dg1-S2", layout.PARAVIEW_DG1)]


@pytest.fixture(scope="module")
def paraview_views(runs, tmp_path_factory) -> list[dict]:
    """pvbatch's view of each of :data:`FILES`."""
    return _paraview_opens(*(runs[case] / name for case, name in FILES), folder=tmp_path_factory.mktemp("pvbatch"))


@needs_pvbatch("the density values are not read with ParaView's Xdmf3 reader (VTK's XDMF2 reader "
               "checks the mesh and times)")
@pytest.mark.parametrize("case, name", FILES)
def test_paraview_default_reader_opens_the_density(runs, paraview_views, case, name):
    _assert_paraview_reads(runs[case], name, paraview_views[FILES.index((case, name))])


# -- VTK's own readers (the vtk wheel), where ParaView is missing too ------------------------
def _vtk_xdmf(path: Path) -> dict:
    """What VTK's XDMF2 reader gives back for the .xdmf at ``path``: the attributes it lists, the
    times, and at each time the cell types, the points and each cell's mean vertex.  (XDMF2
    does not read Xdmf3's row selections: the attributes are listed, not read.)"""
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonCore import vtkIdList
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline
    from vtkmodules.vtkIOXdmf2 import vtkXdmfReader

    reader = vtkXdmfReader()
    reader.SetFileName(str(path))
    reader.UpdateInformation()
    arrays = {}
    for where in ("Point", "Cell"):
        count = getattr(reader, f"GetNumberOf{where}Arrays")()
        names = [getattr(reader, f"Get{where}ArrayName")(i) for i in range(count)]
        for name in names:
            getattr(reader, f"Set{where}ArrayStatus")(name, 0)
        arrays[where.lower()] = names
    out: dict = {"arrays": arrays, "steps": [],
                 "times": list(reader.GetOutputInformation(0).Get(vtkStreamingDemandDrivenPipeline.TIME_STEPS()))}
    corners = vtkIdList()
    for t in out["times"]:
        reader.UpdateTimeStep(t)
        data = reader.GetOutputDataObject(0)
        points = vtk_to_numpy(data.GetPoints().GetData())
        means = []
        for cell in range(data.GetNumberOfCells()):
            data.GetCellPoints(cell, corners)
            means.append(points[[corners.GetId(k) for k in range(corners.GetNumberOfIds())]].mean(axis=0))
        out["steps"].append({"types": {data.GetCellType(i) for i in range(data.GetNumberOfCells())},
                             "points": points, "means": np.array(means)})
    return out


@needs_vtk
@pytest.mark.parametrize("case, name", FILES)
def test_vtk_xdmf2_reader_opens_the_mesh_at_every_time(runs, case, name):
    """VTK's XDMF2 reader: run.nc's times; at each, its cells in its order (each cell's mean vertex
    points to run.nc's cell centre), of the sphere's cell type, their points on the unit sphere."""
    from vtkmodules.vtkCommonDataModel import VTK_POLY_LINE, VTK_TRIANGLE

    seen = _vtk_xdmf(runs[case] / name)
    with xr.open_dataset(runs[case] / layout.RUN_FILE) as ds:
        centres = np.column_stack([ds[x].values for x in ("x", "y", "z") if x in ds])
        points = ds.sizes["cell"] * ds.sizes["corner"] if name == layout.PARAVIEW_DG1 else ds.sizes["node"]
        assert seen["times"] == ds.time.values.tolist()
    assert seen["arrays"] == ({"point": ["density"], "cell": []} if name == layout.PARAVIEW_DG1 else
                              {"point": [], "cell": ["density"]})
    for step in seen["steps"]:
        assert step["types"] == {VTK_TRIANGLE if case.endswith("S2") else VTK_POLY_LINE}
        assert len(step["points"]) == points
        np.testing.assert_allclose(np.linalg.norm(step["points"], axis=1), 1.0, atol=1e-12)
        means = step["means"][:, :centres.shape[1]]
        np.testing.assert_allclose(means / np.linalg.norm(means, axis=1, keepdims=True), centres, atol=1e-12)


@needs_vtk
def test_vtk_xml_reader_opens_the_atom_points(tmp_path):
    """atoms.pvd's files, each read with VTK's XML reader (ParaView's reader of .vtu files),
    hold the atoms written at its time: positions, masses and ids, the empty cloud too."""
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkIOXML import vtkXMLUnstructuredGridReader

    mesh = mesh_of("S2", 2)
    outputs = sphere_atoms(mesh)
    write_hybrid_run(tmp_path, mesh, outputs)
    entries = [(float(d.get("timestep", "nan")), d.get("file", "")) for d in
               ET.parse(tmp_path / layout.PARAVIEW_ATOMS).getroot().iter("DataSet")]
    assert [t for t, _ in entries] == [t for t, _, _ in outputs]
    for (_, name), (_, _, atoms) in zip(entries, outputs):
        assert atoms is not None
        reader = vtkXMLUnstructuredGridReader()
        reader.SetFileName(str(tmp_path / name))
        reader.Update()
        data = reader.GetOutput()
        assert data.GetNumberOfPoints() == data.GetNumberOfCells() == atoms.count
        if atoms.count:
            assert np.array_equal(vtk_to_numpy(data.GetPoints().GetData()), atoms.positions)
            for array, values in (("mass", atoms.masses), ("id", atoms.ids)):
                assert np.array_equal(vtk_to_numpy(data.GetPointData().GetArray(array)), values), array


def test_causal_run_has_one_array_per_position_slice(tmp_path):
    """A causal run (DG1 S^1, 3 position slices): each file's grids have one array per slice,
    ``density_s0.1667`` ..., selecting ``density[time, slice]`` (``vertex_density``) of run.nc;
    and pvbatch, where installed, reads each of density-dg1.xdmf's as run.nc holds it."""
    config = {**_config("S1", "dg1"), "model": {"mask": "causal"}, "positions": {"slices": 3},
              "initial": {"kind": "expression", "expression": "exp(2*(1 - s)*x + 2*s*y)"}}
    run = meanfield.run(config, out=tmp_path / "run", quiet=True)
    names = [f"density_s{s:.4f}" for s in run.positions]
    with xr.open_dataset(tmp_path / "run" / layout.RUN_FILE) as ds:
        for name, variable in ((layout.PARAVIEW_CELLS, "density"), (layout.PARAVIEW_DG1, "vertex_density")):
            path = tmp_path / "run" / name
            assert xdmf_problems(path) == [], name
            grids = [g for g in ET.parse(path).getroot().iter("Grid") if g.get("GridType") == "Uniform"]
            for k, grid in enumerate(grids):
                attributes = grid.findall("Attribute")
                assert [a.get("Name") for a in attributes] == names
                for j, attribute in enumerate(attributes):
                    file, dataset, index = _selection(attribute.find("DataItem"), path.parent)
                    with h5py.File(file, "r") as h5:
                        assert np.array_equal(h5[dataset][index].ravel(), ds[variable].values[k, j].ravel())
            if PVBATCH is not None and variable == "vertex_density":  # the 4-d dataset: (time, slice, cell, corner)
                (seen,) = _paraview_opens(path, folder=tmp_path)
                for k, step in enumerate(seen["steps"]):
                    assert sorted(step["point"]) == sorted(names)
                    for j, array in enumerate(names):
                        assert np.array_equal(step["point"][array], ds[variable].values[k, j].ravel())


@needs_pvbatch("the files of a run of 2 ranks are not opened with ParaView")
def test_paraview_opens_what_two_ranks_wrote(tmp_path):
    launcher = mpirun()
    (tmp_path / "case.toml").write_text('name = "pv"\n[mesh]\nsphere = "S2"\nresolution = 2\n[scheme]\n'
                                        'kind = "dg1"\n[time]\nt_final = 0.2\noutputs = 4\n')
    done = subprocess.run([str(launcher), "-n", "2", sys.executable, "-m", "meanfield.cli", "run",
                           str(tmp_path / "case.toml"), "--out", str(tmp_path / "r"), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r" / layout.METADATA).read_text())["ranks"] == 2
    names = (layout.PARAVIEW_CELLS, layout.PARAVIEW_DG1)
    for name, seen in zip(names, _paraview_opens(*(tmp_path / "r" / name for name in names), folder=tmp_path),
                          strict=True):
        assert xdmf_problems(tmp_path / "r" / name) == []
        _assert_paraview_reads(tmp_path / "r", name, seen)
        assert len(seen["times"]) == 5


GLYPHS = '''
import json, runpy, sys
from paraview.simple import FindSource, GetColorTransferFunction

script, picture = sys.argv[1], sys.argv[2]
sys.argv = [script, picture]
runpy.run_path(script, run_name="__main__")
atoms, glyphs = FindSource("atoms.pvd"), FindSource("atoms")
colours = GetColorTransferFunction("density").RGBPoints
out = {"mode": glyphs.GlyphMode.GetData(), "scale": [str(v) for v in glyphs.ScaleArray], "steps": [],
       "range": [colours[0], colours[-4]]}
for t in atoms.TimestepValues:
    atoms.UpdatePipeline(t)
    glyphs.UpdatePipeline(t)
    out["steps"].append([t, atoms.GetDataInformation().GetNumberOfPoints(),
                         glyphs.GetDataInformation().GetNumberOfPoints()])
print("RESULT " + json.dumps(out))
'''

HYBRID = hybrid_case(128, 2.0, 4)


@needs_pvbatch("view-in-paraview.py (ParaView's Python) is not run: no picture drawn")
@pytest.mark.parametrize("sphere", ["S1", "S2"])
def test_view_script_draws_every_atom_as_a_glyph(tmp_path, sphere, display, cli_in_process):
    """S^1: a real hybrid run (CLI, in this process); S^2: hand-made outputs through the run's writers, the first
    without atoms (an empty point cloud)."""
    path = tmp_path / "run"
    if sphere == "S1":
        (tmp_path / "case.toml").write_text(HYBRID)
        done = cli_in_process(["run", "case.toml", "--out", str(path), "--quiet"], tmp_path)
        assert done.returncode == 0, done.stderr
    else:
        mesh = mesh_of("S2", 2)
        write_hybrid_run(path, mesh, sphere_atoms(mesh))
    run = load_run(path)
    assert run.atoms is not None
    picture = tmp_path / "picture.png"
    seen = _paraview(GLYPHS, path / layout.PARAVIEW_SCRIPT, picture, folder=tmp_path, display=display)
    assert seen["mode"] == "All Points" and seen["scale"] == ["POINTS", "size"]
    assert [t for t, _, _ in seen["steps"]] == list(run.times)
    assert [n for _, n, _ in seen["steps"]] == [a.count for a in run.atoms]
    per_glyph = {g / n for _, n, g in seen["steps"] if n}
    assert len(per_glyph) == 1 and per_glyph.pop() > 1  # every atom has its sphere
    assert all(g == 0 for _, n, g in seen["steps"] if not n)
    assert picture.stat().st_size > 10_000
    # one colour scale: the density's range over every output (not the last output's residual)
    values = run.vertex_densities if run.vertex_densities is not None else run.densities
    assert seen["range"] == pytest.approx([max(float(values.min()), 0.0), float(values.max())], rel=1e-12, abs=1e-300)


COLOURS = '''
import json, runpy, sys
from paraview.simple import GetColorTransferFunction

script, picture, name = sys.argv[1], sys.argv[2], sys.argv[3]
sys.argv = [script, picture]
runpy.run_path(script, run_name="__main__")
colours = GetColorTransferFunction(name).RGBPoints
print("RESULT " + json.dumps({"range": [colours[0], colours[-4]]}))
'''


@needs_pvbatch("the view's colour scale is not checked with ParaView")
def test_view_script_colour_scale_starts_at_zero_on_dg1_vertex_values(runs, tmp_path, display):
    """DG1 vertex values may dip below 0 (the limiter acts at the edge Gauss points): the view's
    colour scale is [0, the largest value over the outputs], not down to the dip."""
    path = tmp_path / "run"
    shutil.copytree(runs["dg1-S2"], path)
    with h5py.File(path / layout.RUN_FILE, "r+") as f:
        f["vertex_density"][-1, 0, 0] = -0.28  # a dip as a steep front gives one
        top = float(np.max(f["vertex_density"][()]))
    seen = _paraview(COLOURS, path / layout.PARAVIEW_SCRIPT, tmp_path / "picture.png", "density", folder=tmp_path,
                     display=display)
    assert seen["range"] == pytest.approx([0.0, top], rel=1e-12)


@needs_pvbatch("the view of a causal run is not checked with ParaView")
def test_view_script_of_a_causal_run_colours_the_last_position(tmp_path, display):
    """A causal run has one array per position (no ``density``): the view colours the last
    position's, on its range over the outputs."""
    config = {**_config("S1", "fv"), "model": {"mask": "causal"}, "positions": {"slices": 3},
              "initial": {"kind": "expression", "expression": "exp(2*(1 - s)*x + 2*s*y)"}}
    run = meanfield.run(config, out=tmp_path / "run", quiet=True)
    last = run.densities[:, -1]
    seen = _paraview(COLOURS, tmp_path / "run" / layout.PARAVIEW_SCRIPT, tmp_path / "picture.png",
                     f"density_s{run.positions[-1]:.4f}", folder=tmp_path, display=display)
    assert seen["range"] == pytest.approx([float(last.min()), float(last.max())], rel=1e-12)


@pytest.mark.slow
@pytest.mark.skipif(HIDDEN, reason=f"the test of {HIDE_PARAVIEW}=1 (it is set already)")
def test_as_without_paraview_the_wheel_checks_and_the_rest_skips_saying_why(tmp_path):
    """This module as on a machine without ParaView (``MEANFIELD_TEST_NO_PARAVIEW=1``): VTK's
    readers check the files, and each pvbatch check skips, on one line saying what goes unchecked.
    (VTK's readers: the atoms' .vtu, whose test is marked as the XDMF2 reader's, ``needs_vtk``, and
    needs no PDE run; the XDMF2 reader's tests read neither pvbatch nor the variable.)"""
    done = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-rs", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "--basetemp", str(tmp_path / "t"), "-k",
                           "vtk_xml or default_reader or two_ranks or glyph"], capture_output=True, text=True,
                          timeout=280, env={**os.environ, HIDE_PARAVIEW: "1"})
    assert done.returncode == 0 and "1 passed, 7 skipped" in done.stdout, done.stdout + done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert sum(int(line.split("[")[1].split("]")[0]) for line in skipped) == 7, skipped
    assert all(f"no ParaView pvbatch ({HIDE_PARAVIEW}=1): " in line for line in skipped), skipped
