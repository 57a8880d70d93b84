"""Diagnostics of any particle run: pairwise inner products and clusters over time.

Cluster rules (``rule`` of :func:`write_diagnostics`)
-----------------------------------------------------
``basins`` (S^1 and S^2)
    The density-level definition of :mod:`meanfield.analysis.clusters`, the same as for PDE
    runs: significant peaks of a kernel density estimate of the tokens on the run config's
    mesh, above the uniform density, with their watershed regions; a cluster's size is the
    mass of its region.  Two clusters separated by a dip count as two however close they are,
    if the dip is deeper than the estimate's sampling noise: the bandwidth and the prominence
    scale with the number of tokens (:mod:`meanfield.analysis.clusters.noise`), so sampling
    wiggles are not counted as basins.
``links`` (any d)
    Two tokens are *linked* when ``<x_i, x_j> > 1 - eps`` (chord distance below
``sqrt(2 eps)``); clusters are the connected components of this graph, and a component
counts as a cluster when it holds at least ``min_fraction`` of the tokens.  Defaults:
``eps = 1e-3`` (about 2.6 degrees), ``min_fraction = 0.01``.  For n above ``max_points`` the
rule is applied to a uniform subsample of ``max_points`` tokens (fixed seed), which keeps the
cost bounded for collapsed states (where the link graph is dense); clusters holding
``min_fraction`` of the mass are then missed with negligible probability.  A chain of tokens
across the saddle between two forming clusters joins them, so before the clusters are tight
the count depends on eps and on the sample.
``auto``
    ``basins`` on S^1 and S^2, ``links`` in higher dimensions.

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

from ..rundir.results import load_particle_run
from ..sphere import subsample
from .clusters import analyse_run

MAX_POINTS = 4000
BINS = 50
RULES = ("auto", "basins", "links")


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


def resolve_rule(rule: str, d: int) -> str:
    """The rule ``auto`` means in dimension d; checks the name."""
    if rule not in RULES:
        raise ValueError(f"rule: must be one of {RULES}, got {rule!r}")
    if rule == "auto":
        return "basins" if d in (2, 3) else "links"
    if rule == "basins" and d not in (2, 3):
        raise ValueError(f"rule: 'basins' needs tokens on S^1 or S^2, got d = {d}")
    return rule


def write_diagnostics(path: str | Path, rule: str = "auto", eps: float = 1e-3, min_fraction: float = 0.01,
                      bins: int = BINS) -> dict[str, np.ndarray]:
    """Write diagnostics.csv (t, clusters, largest_cluster, rule) and inner_products.png for a run.

    ``eps`` and ``min_fraction`` are those of the ``links`` rule; the ``basins`` rule uses the
    defaults of :func:`meanfield.analysis.clusters.analyse_run`.  Returns the computed arrays
    (times, clusters, largest, histograms (T, bins)).
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    result = load_particle_run(path)
    rule = resolve_rule(rule, result.points.shape[2])
    if rule == "basins":
        history = analyse_run(result)
        clusters = history.counts
        largest = np.array([f.masses.max(initial=0.0) for f in history.frames])
    else:
        sizes = [cluster_sizes(p, eps) for p in result.points]
        clusters = np.array([int(np.sum(s >= min_fraction)) for s in sizes])
        largest = np.array([s[0] for s in sizes])
    hist = np.array([inner_product_histogram(p, bins) for p in result.points])
    with open(result.path / "diagnostics.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "clusters", "largest_cluster", "rule"])
        for row in zip(result.times, clusters, largest):
            w.writerow([repr(float(row[0])), int(row[1]), repr(float(row[2])), rule])
    fig = Figure(figsize=(11, 4), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    image = ax.imshow(np.log10(np.maximum(hist, 1e-6)), origin="lower", aspect="auto",
                      extent=(-1.0, 1.0, result.times[0], max(result.times[-1], result.times[0] + 1e-9)))
    fig.colorbar(image, ax=ax, label="log10 fraction of pairs")
    ax.set(xlabel="<x_i, x_j>", ylabel="t", title="pairwise inner products")
    ax2.step(result.times, clusters, where="post")
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    label = (f"density basins\nbandwidth {history.info['bandwidth']:.3g}, prominence {history.prominence:.3g}"
             if rule == "basins" else f"links\neps = {eps:g}, at least {min_fraction:g} of the tokens")
    ax2.set(xlabel="t", ylabel="clusters", title=f"clusters: {label}")
    fig.savefig(result.path / "inner_products.png", dpi=100)
    return {"times": result.times, "clusters": clusters, "largest": largest, "histograms": hist}
