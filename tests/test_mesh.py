"""Sphere meshes: generation, files, distribution and the facet geometry the schemes use."""

import numpy as np
import pytest

from meanfield.mesh import MeshError, RawMesh, circle, icosphere, read_mesh_file, write_mesh_file


@pytest.mark.parametrize("level", [0, 1, 3])
def test_icosphere_counts_and_vertices(level):
    m = icosphere(level)
    assert m.cells.shape == (20 * 4**level, 3)
    assert len(m.points) == 10 * 4**level + 2  # Euler: V - E + F = 2
    assert np.abs(np.linalg.norm(m.points, axis=1) - 1).max() < 1e-15
    assert len(np.unique(m.cells)) == len(m.points)


def test_icosphere_area_converges_at_second_order():
    def area_error(level):
        p = icosphere(level).points[icosphere(level).cells]
        return 4 * np.pi - 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1).sum()

    errors = [area_error(L) for L in (3, 4, 5)]
    orders = np.log2(np.array(errors[:-1]) / errors[1:])
    assert np.all(orders > 1.9)


def test_icosphere_children_follow_parent_order():
    """Cell c of level L splits into cells c, c+n, c+2n, c+3n of level L+1 (n = cells at L)."""
    coarse, fine = icosphere(2), icosphere(3)
    n = len(coarse.cells)
    cen = lambda m: m.points[m.cells].mean(axis=1)  # noqa: E731
    parent, child = cen(coarse), cen(fine)
    for k in range(4):
        nearest = np.argmax(child[k * n : (k + 1) * n] @ parent.T, axis=1)
        assert np.array_equal(nearest, np.arange(n))


def test_circle():
    m = circle(16)
    assert m.cells.shape == (16, 2) and m.sphere == "S1"
    with pytest.raises(MeshError, match="mesh.resolution"):
        circle(2)


@pytest.mark.parametrize("suffix", [".msh", ".vtu"])
@pytest.mark.parametrize("mesh", [icosphere(1), circle(12)], ids=["S2", "S1"])
def test_file_round_trip(tmp_path, suffix, mesh):
    path = tmp_path / f"m{suffix}"
    write_mesh_file(path, mesh)
    back = read_mesh_file(path, mesh.sphere)
    assert np.allclose(back.points, mesh.points) and np.array_equal(back.cells, mesh.cells)


def test_mesh_off_the_sphere_is_refused(tmp_path):
    m = icosphere(1)
    pts = m.points.copy()
    pts[5] *= 1.0 + 1e-6
    path = tmp_path / "bad.vtu"
    write_mesh_file(path, RawMesh(pts, m.cells))
    with pytest.raises(MeshError, match=r"mesh.file .*vertex 5 .*off the unit sphere"):
        read_mesh_file(path)


def test_missing_and_wrong_kind_of_file(tmp_path):
    with pytest.raises(MeshError, match="mesh.file: no such file"):
        read_mesh_file(tmp_path / "nope.msh")
    path = tmp_path / "c.vtu"
    write_mesh_file(path, circle(8))
    with pytest.raises(MeshError, match="S1 mesh but mesh.sphere = 'S2'"):
        read_mesh_file(path, "S2")


@pytest.mark.mpi
@pytest.mark.parametrize("sphere, resolution", [("S2", 2), ("S1", 40)])
def test_distributed_geometry(comm, sphere, resolution):
    """Owned cells partition the mesh; facet normals are unit, tangent and single-valued."""
    from meanfield.discretisation.geometry import mesh_geometry
    from meanfield.mesh import load_distributed

    msh = load_distributed(comm, sphere, resolution)
    g = mesh_geometry(msh)
    ncells = 20 * 4**resolution if sphere == "S2" else resolution
    owned = np.concatenate(comm.allgather(g.original_index))
    assert np.array_equal(np.sort(owned), np.arange(ncells))
    assert np.abs(np.linalg.norm(g.facet_normal, axis=1) - 1).max() < 1e-14
    assert np.abs(np.einsum("ij,ij->i", g.facet_normal, g.facet_midpoint)).max() < 1e-14
    # every facet of an owned cell is present: S2 cells have 3 facets, S1 cells 2
    per_cell = np.bincount(g.facet_cells.ravel(), minlength=g.num_local)[: g.num_owned]
    assert np.all(per_cell == (3 if sphere == "S2" else 2))
    # the normal points from the first cell towards the second
    c = g.centroid
    assert np.all(np.einsum("ij,ij->i", g.facet_normal, c[g.facet_cells[:, 1]] - c[g.facet_cells[:, 0]]) > 0)


MESHES = __import__("pathlib").Path(__file__).parents[1] / "meshes"


@pytest.mark.parametrize("name, sphere, cells", [("icosphere-L2.msh", "S2", 320), ("icosphere-L3.vtu", "S2", 1280),
                                                  ("circle-128.msh", "S1", 128), ("gmsh-sphere.msh", "S2", 1372)])
def test_committed_meshes_are_closed_sphere_meshes(name, sphere, cells):
    """Every committed mesh reads, lies on the sphere and is closed (each facet has two cells)."""
    from mpi4py import MPI

    from meanfield.discretisation.geometry import mesh_geometry
    from meanfield.mesh import distribute

    raw = read_mesh_file(MESHES / name, sphere)
    assert len(raw.cells) == cells
    g = mesh_geometry(distribute(MPI.COMM_SELF, raw))
    per_cell = np.bincount(g.facet_cells.ravel(), minlength=g.num_local)
    assert np.all(per_cell == (3 if sphere == "S2" else 2))
    area = 4 * np.pi if sphere == "S2" else 2 * np.pi
    assert 0 < area - g.measure.sum() < 0.02 * area  # flat cells inscribed in the sphere

