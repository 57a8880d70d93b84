"""The files of a cluster analysis.

``clusters.csv``
    One row per cluster and output time: ``t, id, x, y[, z]`` (peak position),
    ``theta`` (S^1) or ``lon, lat`` (S^2; radians), ``height`` (density units), ``mass``,
    ``width`` (radians); hybrid runs also ``atom_mass`` (the part of ``mass`` in atoms) and
    ``atom_id`` (the cluster's heaviest atom, -1: none), and ``height`` is ``inf`` for a
    cluster whose top is an atom (:mod:`.atoms`).
``events.csv``
    ``kind, time, kept, absorbed, kept_mass, absorbed_mass``
    (:func:`~meanfield.analysis.events.write_events`, as ``meanfield longtime``'s tables):
    births (``kept`` the new id, ``absorbed`` its parent if any), merges (the survivor, the
    absorbed cluster and their masses at the output before; the merge time of
    :mod:`meanfield.merging`) and deaths (a cluster that vanished) (:mod:`.tracking`).
``crossings.csv``
    ``id, factor, time, status``: the first time each cluster's peak (``id = max``: the global
    maximum of the density) reaches ``factor`` x uniform; ``status`` says ``crossed`` (the time
    is given), ``already`` (at or above the level when first seen: no time) or ``never`` (not
    reached: no time) (:mod:`.crossing`).
``positions.csv``
    Causal runs: the clusters of each token position's density, one row per position, output
    time and cluster: ``position`` (s), then the columns of clusters.csv (ids per position).
    The three files above describe the whole token distribution.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ...spheres import sphere_named
from ..events import write_events
from .coords import angle_columns
from .history import BasinHistory

FILES = ("clusters.csv", "events.csv", "crossings.csv")
#: The clusters of each position of a causal run.
POSITIONS_FILE = "positions.csv"
#: The picture of a cluster history (:mod:`.plots`).
PLOT_FILE = "clusters.png"


def _number(v: float) -> str:
    """Exact text of a number; empty for nan (a time never reached), ``inf`` for infinity."""
    return "" if np.isnan(v) else repr(float(v))


def cluster_rows(history: BasinHistory) -> list[dict[str, float]]:
    """The rows of clusters.csv."""
    axes = "xyz"[: sphere_named(history.sphere).d]
    rows = []
    for frame, ids in zip(history.frames, history.ids):
        angles = angle_columns(frame.positions)
        for k, cluster in enumerate(ids):
            row = {"t": frame.t, "id": int(cluster)}
            row.update({a: float(frame.positions[k, i]) for i, a in enumerate(axes)})
            row.update({name: float(v[k]) for name, v in angles.items()})
            row.update(height=float(frame.heights[k]), mass=float(frame.masses[k]), width=float(frame.widths[k]))
            if frame.atom_masses is not None and frame.atom_ids is not None:
                row.update(atom_mass=float(frame.atom_masses[k]), atom_id=int(frame.atom_ids[k]))
            rows.append(row)
    return rows


def _columns(history: BasinHistory) -> list[str]:
    sphere = sphere_named(history.sphere)
    return ["t", "id", *"xyz"[: sphere.d], *sphere.plot_coordinates, "height", "mass", "width",
            *(["atom_mass", "atom_id"] if history.has_atoms else [])]


def _cells(row: dict[str, float], columns: list[str]) -> list:
    return [row[c] if c in ("id", "atom_id") else _number(row[c]) for c in columns]


def write_position_histories(directory: str | Path, positions: np.ndarray, histories: list[BasinHistory]) -> Path:
    """Write positions.csv: each position's clusters (module docstring)."""
    path = Path(directory) / POSITIONS_FILE
    columns = _columns(histories[0])
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["position", *columns])
        for s, history in zip(positions, histories):
            for row in cluster_rows(history):
                writer.writerow([_number(s), *_cells(row, columns)])
    return path


def write_basin_history(directory: str | Path, history: BasinHistory) -> list[Path]:
    """Write clusters.csv, events.csv and crossings.csv into ``directory`` (created)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / name for name in FILES]
    columns = _columns(history)
    with open(paths[0], "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in cluster_rows(history):
            writer.writerow(_cells(row, columns))
    write_events(paths[1], history.events)
    with open(paths[2], "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "factor", "time", "status"])
        for c in history.crossings:
            writer.writerow(["max" if c.id is None else c.id, _number(c.factor), _number(c.time), c.status])
    return paths
