"""Hand-made hybrid runs (density + atoms, issue 12) written through the real output writers.

A fake run has a config, metadata.json, mesh.npz and the outputs one after another through
:class:`~meanfield.rundir.writers.ObservablesWriter`, :class:`SnapshotWriter` and run.nc (with
the ParaView files), so the readers see exactly the files a hybrid run writes, without the
solver.  The densities are sums of von Mises bumps (cell values at the centroids) and the atoms
are whatever the test asks for.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from meanfield.analysis.clusters.cells import AnalysisMesh
from meanfield.atoms import Atoms
from meanfield.mesh import RawMesh, circle, icosphere
from meanfield.rundir import layout
from meanfield.rundir.files import save_npz
from meanfield.rundir.writers import ObservablesWriter, OutputWriter, SnapshotWriter, pde_run_file

KAPPA = 60.0


def mesh_of(sphere: str, resolution: int) -> AnalysisMesh:
    raw: RawMesh = circle(resolution) if sphere == "S1" else icosphere(resolution)
    return AnalysisMesh(raw)


def bumps(mesh: AnalysisMesh, centres: Sequence[np.ndarray], masses: Sequence[float],
          kappa: float = KAPPA) -> np.ndarray:
    """Cell values of a sum of unnormalised von Mises bumps ``m exp(kappa (<x, c> - 1)) / |S| ...``
    scaled so that bump i carries about mass ``masses[i]`` (plus a small uniform floor)."""
    x = mesh.centroids
    rho = np.full(len(x), 0.01)
    for c, m in zip(centres, masses):
        bump = np.exp(kappa * (x @ np.asarray(c, float) - 1.0))
        rho += m * bump / float(bump @ mesh.areas)
    return rho


def on_circle(theta: float | Sequence[float]) -> np.ndarray:
    theta = np.atleast_1d(np.asarray(theta, float))
    return np.column_stack([np.cos(theta), np.sin(theta)])


def write_hybrid_run(path: Path, mesh: AnalysisMesh, outputs: Sequence[tuple[float, np.ndarray, Atoms | None]],
                     *, paraview: bool = True, start: int = 0) -> list[OutputWriter]:
    """A PDE run directory at ``path`` whose outputs are ``(t, cell densities, atoms)``.

    ``atoms=None`` writes a snapshot without atom arrays (a run without atoms).  Returns the
    writers (to resume: call again with ``start`` = outputs kept).
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    sphere = mesh.sphere
    hybrid = any(a is not None for _, _, a in outputs)
    resolution = mesh.num_cells if sphere == "S1" else round(np.log(mesh.num_cells / 20) / np.log(4))
    config = {"name": path.name, "mesh": {"sphere": sphere, "resolution": resolution},
              "scheme": {"kind": "fv"}, "time": {"t_final": float(outputs[-1][0]) if outputs else 1.0,
                                                 "outputs": max(len(outputs) - 1, 1)}}
    text = (f'name = "{path.name}"\n[mesh]\nsphere = "{sphere}"\nresolution = {resolution}\n[scheme]\nkind = "fv"\n'
            f'[time]\nt_final = {config["time"]["t_final"]!r}\noutputs = {config["time"]["outputs"]}\n')
    if hybrid:
        config["atoms"] = {"capture": True}
        text += "[atoms]\ncapture = true\n"
    assert tomllib.loads(text) == config
    (path / layout.CONFIG).write_text(text)
    (path / layout.METADATA).write_text(json.dumps({"format": layout.FORMAT, "format_version": layout.FORMAT_VERSION,
                                                    "kind": "pde", "name": path.name, "status": "completed",
                                                    "scheme": "fv"}))
    static = {"sphere": np.array(sphere), "vertices": mesh.vertices, "cells": mesh.cells,
              "centroids": mesh.centroids, "areas": mesh.areas}
    save_npz(path / layout.MESH, **static)
    writers: list[OutputWriter] = [ObservablesWriter(path), SnapshotWriter(path),
                                   pde_run_file(path, static, config, paraview)]
    for w in writers:
        w.start(start)
    for k, (t, rho, atoms) in enumerate(outputs):
        if k < start:
            continue
        density_mass = float(rho @ mesh.areas)
        mean = (rho * mesh.areas) @ mesh.centroids + (atoms.masses @ atoms.positions if atoms is not None else 0.0)
        row = {"t": float(t), "mass": density_mass + (atoms.mass if atoms is not None else 0.0),
               "order": float(np.linalg.norm(mean))}
        snapshot = {"density": np.asarray(rho, float)}
        if atoms is not None:
            row.update(atom_count=float(atoms.count), atom_mass=atoms.mass)
            snapshot.update(atoms.arrays())
        for w in writers:
            w.write(k, float(t), row, snapshot)
    return writers


def merging_atoms(mesh: AnalysisMesh) -> list[tuple[float, np.ndarray, Atoms | None]]:
    """Six outputs on S^1: a density cluster C stays at theta = -2; clusters A (theta 0.8,
    mass 0.25) and B (1.6, 0.15) are captured as atoms 0 (t = 1) and 1 (t = 2), approach, and
    merge into atom 0 (mass 0.4) between t = 3 and t = 4.  Captured atoms keep a flank of 10%
    of their mass on the mesh (as capture leaves the basin's rim)."""
    states = [([0.8, 1.6], [0.25, 0.15], Atoms.none(2)),
              ([1.6], [0.15], Atoms([0.25], on_circle(0.85), [0])),
              ([], [], Atoms([0.25, 0.15], on_circle([0.9, 1.5]), [0, 1])),
              ([], [], Atoms([0.25, 0.15], on_circle([1.0, 1.3]), [0, 1])),
              ([], [], Atoms([0.4], on_circle(1.16), [0])),
              ([], [], Atoms([0.4], on_circle(1.17), [0]))]
    outputs = []
    for k, (theta, masses, atoms) in enumerate(states):
        centres = [*on_circle(-2.0), *(on_circle(theta) if theta else []), *atoms.positions]
        outputs.append((float(k), bumps(mesh, centres, [0.3, *masses, *(0.1 * atoms.masses)]), atoms))
    return outputs


def sphere_atoms(mesh: AnalysisMesh) -> list[tuple[float, np.ndarray, Atoms | None]]:
    """Three outputs on S^2: two density clusters (x and y axes) become atoms 0 and 1 (t = 1),
    which merge into atom 0 between the diagonal (t = 2)."""
    x = np.eye(3)[:2]
    diagonal = np.array([[1.0, 1.0, 0.0]]) / np.sqrt(2.0)
    return [(0.0, bumps(mesh, x, [0.3, 0.3]), Atoms.none(3)),
            (1.0, bumps(mesh, x, [0.03, 0.03]), Atoms([0.27, 0.25], x, [0, 1])),
            (2.0, bumps(mesh, diagonal, [0.06]), Atoms([0.52], diagonal, [0]))]
