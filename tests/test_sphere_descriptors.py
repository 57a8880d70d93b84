"""The spheres' descriptors (meanfield.sphere) against the meshes their generators build."""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.mesh.raw import GENERATORS
from meanfield.spheres import SPHERES, sphere_area, sphere_named, sphere_of_dimension


@pytest.mark.parametrize("name", sorted(SPHERES))
def test_counts_and_ladder_match_the_generated_meshes(name):
    sphere = sphere_named(name)
    assert sphere_of_dimension(sphere.d) is sphere
    for level in range(3):
        resolution = sphere.ladder_resolution(level + (sphere.smallest_size > 0) * 2)
        mesh = GENERATORS[sphere.mesh_generator](resolution)
        cells = len(mesh.cells)
        assert mesh.points.shape[1] == sphere.d and mesh.cells.shape[1] == sphere.d  # segments, triangles
        assert mesh.sphere == name
        assert sphere.cells(resolution) == cells and sphere.vertices(cells) == len(mesh.points)
        assert sphere.ladder_level(cells) == level + (sphere.smallest_size > 0) * 2
        assert sphere.ladder_level(cells + 1) is None
        assert np.isclose(sphere.mesh_width(cells) ** (sphere.d - 1) * cells, sphere_area(sphere.d))


@pytest.mark.parametrize("name", sorted(SPHERES))
def test_parents_are_the_coarser_ladder_level(name):
    """One level down the nested ladder the parents' masses and measures are their children's sums,
    in the coarser mesh's cell order."""
    from meanfield.sphere import cell_measure

    sphere = sphere_named(name)
    level = 5
    fine = GENERATORS[sphere.mesh_generator](sphere.ladder_resolution(level))
    coarse = GENERATORS[sphere.mesh_generator](sphere.ladder_resolution(level - 1))
    fine_areas = cell_measure(fine.points[fine.cells])
    coarse_areas = cell_measure(coarse.points[coarse.cells])
    mass, areas = sphere.parents(np.stack([fine_areas, 2 * fine_areas]), fine_areas)
    assert areas.shape == coarse_areas.shape and np.allclose(mass, [areas, 2 * areas])
    # parent i is coarse cell i: the children's flat measures (their vertices pushed out onto the
    # sphere) exceed it by a little
    assert np.all(areas >= coarse_areas) and np.allclose(areas, coarse_areas, rtol=0.05)


@pytest.mark.parametrize("name", sorted(SPHERES))
def test_coarsened_mesh_is_wider_by_its_coarsening(name):
    """The pilot's coarser mesh: its cells about ``factor`` times wider (exactly 8 here), measured
    as the mean cell width of the two generated meshes; the dimension is the cells' own."""
    from meanfield.sphere import cell_measure

    sphere = sphere_named(name)
    fine = sphere.ladder_resolution(8 if sphere.children == 2 else 5)  # 256 segments, 20480 triangles
    coarse = sphere.coarsened(fine, 8)
    meshes = [GENERATORS[sphere.mesh_generator](r) for r in (fine, coarse)]
    assert all(m.cells.shape[1] - 1 == sphere.dimension for m in meshes)  # vertices of a cell: d
    widths = [cell_measure(m.points[m.cells]).mean() ** (1 / sphere.dimension) for m in meshes]
    assert sphere.coarsening(fine, coarse) == 8.0
    assert widths[1] / widths[0] == pytest.approx(8.0, rel=0.015)  # flat cells: 7.99 (S^1), 7.93 (S^2)
