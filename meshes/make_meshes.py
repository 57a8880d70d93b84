"""Regenerate the committed example meshes of this folder.

    python meshes/make_meshes.py            # icosphere and circle meshes (meanfield only)
    python meshes/make_meshes.py --gmsh     # also an unstructured gmsh sphere (needs `pip install gmsh`)

The gmsh sphere is meshed with OpenCASCADE (occ.addSphere), second-order nodes dropped,
and its vertices projected onto the unit sphere so meanfield accepts it (|x| = 1 to 1e-8).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from meanfield.mesh import RawMesh, circle, icosphere, write_mesh_file

HERE = Path(__file__).parent


def gmsh_sphere(size: float) -> RawMesh:
    import gmsh

    gmsh.initialize()
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.occ.addSphere(0, 0, 0, 1)
        gmsh.model.occ.synchronize()
        gmsh.option.setNumber("Mesh.MeshSizeMax", size)
        gmsh.model.mesh.generate(2)
        tags, coords, _ = gmsh.model.mesh.getNodes()
        _, _, nodes = gmsh.model.mesh.getElements(2)
        order = {int(t): i for i, t in enumerate(tags)}
        cells = np.array([order[int(t)] for t in nodes[0]], dtype=np.int64).reshape(-1, 3)
        pts = coords.reshape(-1, 3)
        pts /= np.linalg.norm(pts, axis=1)[:, None]
        return RawMesh(pts, cells)
    finally:
        gmsh.finalize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gmsh", action="store_true", help="also write gmsh-sphere.msh")
    args = p.parse_args()
    outputs = {
        "icosphere-L2.msh": icosphere(2),
        "icosphere-L3.vtu": icosphere(3),
        "circle-128.msh": circle(128),
    }
    if args.gmsh:
        outputs["gmsh-sphere.msh"] = gmsh_sphere(0.15)
    for name, mesh in outputs.items():
        write_mesh_file(HERE / name, mesh)
        print(f"wrote meshes/{name}: {len(mesh.cells)} cells")


if __name__ == "__main__":
    main()
