"""The plot of a cluster analysis: count against log t, peak trajectories, heights.

Figures are built with :class:`matplotlib.figure.Figure` and saved directly (no pyplot, no
backend change), so a notebook's backend is left alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullFormatter

from .coords import angle_columns
from .history import ClusterHistory


def _broken(x: np.ndarray, y: np.ndarray, angle: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The curve (x, y) with a gap (NaN) wherever ``angle`` wraps around (jumps by more than pi)."""
    jumps = np.flatnonzero(np.abs(np.diff(angle)) > np.pi) + 1
    return np.insert(np.asarray(x, float), jumps, np.nan), np.insert(np.asarray(y, float), jumps, np.nan)


def history_figure(history: ClusterHistory) -> Figure:
    """Three panels: cluster count against t (log axis), peak trajectories, peak heights."""
    fig = Figure(figsize=(15, 4.2), layout="constrained")
    count, paths, heights = fig.subplots(1, 3)
    t = history.times
    positive = t > 0
    count.step(t[positive], history.counts[positive], where="post")
    count.set(xscale="log", xlabel="t", ylabel="clusters", title="number of clusters")
    count.yaxis.set_major_locator(MaxNLocator(integer=True))
    count.xaxis.set_minor_formatter(NullFormatter())
    u = history.uniform
    colours = {c: f"C{k % 10}" for k, c in enumerate(history.all_ids())}
    for cluster in history.all_ids():
        tr = history.track(cluster)
        angles = angle_columns(tr["positions"])
        style = {"color": colours[cluster], "lw": 1.2}
        if history.sphere == "S1":
            paths.plot(*_broken(tr["t"], angles["theta"], angles["theta"]), **style)
        else:
            lon, lat = np.degrees(angles["lon"]), np.degrees(angles["lat"])
            paths.plot(*_broken(lon, lat, angles["lon"]), **style)
            paths.plot(lon[-1:], lat[-1:], "o", ms=4, color=colours[cluster])
        heights.semilogy(tr["t"], tr["heights"] / u, **style)
    heights.semilogy(t, history.maxima / u, "k--", lw=0.8, label="global max")
    for e in history.events:
        if e.kind == "merge":
            heights.axvline(e.time, color="0.7", lw=0.6)
    if history.sphere == "S1":
        paths.set(xlabel="t", ylabel="theta (rad)", ylim=(-np.pi, np.pi), title="peak positions")
    else:
        paths.set(xlabel="longitude (deg)", ylabel="latitude (deg)", xlim=(-180, 180), ylim=(-90, 90),
                  title="peak trajectories (dot: last position)")
    heights.set(xlabel="t", ylabel="height / uniform", title="peak heights (grey: merges)")
    heights.legend(fontsize=7)
    return fig


def plot_history(path: str | Path, history: ClusterHistory) -> Path:
    """Save :func:`history_figure` as a PNG."""
    history_figure(history).savefig(path, dpi=100)
    return Path(path)
