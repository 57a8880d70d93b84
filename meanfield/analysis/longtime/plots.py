"""Pictures of long-time cluster histories: count against log t, trajectories, merge times against
beta (one beta: its metastable states against t).

Figures are :class:`matplotlib.figure.Figure` objects saved directly (no pyplot).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, MaxNLocator

from .events import PointSetHistory

#: Most panels side by side in :func:`point_set_history_figure` (more histories start new rows).
PANELS_PER_ROW = 3


def point_set_history_figure(histories: Mapping[str, PointSetHistory]) -> Figure:
    """Cluster count against log t (one line per history) and the cluster trajectories of each.

    Trajectories: centre angle against log t, the marker area proportional to the mass; merges
    are drawn as black crosses at the surviving cluster's centre.  The panels fill rows of at
    most :data:`PANELS_PER_ROW`.
    """
    panels = 1 + len(histories)
    columns = min(panels, PANELS_PER_ROW)
    rows = -(-panels // columns)
    fig = Figure(figsize=(5.0 * columns, 4.2 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[panels:]:
        fig.delaxes(ax)
    for k, (name, h) in enumerate(histories.items()):
        t = np.asarray(h.times)
        axes[0].step(t[t > 0], h.counts[t > 0], where="post", color=f"C{k}", label=name)
        ax = axes[1 + k]
        for j, label in enumerate(h.all_labels()):
            tt, c, m = h.track(label)
            keep = tt > 0
            ax.scatter(tt[keep], c[keep], s=40.0 * m[keep], color=f"C{j % 10}", lw=0)
        for e in h.merges():
            labels, centres, _ = h.state_at(e.time + 1e-9)
            if np.any(labels == e.kept):
                ax.plot(e.time, centres[labels == e.kept][0], "kx", ms=8)
        ax.set(xscale="log", xlabel="t", ylabel="centre theta (rad)", ylim=(-np.pi, np.pi), title=f"{name}: clusters")
    axes[0].set(xscale="log", xlabel="t", ylabel="clusters", title="number of clusters")
    axes[0].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].legend()
    return fig


def table_figure(betas: Sequence[float], merges: Sequence[Sequence[float]],
                 states: Sequence[Sequence[tuple[int, float, float, bool]]]) -> Figure:
    """Merge times and metastable times of the reference, from ``states`` ``(k, start, duration,
    lower bound)`` per beta.

    Several betas: merge times (left) and metastable times by cluster count (right) against
    beta, log t axes.  One beta (nothing to plot against): its metastable states as bars on a
    log t axis, one row per cluster count k from the state's start to its end (hatched: still
    there at the last output, a lower bound), each merge a dotted line labelled with its time.
    """
    if len(betas) == 1:
        return _states_figure(betas[0], merges[0], states[0])
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    for b, times in zip(betas, merges, strict=True):
        left.plot([b] * len(times), times, "o", color="C0")
    for b, rows in zip(betas, states, strict=True):
        for k, _, d, lower in rows:
            right.plot(b, d, "^" if lower else "o", color=f"C{k % 10}")
            right.annotate(str(k), (b, d), textcoords="offset points", xytext=(4, 2), fontsize=8)
    left.set(yscale="log", xlabel="beta", ylabel="merge time", title="merge times")
    right.set(yscale="log", xlabel="beta", ylabel="time at k clusters",
              title="metastable times (label: k; triangle: lower bound)")
    return fig


def _states_figure(beta: float, merges: Sequence[float], states: Sequence[tuple[int, float, float, bool]]) -> Figure:
    """The metastable states of one beta as bars against log t, merges as labelled lines."""
    fig = Figure(figsize=(8, 3.6), layout="constrained")
    ax = fig.subplots()
    for k, start, duration, lower in states:
        left = max(start, 1e-3)  # a state from t = 0 starts at the axis' left end
        ax.barh(k, start + duration - left, left=left, height=0.6, color=f"C{k % 10}", alpha=0.7,
                hatch="//" if lower else None, edgecolor="k", lw=0.5)
        ax.annotate(f"{duration:.4g}{' (at least)' if lower else ''}", (np.sqrt(left * (start + duration)), k),
                    ha="center", va="center", fontsize=8)
    for t in merges:
        ax.axvline(t, color="k", ls=":", lw=1.0)
        ax.annotate(f"merge at t = {t:.4g}", (t, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                    xytext=(-3, -4), textcoords="offset points", ha="right", va="top", fontsize=8)
    ax.set(xscale="log", xlabel="t", ylabel="clusters k",
           title=f"beta = {beta:g}: metastable states (bar: time at k clusters, hatched: a lower bound)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(FormatStrFormatter("%g"))
    return fig


def save(fig: Figure, path: Path) -> Path:
    """Save a figure (150 dpi) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    return path
