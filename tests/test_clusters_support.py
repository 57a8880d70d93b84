"""Run data for the cluster tests, built in-process (no test here).

Until run directories keep the DG1 state (``load_run`` exposing ``vertex_densities``), this
is the one place that builds PDE results with it: the solver is stepped in-process and the
DG1 state is read off the scheme.  Switch :func:`pde_result` to ``meanfield.run`` +
``load_run`` when that lands.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


def pde_result(config, times) -> SimpleNamespace:
    """A PDE run result at the given output times, with the DG1 vertex densities for DG1 runs (serial).

    Attributes as :func:`meanfield.load_run` returns them (``sphere, vertices, cells,
    centroids, areas, times, densities, vertex_densities, config, metadata``).
    """
    from mpi4py import MPI

    from meanfield.config import Config, load_config
    from meanfield.mesh import raw_mesh
    from meanfield.solver import build_simulation

    config = config if isinstance(config, Config) else load_config(config)
    sim = build_simulation(config, MPI.COMM_SELF)
    mesh = config.section("mesh")
    raw = raw_mesh(mesh["sphere"], mesh["resolution"], mesh["file"])
    g = sim.scheme.geometry
    order = np.argsort(g.original_index[: g.num_owned])  # global cell -> owned local cell
    dg1 = sim.scheme.name == "dg1"
    if dg1:  # column of the state holding each vertex of raw.cells[c]
        nodes = sim.scheme.cells.nodes[: g.num_owned][order]
        nv = raw.cells.shape[1]
        corner = raw.points[raw.cells]
        perm = np.argmin(np.linalg.norm(corner[:, :, None, :] - nodes[:, None, :nv, :], axis=3), axis=2)
    state, t = sim.state, 0.0
    densities, vertex = [], []
    for t_out in times:
        state = sim.stepper.advance(state, t, float(t_out))
        t = float(t_out)
        densities.append(sim.scheme.cell_averages(state)[order])
        if dg1:
            rho = (state.reshape(g.num_owned, -1) / sim.scheme._vertex_jacobian)[order]
            vertex.append(np.take_along_axis(rho, perm, axis=1))
    return SimpleNamespace(
        sphere=mesh["sphere"], vertices=raw.points, cells=raw.cells, centroids=g.centroid[: g.num_owned][order],
        areas=g.measure[: g.num_owned][order], times=np.asarray(times, float), densities=np.array(densities),
        vertex_densities=np.array(vertex) if dg1 else None, config=config.data,
        metadata={"kind": "pde", "scheme": sim.scheme.name}, path="in-process",
    )
