"""The plot of a cluster analysis: count, peak trajectories and heights against t, merges marked.

Figures are built with :class:`matplotlib.figure.Figure` and saved directly (no pyplot, no
backend change), so a notebook's backend is left alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ...spheres import sphere_named
from .coords import angle_columns
from .history import BasinHistory

ATOM_DOT = 60.0  # marker area (points^2) of atoms of mass 1 on the trajectories


def _broken(x: np.ndarray, y: np.ndarray, angle: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The curve (x, y) with a gap (NaN) wherever ``angle`` wraps around (jumps by more than pi)."""
    jumps = np.flatnonzero(np.abs(np.diff(angle)) > np.pi) + 1
    return np.insert(np.asarray(x, float), jumps, np.nan), np.insert(np.asarray(y, float), jumps, np.nan)


def _on_curve(history: BasinHistory) -> bool:
    """Whether the history's sphere is a curve (S^1): its peaks' angle is drawn against t; on a
    surface (S^2) their trajectories are drawn on a longitude-latitude map."""
    return sphere_named(history.sphere).dimension == 1


def _finite(values: np.ndarray) -> np.ndarray:
    """Infinite heights (atoms) as gaps."""
    return np.where(np.isfinite(values), values, np.nan)


def basin_history_figure(history: BasinHistory) -> Figure:
    """Three panels on one linear t axis: cluster count, peak trajectories, peak heights.

    Every merge is a dotted vertical line at its merge time on each panel (S^1: and a cross at
    the survivor's position on the trajectories), labelled with its time on the count panel.
    Hybrid runs: where a cluster holds atoms its trajectory carries dots of area proportional
    to the atoms' mass; its height (infinite) is not drawn.
    """
    fig = Figure(figsize=(15, 4.2), layout="constrained")
    curve = _on_curve(history)
    count, paths, heights = fig.subplots(1, 3)
    t = history.times
    count.step(t, history.counts, where="post")
    count.set(xlabel="t", ylabel="clusters", title="number of clusters")
    count.yaxis.set_major_locator(MaxNLocator(integer=True))
    u = history.uniform
    colours = {c: f"C{k % 10}" for k, c in enumerate(history.all_ids())}
    for cluster in history.all_ids():
        tr = history.track(cluster)
        angles = angle_columns(tr["positions"])
        style = {"color": colours[cluster], "lw": 1.2}
        if curve:
            x, y = tr["t"], angles["theta"]
            paths.plot(*_broken(x, y, y), **style)
        else:
            x, y = np.degrees(angles["lon"]), np.degrees(angles["lat"])
            paths.plot(*_broken(x, y, angles["lon"]), **style)
            paths.plot(x[-1:], y[-1:], "o", ms=4, color=colours[cluster])
        if "atom_masses" in tr:
            atom = tr["atom_masses"] > 0
            paths.scatter(x[atom], y[atom], s=ATOM_DOT * tr["atom_masses"][atom], color=colours[cluster], zorder=3)
        heights.semilogy(tr["t"], _finite(tr["heights"]) / u, **style)
    heights.semilogy(t, _finite(history.maxima) / u, "k--", lw=0.8, label="global max")
    _mark_merges(history, count, paths, heights)
    dots = " (dots: atoms, area ~ mass)" if history.has_atoms else ""
    if curve:
        paths.set(xlabel="t", ylabel="theta (rad)", ylim=(-np.pi, np.pi), title="peak positions" + dots)
    else:
        paths.set(xlabel="longitude (deg)", ylabel="latitude (deg)", xlim=(-180, 180), ylim=(-90, 90),
                  title="peak trajectories (dot: last position)" + dots)
    heights.set(xlabel="t", ylabel="height / uniform",
                title="peak heights" + ("; atoms: infinite" if history.has_atoms else ""))
    heights.legend(fontsize=7)
    if any(e.kind == "merge" for e in history.events):
        count.legend(fontsize=7)
    return fig


def _mark_merges(history: BasinHistory, count, paths, heights) -> None:
    """Each merge: a dotted line at its time on the t panels, its time written on the count
    panel, a cross at the survivor's peak on the S^1 trajectories."""
    merges = [e for e in history.events if e.kind == "merge"]
    curve = _on_curve(history)
    for k, e in enumerate(merges):
        axes = (count, heights, paths) if curve else (count, heights)
        for ax in axes:
            ax.axvline(e.time, color="k", ls=":", lw=0.9, label=f"merge at t = {e.time:.4g}" if ax is count else None)
        if curve:
            track = history.track(e.kept)
            after = np.flatnonzero(track["t"] >= e.time)
            if after.size:
                theta = angle_columns(track["positions"][after[:1]])["theta"]
                paths.plot([e.time], theta, "kx", ms=8, label="merge" if k == 0 else None)


def plot_history(path: str | Path, history: BasinHistory) -> Path:
    """Save :func:`basin_history_figure` as a PNG."""
    basin_history_figure(history).savefig(path, dpi=100)
    return Path(path)
