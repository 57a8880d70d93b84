"""Pictures of hybrid runs: the view on the heaviest cluster, the colour floor, the atom panels."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from meanfield.drivers.pde import run
from meanfield.initial import vmf_density
from meanfield.mesh import icosphere
from meanfield.plotting.data import run_data
from meanfield.plotting.focus import RESIDUAL_FLOOR, colour_limits, heaviest_direction
from meanfield.plotting.run_plots import density_movie_maps
from meanfield.plotting.series import time_series
from meanfield.plotting.style import color_norm
from meanfield.rundir.results import load_run
from meanfield.sphere import normalize

UNIFORM = 1.0 / (4.0 * np.pi)
# three bumps at beta = 9 on the level-2 icosphere: by t = 6 all three are atoms beside a residual density
HYBRID = {"mesh": {"sphere": "S2", "resolution": 2}, "model": {"beta": 9.0}, "nonlocal": {"method": "direct"},
          "initial": {"kappas": [20.0, 20.0, 20.0]}, "time": {"t_final": 6.0, "outputs": 2},
          "atoms": {"capture": True, "core_cells": 7}, "output": {"xdmf": False}}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    path = tmp_path_factory.mktemp("hybrid") / "run"
    run(HYBRID, out=path, comm=MPI.COMM_SELF, quiet=True)
    return load_run(path)


def test_colour_limits_ignore_the_residual():
    residual = np.array([0.0, 1e-9, 3e-4])
    limits = colour_limits()
    assert limits == {"floor": pytest.approx(RESIDUAL_FLOOR * UNIFORM), "least_top": pytest.approx(UNIFORM)}
    linear, log = color_norm(residual, **limits), color_norm(residual, log=True, **limits)
    assert (linear.vmin, linear.vmax) == (0.0, pytest.approx(UNIFORM))
    assert log.vmin == pytest.approx(RESIDUAL_FLOOR * UNIFORM) and log.vmax == pytest.approx(UNIFORM)
    assert color_norm(residual, log=True).vmin == pytest.approx(3e-4 * 1e-4)  # without: down to the residual
    peaked = color_norm(np.array([1e-9, 0.5, 4.0]), log=True, **limits)
    assert (peaked.vmin, peaked.vmax) == (0.5, 4.0)  # the residual 1e-9 does not stretch the scale


def test_heaviest_direction_weighs_density_clusters_against_atoms():
    mesh = icosphere(3)
    centroids = normalize(mesh.points[mesh.cells].mean(axis=1))
    north, east = np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])
    # a broad bump of mass 0.6 (peak 6x uniform) in the north, a narrow one of 0.4 in the east
    rho = 0.6 * vmf_density(centroids, north, 8.0) + 0.4 * vmf_density(centroids, east, 40.0)
    assert heaviest_direction(mesh.points, mesh.cells, rho) @ north > 0.99  # the heavier, not the taller
    atom = normalize(np.array([[0.0, -1.0, 0.2]]))
    assert heaviest_direction(mesh.points, mesh.cells, 0.5 * rho, atom, np.array([0.5])) == pytest.approx(atom[0])
    assert heaviest_direction(mesh.points, mesh.cells, rho, atom, np.array([0.1])) @ north > 0.99
    residual = np.full(len(mesh.cells), 1e-9)
    residual[7] = 1e-6  # the residual's maximum is not where the view goes
    assert heaviest_direction(mesh.points, mesh.cells, residual, atom, np.array([0.3])) == pytest.approx(atom[0])


def test_hybrid_run_maps_look_at_the_heaviest_atom(hybrid):
    atoms = hybrid.atoms[-1]
    assert atoms.count == 3 and 0 < hybrid.densities[-1].max() < UNIFORM  # atoms beside a residual
    data = run_data(hybrid)
    for log in (False, True):
        maps = density_movie_maps(data, hybrid.vertices, hybrid.cells, log=log, views=["mollweide", "orthographic"])
        centre = maps.panels[1].projection.center
        assert centre == pytest.approx(atoms.positions[int(np.argmax(atoms.masses))], abs=1e-12)
        assert maps.norm.vmax == pytest.approx(float(np.max(data.frames())))  # the initial bumps are taller
    frames = np.asarray(data.frames())
    floor = RESIDUAL_FLOOR * UNIFORM
    assert frames.min() < 1e-3 * floor  # the residual lies far below the floor ...
    log_maps = density_movie_maps(data, hybrid.vertices, hybrid.cells, log=True, views=["orthographic"])
    assert log_maps.norm.vmin == frames[frames >= floor].min() >= floor  # ... and does not set the scale


def test_observables_figure_shows_atom_count_and_mass(hybrid):
    figure = time_series(run_data(hybrid).observables)
    axes = {ax.get_ylabel(): ax for ax in figure.axes}
    count, mass = axes["atom count"], axes["atom mass"]
    assert count.get_title() == "atoms" and mass.get_title() == "mass held by atoms"
    assert len({ax.get_xscale() for ax in figure.axes}) == 1  # one time axis for every panel
    assert mass.get_ylim() == pytest.approx((0.0, 1.02), abs=1e-9)
    drawn = mass.get_lines()[0].get_ydata()
    assert drawn[-1] == pytest.approx(hybrid.atoms[-1].mass)  # the observables' atom mass, at the last output
    assert count.get_lines()[0].get_ydata()[-1] == 3
