"""ParaView files of a PDE run: XDMF descriptions over one HDF5 file, in global cell order.

``density.h5`` (h5py, rank 0) holds the mesh once and one row per output::

    /mesh/vertices (V, 3)   /mesh/cells (C, nv)      the mesh (S^1: z = 0, segments)
    /time (T,)              /density (T, C)          cell averages at the output times
    /dg1/vertices (C*nv, 3) /dg1/cells (C, nv)       DG1 only: each cell with its own vertices
    /vertex_density (T, C, nv)                       DG1 only: the density at those vertices

``density.xdmf`` shows ``/density`` as cell data on the mesh (any ParaView, "Xdmf Reader"),
and for DG1 ``density-dg1.xdmf`` shows the discontinuous linear density as point data on the
broken mesh.  Each time step is a hyperslab (one row) of the datasets above, so the mesh is
stored once.  The HDF5 file is opened for each output and closed again, and the XML is
rewritten atomically, so an interrupted run leaves readable files; on resume the datasets
are cut back to the outputs kept (or rebuilt from the snapshots if the file was damaged).

The files are written by rank 0 from gathered arrays rather than by dolfinx's collective
writers: a run can then be resumed on another rank count and append to the same files, and
a write error on rank 0 cannot leave other ranks waiting inside a collective close.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from . import layout
from .files import load_npz, write_text


def _padded(points: np.ndarray) -> np.ndarray:
    """Points as (n, 3) (S^1 gets z = 0)."""
    return points if points.shape[1] == 3 else np.column_stack([points, np.zeros(len(points))])


class ParaViewWriter:
    """Appends each output to density.h5 and rewrites the XDMF files (rank 0 only).

    Parameters
    ----------
    run
        The run directory.
    vertices, cells
        The mesh (global order).
    """

    def __init__(self, run: Path, vertices: np.ndarray, cells: np.ndarray) -> None:
        self.run = Path(run)
        self.vertices = _padded(np.asarray(vertices, float))
        self.cells = np.asarray(cells, np.int64)
        self.path = self.run / layout.PARAVIEW_DATA
        self.times: list[float] = []
        self.dg1 = False

    # -- creating, appending, cutting back ---------------------------------------------
    def _create(self, dg1: bool) -> None:
        import h5py

        c, nv = self.cells.shape
        with h5py.File(self.path, "w") as h5:
            h5["mesh/vertices"] = self.vertices
            h5["mesh/cells"] = self.cells
            h5.create_dataset("time", (0,), maxshape=(None,), dtype="f8", chunks=(1024,))
            h5.create_dataset("density", (0, c), maxshape=(None, c), dtype="f8", chunks=(1, c))
            if dg1:
                h5["dg1/vertices"] = self.vertices[self.cells].reshape(-1, 3)
                h5["dg1/cells"] = np.arange(c * nv, dtype=np.int64).reshape(c, nv)
                h5.create_dataset("vertex_density", (0, c, nv), maxshape=(None, c, nv), dtype="f8",
                                  chunks=(1, c, nv))
        self.dg1, self.times = dg1, []

    def _append(self, t: float, snapshot: dict[str, np.ndarray]) -> None:
        import h5py

        with h5py.File(self.path, "r+") as h5:
            k = h5["time"].shape[0]
            for name in ("time", "density", "vertex_density") if self.dg1 else ("time", "density"):
                h5[name].resize(k + 1, axis=0)
            h5["time"][k] = t
            h5["density"][k] = snapshot["density"]
            if self.dg1:
                h5["vertex_density"][k] = snapshot["vertex_density"]
        self.times.append(float(t))

    def start(self, keep: int = 0) -> None:
        """Begin a new file (``keep = 0``) or continue one keeping its first ``keep`` outputs.

        A file that cannot be read, or holds fewer outputs, is rebuilt from the snapshots.
        """
        if keep == 0:
            self.path.unlink(missing_ok=True)
            return
        import h5py

        try:
            with h5py.File(self.path, "r+") as h5:
                if h5["time"].shape[0] < keep:
                    raise ValueError("fewer outputs than the checkpoint")
                self.dg1 = "vertex_density" in h5
                for name in ("time", "density", "vertex_density") if self.dg1 else ("time", "density"):
                    h5[name].resize(keep, axis=0)
                self.times = [float(t) for t in h5["time"][:]]
        except (OSError, KeyError, ValueError):
            self._rebuild(keep)
        self._write_xml()

    def _rebuild(self, keep: int) -> None:
        snapshots = [load_npz(p) for i, p in layout.snapshot_files(self.run) if i < keep]
        self.path.unlink(missing_ok=True)
        if snapshots:
            self._create("vertex_density" in snapshots[0])
            for snap in snapshots:
                self._append(float(snap["t"]), snap)

    def write(self, t: float, snapshot: dict[str, np.ndarray]) -> None:
        """Append one output (``density``, and ``vertex_density`` for DG1) and rewrite the XML."""
        if not self.path.exists():
            self._create("vertex_density" in snapshot)
        self._append(t, snapshot)
        self._write_xml()

    # -- XDMF ------------------------------------------------------------------------------
    def _write_xml(self) -> None:
        c, nv = self.cells.shape
        write_text(self.run / layout.PARAVIEW_CELLS,
                   self._xml("mesh/vertices", "mesh/cells", len(self.vertices), "density", "Cell", (c,)))
        if self.dg1:
            write_text(self.run / layout.PARAVIEW_DG1,
                       self._xml("dg1/vertices", "dg1/cells", c * nv, "vertex_density", "Node", (c, nv)))

    def _xml(self, vertices: str, cells: str, num_vertices: int, field: str, center: str,
             row: tuple[int, ...]) -> str:
        c, nv = self.cells.shape
        name = self.path.name
        root = ET.Element("Xdmf", Version="3.0")
        domain = ET.SubElement(root, "Domain")
        series = ET.SubElement(domain, "Grid", Name="density", GridType="Collection", CollectionType="Temporal")
        shape = " ".join(map(str, row))
        total = len(self.times)
        for k, t in enumerate(self.times):
            grid = ET.SubElement(series, "Grid", Name=f"t{k}", GridType="Uniform")
            ET.SubElement(grid, "Time", Value=repr(t))
            topology = ET.SubElement(grid, "Topology", TopologyType="Triangle" if nv == 3 else "Polyline",
                                     NumberOfElements=str(c), NodesPerElement=str(nv))
            ET.SubElement(topology, "DataItem", Dimensions=f"{c} {nv}", NumberType="Int", Precision="8",
                          Format="HDF").text = f"{name}:/{cells}"
            geometry = ET.SubElement(grid, "Geometry", GeometryType="XYZ")
            ET.SubElement(geometry, "DataItem", Dimensions=f"{num_vertices} 3", NumberType="Float", Precision="8",
                          Format="HDF").text = f"{name}:/{vertices}"
            attribute = ET.SubElement(grid, "Attribute", Name="density", AttributeType="Scalar", Center=center)
            slab = ET.SubElement(attribute, "DataItem", ItemType="HyperSlab", Dimensions=f"1 {shape}",
                                 Type="HyperSlab")
            zeros, ones = " ".join(["0"] * len(row)), " ".join(["1"] * len(row))
            ET.SubElement(slab, "DataItem", Dimensions=f"3 {len(row) + 1}", Format="XML").text = \
                f"{k} {zeros} 1 {ones} 1 {shape}"
            ET.SubElement(slab, "DataItem", Dimensions=f"{total} {shape}", NumberType="Float", Precision="8",
                          Format="HDF").text = f"{name}:/{field}"
        ET.indent(root)
        return '<?xml version="1.0" ?>\n' + ET.tostring(root, encoding="unicode") + "\n"
