"""Diagnostics of any particle run: pairwise inner products and clusters over time.

Cluster rule
------------
Two tokens are *linked* when ``<x_i, x_j> > 1 - eps`` (chord distance below
``sqrt(2 eps)``); clusters are the connected components of this graph, and a component
counts as a cluster when it holds at least ``min_fraction`` of the tokens.  Defaults:
``eps = 1e-3`` (about 2.6 degrees), ``min_fraction = 0.01``.  For n above ``max_points`` the
rule is applied to a uniform subsample of ``max_points`` tokens (fixed seed), which keeps the
cost bounded for collapsed states (where the link graph is dense); clusters holding
``min_fraction`` of the mass are then missed with negligible probability.

Inner products
--------------
The histogram of ``<x_i, x_j>`` over pairs i < j (all pairs up to ``max_points`` tokens,
else over the same kind of subsample) shows clustering as mass moving to 1.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

MAX_POINTS = 4000
BINS = 50


def subsample(points: np.ndarray, max_points: int = MAX_POINTS, seed: int = 0) -> np.ndarray:
    """At most ``max_points`` of the points, a uniform subsample of a fixed seed."""
    if len(points) <= max_points:
        return points
    return points[np.sort(np.random.default_rng(seed).choice(len(points), max_points, replace=False))]


def cluster_sizes(points: np.ndarray, eps: float = 1e-3, max_points: int = MAX_POINTS) -> np.ndarray:
    """Fractions of tokens in each connected component of the link graph, largest first."""
    x = subsample(points, max_points)
    pairs = cKDTree(x).query_pairs(np.sqrt(2.0 * eps), output_type="ndarray")
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(x), len(x)))
    _, labels = connected_components(graph, directed=False)
    return np.sort(np.bincount(labels) / len(x))[::-1]


def count_clusters(points: np.ndarray, eps: float = 1e-3, min_fraction: float = 0.01,
                   max_points: int = MAX_POINTS) -> int:
    """Number of clusters holding at least ``min_fraction`` of the tokens (module docstring)."""
    return int(np.sum(cluster_sizes(points, eps, max_points) >= min_fraction))


def inner_product_histogram(points: np.ndarray, bins: int = BINS, max_points: int = MAX_POINTS) -> np.ndarray:
    """Fraction of pairs i < j with ``<x_i, x_j>`` in each of ``bins`` equal bins of [-1, 1]."""
    x = subsample(points, max_points)
    gram = x @ x.T
    values = gram[np.triu_indices(len(x), k=1)]
    counts, _ = np.histogram(np.clip(values, -1.0, 1.0), bins=bins, range=(-1.0, 1.0))
    return counts / max(len(values), 1)


def write_diagnostics(path: str | Path, eps: float = 1e-3, min_fraction: float = 0.01,
                      bins: int = BINS) -> dict[str, np.ndarray]:
    """Write diagnostics.csv (t, clusters, largest_cluster) and inner_products.png for a run.

    Returns the computed arrays (times, clusters, largest, histograms (T, bins)).
    """
    from matplotlib.figure import Figure

    from ..runner.results import load_particle_run

    run = load_particle_run(path)
    sizes = [cluster_sizes(p, eps) for p in run.points]
    clusters = np.array([int(np.sum(s >= min_fraction)) for s in sizes])
    largest = np.array([s[0] for s in sizes])
    hist = np.array([inner_product_histogram(p, bins) for p in run.points])
    with open(run.path / "diagnostics.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "clusters", "largest_cluster", "eps", "min_fraction"])
        for row in zip(run.times, clusters, largest):
            w.writerow([repr(float(row[0])), int(row[1]), repr(float(row[2])), eps, min_fraction])
    fig = Figure(figsize=(11, 4))
    ax, ax2 = fig.subplots(1, 2)
    image = ax.imshow(np.log10(np.maximum(hist, 1e-6)), origin="lower", aspect="auto",
                      extent=(-1.0, 1.0, run.times[0], max(run.times[-1], run.times[0] + 1e-9)))
    fig.colorbar(image, ax=ax, label="log10 fraction of pairs")
    ax.set(xlabel="<x_i, x_j>", ylabel="t", title="pairwise inner products")
    ax2.step(run.times, clusters, where="post")
    ax2.set(xlabel="t", ylabel="clusters", title=f"clusters (eps={eps:g}, >= {min_fraction:g} of tokens)")
    fig.tight_layout()
    fig.savefig(run.path / "inner_products.png", dpi=100)
    return {"times": run.times, "clusters": clusters, "largest": largest, "histograms": hist}
