"""Whom chosen positions of a causal run attend to: absolute shares over the source positions
and over the sphere's clusters (``attending.csv`` and ``attending.png`` of ``meanfield plot``).

For an attending position s_k at time t:

* over the source positions: row k of the attention map a(t; s, s')
  (:func:`~meanfield.analysis.attention_maps.attention_map`), the share of its attention that s_k gives
  each position s_j <= s_k (summing to 1);
* over the sphere's clusters: the share that falls on each cluster of the whole token
  distribution at t, as ``meanfield clusters`` finds and numbers them (basins of significant
  peaks, :mod:`meanfield.analysis.clusters`; the same ids as clusters.csv), and on the cells in
  no cluster (:func:`~meanfield.analysis.attention_maps.attention_over_regions`).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .attention_maps import attention_from
from .clusters import analyse_run
from .clusters.coords import angle_columns

#: Columns of attending.csv.
COLUMNS = ("attending", "t", "over", "source", "share", "theta", "lon", "lat")


@dataclass(frozen=True)
class Attending:
    """Where one position's attention goes at one time.

    Attributes
    ----------
    t
        The output time.
    position
        The attending position s_k.
    positions, by_position
        (M,) the source positions s_j and the share of each (0 beyond s_k).
    cluster_ids, cluster_points, by_cluster
        (P,) the whole distribution's clusters at t (ids as in clusters.csv), (P, d) their peaks,
        and the share of each.
    outside
        The share that falls on no cluster.
    """

    t: float
    position: float
    positions: np.ndarray
    by_position: np.ndarray
    cluster_ids: np.ndarray
    cluster_points: np.ndarray
    by_cluster: np.ndarray
    outside: float


def attending_slices(positions: np.ndarray, wanted: Sequence[float] | None) -> list[int]:
    """The slices nearest the ``wanted`` positions (each once, in order), default the last
    (ValueError naming ``--attending`` for a position outside [0, 1])."""
    if wanted is None:
        return [len(positions) - 1]
    for s in wanted:
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"--attending {s:g}: a token position is in [0, 1]")
    return list(dict.fromkeys(int(np.argmin(np.abs(np.asarray(positions) - s))) for s in wanted))


def attending(result: Any, times: Sequence[float], slices: Sequence[int]) -> list[Attending]:
    """Where each of ``slices`` attends at the outputs nearest ``times`` (module docstring).

    Parameters
    ----------
    result
        A causal PDE run (:func:`meanfield.load_run`).
    times
        Output times (the nearest outputs are used).
    slices
        The attending slices (:func:`attending_slices`).
    """
    history = analyse_run(result, plots=False)
    out = []
    for t in times:
        i = int(np.argmin(np.abs(np.asarray(result.times) - t)))
        frame, ids = history.frames[i], history.ids[i]
        for k in slices:
            by_position, by_region = attention_from(result, float(result.times[i]), k, frame.labels, frame.count)
            out.append(Attending(float(result.times[i]), float(result.positions[k]), np.asarray(result.positions),
                                 by_position, np.asarray(ids), np.asarray(frame.positions), by_region[:-1],
                                 float(by_region[-1])))
    return out


def attending_rows(items: Sequence[Attending]) -> list[dict[str, Any]]:
    """The rows of attending.csv: one per (attending position, time, source), ``over`` naming
    the source kind: ``position`` (``source`` is s_j) or ``cluster`` (``source`` is its id,
    -1 for the cells in no cluster; its peak's ``theta`` (S^1) or ``lon``, ``lat`` (S^2) in
    radians)."""
    rows: list[dict[str, Any]] = []
    for item in items:
        head = {"attending": item.position, "t": item.t}
        rows += [{**head, "over": "position", "source": s, "share": a}
                 for s, a in zip(item.positions, item.by_position) if s <= item.position]
        angles = angle_columns(item.cluster_points.reshape(len(item.cluster_ids), -1)) if len(item.cluster_ids) else {}
        for j, (cluster, share) in enumerate(zip(item.cluster_ids, item.by_cluster)):
            rows.append({**head, "over": "cluster", "source": int(cluster), "share": share,
                         **{name: float(values[j]) for name, values in angles.items()}})
        rows.append({**head, "over": "cluster", "source": -1, "share": item.outside})
    return rows


def write_attending(path: str | Path, items: Sequence[Attending]) -> Path:
    """Write attending.csv (:func:`attending_rows`); the angle columns the sphere has not are left out."""
    rows = attending_rows(items)
    columns = [c for c in COLUMNS if any(c in row for row in rows)]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, columns)
        writer.writeheader()
        writer.writerows(rows)
    return Path(path)
