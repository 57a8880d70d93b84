"""ParaView files of a PDE run: XDMF descriptions of the datasets in ``run.nc``.

``run.nc`` (:mod:`meanfield.rundir.netcdf`) is an HDF5 file, so XDMF can point into it:

* ``density.xdmf`` shows ``/density`` (the cell averages) as cell data on the mesh
  (``/xdmf/vertices`` and ``/face_node_connectivity`` or ``/edge_node_connectivity``);
* for DG1, ``density-dg1.xdmf`` shows ``/vertex_density`` as point data on the broken mesh
  (each cell with its own vertices, ``/xdmf/corner_vertices`` and ``/xdmf/corner_cells``):
  the discontinuous linear density as the scheme has it.  Its vertex values can dip below
  zero where the cell averages are positive (see :mod:`meanfield.rundir.netcdf`).

Each time step is one row of those datasets, so the mesh is stored once, in global cell order.
A causal run (``model.mask = "causal"``) has a density per token position: each grid then has
one array per position slice, ``density_s0.0156`` (the slice's midpoint s to 4 decimals), each
the block ``density[time, slice]`` of run.nc.
The row is selected in the form of Xdmf3, ParaView's default XDMF reader (``Xdmf3ReaderS``/``T``),
after a ``|`` behind the dataset's path: ``run.nc:/density|start:stride:count:dataspace``
(:func:`hdf_row`).  The XDMF 2 form, a ``HyperSlab`` DataItem, is read by ParaView's legacy
"XDMF Reader" only: Xdmf3 gives a HyperSlab item no number type, and ParaView's Xdmf3 readers
drop the array ("Skipping unrecognized array type [None]").  The legacy reader in turn does
not know the ``|`` form: it reads the mesh but not the density.  The ``xdmf`` group of run.nc
holds what only these files need (vertices padded to 3D, the broken mesh); ``xarray.open_dataset``
does not show it.  The XML is rewritten atomically after every output; rank 0 writes it (and
everything here) from the gathered arrays, whatever the rank count.

Hybrid runs (density + atoms) also get the atoms as a point cloud beside the
density: ``atoms/NNNN.vtu`` holds the atoms of output NNNN (VTK XML unstructured grid, one
vertex cell per atom, point data ``mass`` and ``id``; S^1 atoms at z = 0), and ``atoms.pvd``
lists them with their times, so ParaView shows them in step with density.xdmf.  Their number changes between outputs,
which a temporal XDMF collection over run.nc's ragged atom arrays describes poorly (ParaView
mishandles empty grids), hence one small file per output.  meshio reads them
(``meshio.read("atoms/0003.vtu")``), except those of outputs without atoms (meshio 5 reads
no empty grid; ParaView does).

``view-in-paraview.py`` (:mod:`.paraview_view`) opens the density and the atoms, drawn as
spheres on every atom (``paraview --script=RUN/view-in-paraview.py``).

meshio reads the mesh of the XDMF files (``meshio.xdmf.TimeSeriesReader(path).read_points_cells()``)
but neither their selected rows nor, with ``meshio.read``, a temporal collection at all: read
the densities with xarray from run.nc instead.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..masks import NO_MASK, Mask
from ..point_masses import ATOM_KEYS
from . import layout
from .files import write_text
from .paraview_view import view_script

GROUP = "xdmf"


def _padded(points: np.ndarray) -> np.ndarray:
    """Points as (n, 3) (S^1 gets z = 0)."""
    return points if points.shape[1] == 3 else np.column_stack([points, np.zeros(len(points))])


class XdmfFiles:
    """Writes density.xdmf (and density-dg1.xdmf) over run.nc (rank 0 only).

    Parameters
    ----------
    run_dir
        The run directory.
    vertices, cells
        The mesh (global order).
    dg1
        Also write density-dg1.xdmf (the run has ``vertex_density``).
    mask
        The run's mask (:mod:`meanfield.masks`): one array per density (a causal run's: one per
        position slice, :meth:`~meanfield.masks.Mask.slice_arrays`).
    """

    def __init__(self, run_dir: Path, vertices: np.ndarray, cells: np.ndarray, dg1: bool,
                 mask: Mask = NO_MASK) -> None:
        self.run_dir = Path(run_dir)
        self.vertices = _padded(np.asarray(vertices, float))
        self.cells = np.asarray(cells, np.int64)
        self.dg1 = dg1
        self.mask = mask
        self.data = self.run_dir / layout.RUN_FILE
        self.script_written = False

    def update(self, times: list[float]) -> None:
        """Describe the outputs at ``times`` (run.nc holds them); adds run.nc's xdmf group if missing."""
        if times:
            self._add_group()
        c, nv = self.cells.shape
        connectivity = f"{'face' if nv == 3 else 'edge'}_node_connectivity"
        write_text(self.run_dir / layout.PARAVIEW_CELLS,
                   self._xml(times, f"{GROUP}/vertices", connectivity, len(self.vertices), "density", "Cell", (c,)))
        if self.dg1:
            write_text(self.run_dir / layout.PARAVIEW_DG1,
                       self._xml(times, f"{GROUP}/corner_vertices", f"{GROUP}/corner_cells", c * nv,
                                 "vertex_density", "Node", (c, nv)))
        if not self.script_written:
            write_text(self.run_dir / layout.PARAVIEW_SCRIPT,
                       view_script(self.run_dir, layout.PARAVIEW_DG1, "POINTS") if self.dg1
                       else view_script(self.run_dir, layout.PARAVIEW_CELLS, "CELLS"))
            self.script_written = True

    def _add_group(self) -> None:
        import h5netcdf

        c, nv = self.cells.shape
        with h5netcdf.File(self.data, "a", locking=False) as f:
            if GROUP in f.groups:
                return
            group = f.create_group(GROUP)
            group.dimensions = {"vertex": len(self.vertices), "xyz": 3}
            group.create_variable("vertices", ("vertex", "xyz"), data=self.vertices)
            if self.dg1:
                group.dimensions.update({"corner_vertex": c * nv, "cell": c, "corner": nv})
                group.create_variable("corner_vertices", ("corner_vertex", "xyz"),
                                      data=self.vertices[self.cells].reshape(-1, 3))
                group.create_variable("corner_cells", ("cell", "corner"),
                                      data=np.arange(c * nv, dtype=np.int32).reshape(c, nv))

    def _xml(self, times: list[float], vertices: str, cells: str, num_vertices: int, field: str, center: str,
             row: tuple[int, ...]) -> str:
        c, nv = self.cells.shape
        name = self.data.name
        root = ET.Element("Xdmf", Version="3.0")
        domain = ET.SubElement(root, "Domain")
        series = ET.SubElement(domain, "Grid", Name="density", GridType="Collection", CollectionType="Temporal")
        shape = " ".join(map(str, row))
        arrays, blocks = self.mask.slice_arrays("density"), self.mask.slice_shape
        for k, t in enumerate(times):
            frame = ET.SubElement(series, "Grid", Name=f"t{k}", GridType="Uniform")
            ET.SubElement(frame, "Time", Value=repr(t))
            topology = ET.SubElement(frame, "Topology", TopologyType="Triangle" if nv == 3 else "Polyline",
                                     NumberOfElements=str(c), NodesPerElement=str(nv))
            ET.SubElement(topology, "DataItem", Dimensions=f"{c} {nv}", NumberType="Int", Precision="4",
                          Format="HDF").text = f"{name}:/{cells}"
            geometry = ET.SubElement(frame, "Geometry", GeometryType="XYZ")
            ET.SubElement(geometry, "DataItem", Dimensions=f"{num_vertices} 3", NumberType="Float", Precision="8",
                          Format="HDF").text = f"{name}:/{vertices}"
            for array, block in arrays:
                attribute = ET.SubElement(frame, "Attribute", Name=array, AttributeType="Scalar", Center=center)
                ET.SubElement(attribute, "DataItem", Dimensions=" ".join(["1"] * (1 + len(block))) + f" {shape}",
                              NumberType="Float", Precision="8", Format="HDF").text = \
                    f"{name}:/{field}|{hdf_row((k, *block), (len(times), *blocks), row)}"
        return _xml_text(root)


def hdf_row(index: tuple[int, ...], leading: tuple[int, ...], row: tuple[int, ...]) -> str:
    """Xdmf3's selection of the row at ``index`` (time, and for a causal run the slice) of an
    HDF5 dataset of shape ``(*leading, *row)``: ``start:stride:count:dataspace``, each a list of
    numbers (one per axis), written after a ``|`` behind the dataset's path
    (``run.nc:/density|2 0:1 1:1 80:3 80``)."""
    def numbers(values: list[int]) -> str:
        return " ".join(map(str, values))

    return ":".join([numbers([*index] + [0] * len(row)), numbers([1] * (len(index) + len(row))),
                     numbers([1] * len(index) + [*row]), numbers([*leading, *row])])


def _xml_text(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" ?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _numbers(values: np.ndarray) -> str:
    """Numbers as exact text (``repr`` of floats, 17 digits)."""
    return " ".join(repr(v) for v in np.asarray(values).ravel().tolist())


def atom_points_vtu(masses: np.ndarray, positions: np.ndarray, ids: np.ndarray) -> str:
    """A VTK XML unstructured grid (.vtu) of point masses: one vertex cell per atom, point data
    ``mass`` and ``id``; positions padded to 3D."""
    k = len(masses)
    root = ET.Element("VTKFile", type="UnstructuredGrid", version="1.0", byte_order="LittleEndian",
                      header_type="UInt64")
    piece = ET.SubElement(ET.SubElement(root, "UnstructuredGrid"), "Piece", NumberOfPoints=str(k),
                          NumberOfCells=str(k))
    data = ET.SubElement(piece, "PointData", Scalars="mass")
    ET.SubElement(data, "DataArray", type="Float64", Name="mass", format="ascii").text = _numbers(masses)
    ET.SubElement(data, "DataArray", type="Int64", Name="id", format="ascii").text = _numbers(ids)
    points = ET.SubElement(piece, "Points")
    ET.SubElement(points, "DataArray", type="Float64", NumberOfComponents="3", format="ascii").text = \
        _numbers(_padded(np.asarray(positions, float)))
    cells = ET.SubElement(piece, "Cells")
    for name, dtype, values in (("connectivity", "Int64", np.arange(k)), ("offsets", "Int64", np.arange(1, k + 1)),
                               ("types", "UInt8", np.ones(k, np.int64))):  # VTK_VERTEX = 1
        ET.SubElement(cells, "DataArray", type=dtype, Name=name, format="ascii").text = _numbers(values)
    return _xml_text(root)


class AtomPoints:
    """atoms.pvd and atoms/NNNN.vtu: the atoms of every output for ParaView (rank 0 only).

    Files are written only for outputs whose snapshot holds atoms, so a run without atoms
    has none.

    Parameters
    ----------
    run_dir
        The run directory.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)

    def start(self, keep: int, times: list[float]) -> None:
        """Remove the point files of outputs ``keep`` and later; describe the others (``times``)."""
        for index, path in layout.atom_point_files(self.run_dir):
            if index >= keep:
                path.unlink()
        if keep == 0:
            (self.run_dir / layout.PARAVIEW_ATOMS).unlink(missing_ok=True)
        elif layout.atom_point_files(self.run_dir):
            self.update(times)

    def write(self, index: int, snapshot: Mapping[str, np.ndarray]) -> bool:
        """Write output ``index``'s atoms, if its snapshot has any arrays of atoms (then True)."""
        if ATOM_KEYS[0] not in snapshot:
            return False
        layout.atom_point_path(self.run_dir, index).parent.mkdir(exist_ok=True)
        write_text(layout.atom_point_path(self.run_dir, index), atom_points_vtu(*(snapshot[k] for k in ATOM_KEYS)))
        return True

    def update(self, times: list[float]) -> None:
        """Rewrite atoms.pvd: the point file of each output at ``times`` that has one."""
        files = dict(layout.atom_point_files(self.run_dir))
        root = ET.Element("VTKFile", type="Collection", version="1.0", byte_order="LittleEndian")
        collection = ET.SubElement(root, "Collection")
        for index, t in enumerate(times):
            if index in files:
                ET.SubElement(collection, "DataSet", timestep=repr(float(t)), part="0",
                              file=files[index].relative_to(self.run_dir).as_posix())
        write_text(self.run_dir / layout.PARAVIEW_ATOMS, _xml_text(root))
