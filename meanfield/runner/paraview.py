"""ParaView files of a PDE run: XDMF descriptions of the datasets in ``run.nc``.

``run.nc`` (:mod:`meanfield.runner.netcdf`) is an HDF5 file, so XDMF can point into it:

* ``density.xdmf`` shows ``/density`` (the cell averages) as cell data on the mesh
  (``/xdmf/vertices`` and ``/face_node_connectivity`` or ``/edge_node_connectivity``);
* for DG1, ``density-dg1.xdmf`` shows ``/vertex_density`` as point data on the broken mesh
  (each cell with its own vertices, ``/xdmf/corner_vertices`` and ``/xdmf/corner_cells``):
  the discontinuous linear density as the scheme has it.  Its vertex values can dip below
  zero where the cell averages are positive (see :mod:`meanfield.runner.netcdf`).

Each time step is a hyperslab (one row) of those datasets, so the mesh is stored once, in
global cell order, and any ParaView opens the files with its XDMF readers.  The ``xdmf``
group of run.nc holds what only these files need (vertices padded to 3D, the broken mesh);
``xarray.open_dataset`` does not show it.  The XML is rewritten atomically after every
output.

meshio reads the mesh of these files (``meshio.xdmf.TimeSeriesReader(path).read_points_cells()``)
but neither their hyperslab data nor, with ``meshio.read``, a temporal collection at all: read
the densities with xarray from run.nc instead.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from . import layout
from .files import write_text

GROUP = "xdmf"


def _padded(points: np.ndarray) -> np.ndarray:
    """Points as (n, 3) (S^1 gets z = 0)."""
    return points if points.shape[1] == 3 else np.column_stack([points, np.zeros(len(points))])


class XdmfFiles:
    """Writes density.xdmf (and density-dg1.xdmf) over run.nc (rank 0 only).

    Parameters
    ----------
    run
        The run directory.
    vertices, cells
        The mesh (global order).
    dg1
        Also write density-dg1.xdmf (the run has ``vertex_density``).
    """

    def __init__(self, run: Path, vertices: np.ndarray, cells: np.ndarray, dg1: bool) -> None:
        self.run = Path(run)
        self.vertices = _padded(np.asarray(vertices, float))
        self.cells = np.asarray(cells, np.int64)
        self.dg1 = dg1
        self.data = self.run / layout.RUN_FILE

    def update(self, times: list[float]) -> None:
        """Describe the outputs at ``times`` (run.nc holds them); adds run.nc's xdmf group if missing."""
        if times:
            self._add_group()
        c, nv = self.cells.shape
        connectivity = f"{'face' if nv == 3 else 'edge'}_node_connectivity"
        write_text(self.run / layout.PARAVIEW_CELLS,
                   self._xml(times, f"{GROUP}/vertices", connectivity, len(self.vertices), "density", "Cell", (c,)))
        if self.dg1:
            write_text(self.run / layout.PARAVIEW_DG1,
                       self._xml(times, f"{GROUP}/corner_vertices", f"{GROUP}/corner_cells", c * nv,
                                 "vertex_density", "Node", (c, nv)))

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
        zeros, ones = " ".join(["0"] * len(row)), " ".join(["1"] * len(row))
        for k, t in enumerate(times):
            grid = ET.SubElement(series, "Grid", Name=f"t{k}", GridType="Uniform")
            ET.SubElement(grid, "Time", Value=repr(t))
            topology = ET.SubElement(grid, "Topology", TopologyType="Triangle" if nv == 3 else "Polyline",
                                     NumberOfElements=str(c), NodesPerElement=str(nv))
            ET.SubElement(topology, "DataItem", Dimensions=f"{c} {nv}", NumberType="Int", Precision="4",
                          Format="HDF").text = f"{name}:/{cells}"
            geometry = ET.SubElement(grid, "Geometry", GeometryType="XYZ")
            ET.SubElement(geometry, "DataItem", Dimensions=f"{num_vertices} 3", NumberType="Float", Precision="8",
                          Format="HDF").text = f"{name}:/{vertices}"
            attribute = ET.SubElement(grid, "Attribute", Name="density", AttributeType="Scalar", Center=center)
            slab = ET.SubElement(attribute, "DataItem", ItemType="HyperSlab", Dimensions=f"1 {shape}",
                                 Type="HyperSlab")
            ET.SubElement(slab, "DataItem", Dimensions=f"3 {len(row) + 1}", Format="XML").text = \
                f"{k} {zeros} 1 {ones} 1 {shape}"
            ET.SubElement(slab, "DataItem", Dimensions=f"{len(times)} {shape}", NumberType="Float", Precision="8",
                          Format="HDF").text = f"{name}:/{field}"
        ET.indent(root)
        return '<?xml version="1.0" ?>\n' + ET.tostring(root, encoding="unicode") + "\n"
