"""Diagnostics of any particle run: pairwise inner products and clusters over time.

``diagnostics.csv`` (t, clusters, largest_cluster, largest_cluster_error, rule, tokens_analysed)
and ``inner_products.png``.  A particle run writes them once its outputs are written
(:class:`Diagnostics`, a handler due at the run's end: ``meanfield particles``,
:func:`meanfield.run_particles` and a resume of a particle run alike; ``output.diagnostics =
false`` or ``--no-diagnostics`` turns them off); :func:`write_diagnostics` writes them for any
particle run directory.

Cluster rules (``rule``)
------------------------
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
    ``eps = 1e-3`` (about 2.6 degrees), ``min_fraction = 0.01``.  A chain of tokens across the
    saddle between two forming clusters joins them, so before the clusters are tight the count
    depends on eps and on the sample.
``auto``
    ``basins`` on S^1 and S^2, ``links`` in higher dimensions.

Cost and samples
----------------
Each output is analysed from a uniform sample of its tokens (fixed seed, the same tokens at
every output): at most :data:`BASIN_SAMPLE` tokens for the density estimate of ``basins``
(whose bandwidth and prominence are then those of that many tokens) and
:data:`~meanfield.particles.pairs.PAIR_SAMPLE` for ``links`` and the histogram, so the cost per
output is bounded whatever n (at n = 1e5 on S^2 a small fraction of the run's steps: see
:doc:`/outputs`).  The share of the tokens in a cluster, estimated from a sample of m of n
tokens, is within ``largest_cluster_error`` = max(1.96 sqrt(p (1 - p) / m), 3 / m)
sqrt((n - m) / (n - 1)) of the share among all tokens with probability about 0.95 (the normal
approximation of the hypergeometric law, and the rule of three where p is near 0 or 1; 0 when
all tokens are analysed); the column ``tokens_analysed`` gives m.
Each bin of the histogram of inner products is a share of pairs, within
:func:`~meanfield.particles.pairs.sampled_error` of that over all pairs (Hoeffding, 95%).

Inner products
--------------
The histogram of ``<x_i, x_j>`` over pairs i < j shows clustering as mass moving to 1.
"""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from ..collective import on_root
from ..engine.handlers import Cadence, Handler, Moment, RunState
from ..engine.progress import log
from ..mesh import raw_mesh
from ..particles.pairs import PAIR_SAMPLE, sampled_error
from ..rundir import layout
from ..rundir.files import atomic_write, write_text
from ..rundir.header import MeshTable
from ..rundir.results import load_particle_run
from ..sphere import sphere_area, subsample
from .clusters.api import default_prominence
from .clusters.cells import AnalysisMesh
from .clusters.frame import analyse_field
from .clusters.noise import token_bandwidth
from .clusters.particles import TokenField

#: Tokens of an output whose density estimate the ``basins`` rule analyses, at most.
BASIN_SAMPLE = 1000
MAX_POINTS = PAIR_SAMPLE
BINS = 50
RULES = ("auto", "basins", "links")
#: The normal quantile of the stated errors' probability (0.95).
Z95 = 1.96


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
    m = len(x)
    both, _ = np.histogram(np.clip(x @ x.T, -1.0, 1.0), bins=bins, range=(-1.0, 1.0))  # i < j, j < i and i = j
    diagonal, _ = np.histogram(np.clip(np.einsum("ij,ij->i", x, x), -1.0, 1.0), bins=bins, range=(-1.0, 1.0))
    return (both - diagonal) / max(m * (m - 1), 1)


def share_error(share: float, sample: int, n: int) -> float:
    """The 95% half-width of a share of ``sample`` tokens drawn without replacement from ``n``
    as an estimate of the share among all n (module docstring)."""
    if sample >= n:
        return 0.0
    share = min(max(share, 0.0), 1.0)
    spread = max(Z95 * np.sqrt(share * (1.0 - share) / sample), 3.0 / sample)  # the rule of three near 0 and 1
    return float(spread * np.sqrt((n - sample) / (n - 1)))


def resolve_rule(rule: str, d: int) -> str:
    """The rule ``auto`` means in dimension d; checks the name."""
    if rule not in RULES:
        raise ValueError(f"rule: must be one of {RULES}, got {rule!r}")
    if rule == "auto":
        return "basins" if d in (2, 3) else "links"
    if rule == "basins" and d not in (2, 3):
        raise ValueError(f"rule: 'basins' needs tokens on S^1 or S^2, got d = {d}")
    return rule


class OutputDiagnostics:
    """The diagnostics of a particle run's outputs, one output at a time (module docstring).

    Parameters
    ----------
    mesh
        The ``[mesh]`` table of the run's header: the ``basins`` rule's analysis mesh.
    n, d
        Tokens per output and their dimension.
    rule, eps, min_fraction, bins
        As :func:`write_diagnostics`.
    basin_sample, pair_sample
        The samples' sizes at most (module docstring).
    """

    def __init__(self, mesh: MeshTable, n: int, d: int, rule: str = "auto", eps: float = 1e-3,
                 min_fraction: float = 0.01, bins: int = BINS, basin_sample: int = BASIN_SAMPLE,
                 pair_sample: int = PAIR_SAMPLE) -> None:
        self.rule = resolve_rule(rule, d)
        self.n, self.eps, self.min_fraction, self.bins, self.pair_sample = n, eps, min_fraction, bins, pair_sample
        self.sample = min(n, basin_sample if self.rule == "basins" else pair_sample)
        self.rows: list[tuple[float, int, float, float]] = []
        self.histograms: list[np.ndarray] = []
        self.label = (f"links\neps = {eps:g}, at least {min_fraction:g} of the tokens" if self.rule == "links" else "")
        if self.rule == "basins":
            self.mesh = AnalysisMesh(raw_mesh(mesh.sphere.name, mesh.resolution, mesh.file))
            self.bandwidth = token_bandwidth(self.sample, d, self.mesh.cell_size)
            self.threshold = 1.0 / sphere_area(d)
            self.prominence: float | None = None

    def add(self, t: float, points: np.ndarray) -> None:
        """Analyse the output at time ``t`` with tokens ``points`` (n, d)."""
        if self.rule == "basins":
            field = TokenField(self.mesh, subsample(points, self.sample), bandwidth=self.bandwidth)
            if self.prominence is None:
                self.prominence = default_prominence(self.mesh, field)
                self.label = f"density basins\nbandwidth {self.bandwidth:.3g}, prominence {self.prominence:.3g}"
            frame = analyse_field(field, t, self.threshold, self.prominence)
            clusters, largest = frame.count, float(frame.masses.max(initial=0.0))
        else:
            sizes = cluster_sizes(points, self.eps, self.sample)
            clusters, largest = int(np.sum(sizes >= self.min_fraction)), float(sizes[0])
        self.rows.append((t, clusters, largest, share_error(largest, self.sample, self.n)))
        self.histograms.append(inner_product_histogram(points, self.bins, self.pair_sample))

    def results(self) -> dict[str, np.ndarray]:
        """times, clusters, largest, largest_error and histograms (T, bins) of the outputs so far."""
        rows = np.array(self.rows, float).reshape(-1, 4)
        return {"times": rows[:, 0], "clusters": rows[:, 1].astype(int), "largest": rows[:, 2],
                "largest_error": rows[:, 3], "histograms": np.array(self.histograms).reshape(-1, self.bins)}

    def write(self, run_dir: Path) -> None:
        """diagnostics.csv and inner_products.png in ``run_dir`` (each written atomically)."""
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        r = self.results()
        lines = ["t,clusters,largest_cluster,largest_cluster_error,rule,tokens_analysed"]
        lines += [f"{t!r},{c},{g!r},{e!r},{self.rule},{self.sample}" for t, c, g, e in
                  zip(r["times"].tolist(), r["clusters"].tolist(), r["largest"].tolist(), r["largest_error"].tolist())]
        write_text(Path(run_dir) / layout.DIAGNOSTICS, "\n".join(lines) + "\n")
        times, hist = r["times"], r["histograms"]
        fig = Figure(figsize=(11, 4), layout="constrained")
        ax, ax2 = fig.subplots(1, 2)
        image = ax.imshow(np.log10(np.maximum(hist, 1e-6)), origin="lower", aspect="auto",
                          extent=(-1.0, 1.0, times[0], max(times[-1], times[0] + 1e-9)))
        fig.colorbar(image, ax=ax, label="log10 fraction of pairs")
        pairs = min(self.n, self.pair_sample)
        sampled = "" if pairs == self.n else f" (a sample of {pairs} tokens: +-{sampled_error(pairs):.2g} per bin)"
        ax.set(xlabel="<x_i, x_j>", ylabel="t", title=f"pairwise inner products{sampled}")
        ax2.step(times, r["clusters"], where="post")
        ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.set(xlabel="t", ylabel="clusters", title=f"clusters: {self.label}")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        atomic_write(Path(run_dir) / layout.INNER_PRODUCTS, lambda fh: _write_bytes(fh, buffer.getvalue()))


def write_diagnostics(path: str | Path, rule: str = "auto", eps: float = 1e-3, min_fraction: float = 0.01,
                      bins: int = BINS, between: Callable[[], None] = lambda: None) -> dict[str, np.ndarray]:
    """Write diagnostics.csv and inner_products.png for a particle run directory (module docstring).

    ``eps`` and ``min_fraction`` are those of the ``links`` rule; the ``basins`` rule uses the
    defaults of :func:`meanfield.analysis.clusters.analyse_run`.  ``between`` is called after
    each output.  Returns the computed arrays (times, clusters, largest, largest_error,
    histograms (T, bins)).
    """
    result = load_particle_run(path)
    _, n, d = result.points.shape
    frames = OutputDiagnostics(result.header.mesh, n, d, rule, eps, min_fraction, bins)
    for t, points in zip(result.times, result.points):
        frames.add(float(t), points)
        between()
    frames.write(result.path)
    return frames.results()


class Diagnostics(Handler):
    """A particle run's diagnostics once its outputs are written (every rank; the work on rank 0),
    output by output, looking for a signal or the wall limit between outputs (a run stopped then
    is interrupted and writes no diagnostics; its resume does); nothing when the run's
    config.toml says ``output.diagnostics = false``.  Its wall time is the run's timing
    ``diagnostics``."""

    cadence = Cadence(final=True)
    timing = "diagnostics"

    def handle(self, state: RunState, moment: Moment) -> None:
        if state.sim.run_type != "particles":
            return
        comm = state.comm
        held: dict[str, Any] = {}

        def open_run() -> int:
            result = load_particle_run(state.run_dir)
            if not result.header.diagnostics or not len(result.times) \
                    or result.points.ndim != 3:  # a batch of prompts: its observables hold each prompt's statistics
                return 0
            _, n, d = result.points.shape
            held.update(result=result, frames=OutputDiagnostics(result.header.mesh, n, d))
            return len(result.times)

        count = on_root(comm, open_run)
        if not count:
            return
        started = time.perf_counter()
        note = on_root(comm, lambda: _sample_note(held["frames"]))
        log.info("diagnostics of %d outputs (diagnostics.csv, inner_products.png)%s", count, note)
        def analyse(k: int) -> None:
            held["frames"].add(float(held["result"].times[k]), held["result"].points[k])

        for k in range(count):
            on_root(comm, functools.partial(analyse, k))
            state.check_stop()
        on_root(comm, lambda: held["frames"].write(state.run_dir))
        log.info("diagnostics written in %.1f s", time.perf_counter() - started)


def _write_bytes(fh: IO[bytes], data: bytes) -> None:
    fh.write(data)


def _sample_note(frames: OutputDiagnostics) -> str:
    if frames.sample >= frames.n:
        return ""
    return f": {frames.rule} rule on a sample of {frames.sample} of {frames.n} tokens"
