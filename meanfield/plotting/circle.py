"""Densities on S^1 against the angle theta in [-pi, pi): line plots and space-time images.

A density is given per cell, shape (cells,) (cell averages: drawn as stairs), or per cell
vertex, shape (cells, 2) (DG1: the value at both ends of each cell in the order of ``cells``:
a piecewise-linear line, discontinuous at the vertices).  Both are drawn by one rule: every
cell is a segment from its start angle to its end angle with a value at each end, and the
line joins consecutive segments (vertical where the density jumps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.collections import PathCollection
from matplotlib.colors import LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..spheres import S1
from .data import corner_values
from .geometry import interpolate
from .style import ATOM_STYLE, clip_to, color_norm, density_label, marker_sizes

MIN_LENGTH = 1e-12  # pieces of a cell shorter than this (radians) are dropped
SPACETIME_ATOM_SCALE = 60.0  # marker area (points^2) of an atom of mass 1 on the space-time image
SPACETIME_SIZE = (7.0, 4.5)  # inches
#: The space-time image has at most one column per this many pixels of the figure's width (at
#: the dpi it is saved at): the theta axis spans about 3/4 of the width, so a column is at least
#: 1.5 pixels wide and none falls between pixel centres (a cell narrower than a pixel would).
PIXELS_PER_COLUMN = 2.0


@dataclass(frozen=True)
class CircleSegments:
    """Cells of an S^1 mesh as arcs sorted by angle, the one across theta = +-pi cut in two.

    Attributes
    ----------
    theta
        (n, 2) start and end angles, start < end, within [-pi, pi].
    bary
        (n, 2, 2) weights of each end in its cell's two vertices (``cells`` order).
    index
        (n,) the source cell of each segment.
    """

    theta: np.ndarray
    bary: np.ndarray
    index: np.ndarray

    def values(self, corner_values: np.ndarray) -> np.ndarray:
        """(n, 2) values at the segment ends from (cells, 2) values at the cells' vertices."""
        return interpolate(self.bary, self.index, corner_values)

    def edges(self) -> np.ndarray:
        """(n + 1,) angles bounding the segments (the mesh covers the circle once)."""
        return np.append(self.theta[:, 0], self.theta[-1, 1])


def circle_segments(vertices: np.ndarray, cells: np.ndarray) -> CircleSegments:
    """The segments of an S^1 mesh (vertices (V, 2) on the unit circle, cells (C, 2))."""
    angle = np.arctan2(vertices[:, 1], vertices[:, 0])
    a, b = angle[cells[:, 0]], angle[cells[:, 1]]
    delta = (b - a + np.pi) % (2 * np.pi) - np.pi
    flip = delta < 0  # cell listed clockwise: start at its second vertex
    start, length = np.where(flip, b, a), np.abs(delta)
    first = np.where(flip[:, None], [0.0, 1.0], [1.0, 0.0])
    bary = np.stack([first, 1.0 - first], axis=1)  # (C, 2 ends, 2 vertices)
    # the cell across the cut: [start, pi] and [-pi, end - 2 pi], valued linearly in the angle
    s = np.clip((np.pi - start) / np.where(length > 0, length, 1.0), 0.0, 1.0)
    at_cut = bary[:, 0] + s[:, None] * (bary[:, 1] - bary[:, 0])
    ends = np.minimum(start + length, np.pi)
    wrapped = start + length > np.pi
    rest = start[wrapped] + length[wrapped] - 2 * np.pi
    theta = np.concatenate([np.stack([start, ends], axis=1), np.stack([np.full(len(rest), -np.pi), rest], axis=1)])
    bary = np.concatenate([np.stack([bary[:, 0], np.where(wrapped[:, None], at_cut, bary[:, 1])], axis=1),
                           np.stack([at_cut[wrapped], bary[wrapped, 1]], axis=1)])
    index = np.concatenate([np.arange(len(cells)), np.flatnonzero(wrapped)])
    keep = theta[:, 1] - theta[:, 0] > MIN_LENGTH
    order = np.argsort(theta[keep, 0], kind="stable")
    return CircleSegments(theta[keep][order], bary[keep][order], index[keep][order])


def pooled_columns(segments: CircleSegments, averages: np.ndarray, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell averages (T, C) max-pooled into ``columns`` equal columns of [-pi, pi].

    Each column takes the largest value of the cells it overlaps, so a cluster one cell wide
    keeps its peak however many cells share a column.

    Returns
    -------
    edges, pooled
        (columns + 1,) column edges, (T, columns) values.
    """
    edges = np.linspace(-np.pi, np.pi, columns + 1)
    first = np.searchsorted(segments.theta[:, 1], edges[:-1], side="right")  # first segment ending past the left edge
    stop = np.searchsorted(segments.theta[:, 0], edges[1:], side="left")  # segments starting before the right edge
    values = np.asarray(averages, float)[:, segments.index]
    pooled = np.stack([values[:, a:max(b, a + 1)].max(axis=1) for a, b in zip(first, stop)], axis=1)
    return edges, pooled


def token_histogram(points: np.ndarray, bins: int) -> np.ndarray:
    """Density of tokens (n, 2) as cell averages on ``meanfield.mesh.circle(bins)`` (fraction per radian)."""
    theta = np.arctan2(points[:, 1], points[:, 0]) % (2 * np.pi)
    cell = np.minimum((theta / (2 * np.pi / bins)).astype(int), bins - 1)
    return np.bincount(cell, minlength=bins) / (len(points) * 2 * np.pi / bins)


def histogram_bins(n: int) -> int:
    """About sqrt(n) bins (16 to 512): the histogram's noise stays readable."""
    return int(np.clip(np.sqrt(n), 16, 512))


def theta_axis(ax) -> None:
    """Label ``ax``'s x axis as the angle theta on [-pi, pi]."""
    pi = "\N{GREEK SMALL LETTER PI}"
    ax.set_xlim(-np.pi, np.pi)
    ax.set_xticks(np.linspace(-np.pi, np.pi, 5), [f"-{pi}", f"-{pi}/2", "0", f"{pi}/2", pi])
    ax.set_xlabel("\N{GREEK SMALL LETTER THETA}")


def _density_axes(ax, norm: Normalize) -> None:
    theta_axis(ax)
    ax.set_ylabel(density_label(S1))
    if norm.vmax is None:
        raise ValueError("the density axis needs the norm's vmax (color_norm sets it)")
    if isinstance(norm, LogNorm):
        ax.set_yscale("log")
        ax.set_ylim(norm.vmin, norm.vmax * 1.5)
    else:
        ax.set_ylim(norm.vmin, norm.vmax * 1.05)
    ax.grid(alpha=0.3)


class CircleLines:
    """A figure of a density on S^1 against theta, redrawable for another frame (movies).

    Parameters
    ----------
    segments
        The mesh's :class:`CircleSegments`.
    cells
        (C, 2) the mesh cells (to read values).
    norm
        Fixes the density axis (log scale for a :class:`~matplotlib.colors.LogNorm`).
    title
        Figure title.
    """

    def __init__(self, segments: CircleSegments, cells: np.ndarray, norm: Normalize, title: str | None = None) -> None:
        self.segments, self.cells, self.norm = segments, cells, norm
        self.figure = Figure(figsize=(7.0, 3.6), layout="constrained")
        self.ax = self.figure.subplots()
        _density_axes(self.ax, norm)
        self.line: Line2D | None = None
        self.markers: PathCollection | None = None
        self._title = self.figure.suptitle(title or "")

    def _y(self, values: np.ndarray) -> np.ndarray:
        return clip_to(self.norm, self.segments.values(corner_values(self.cells, values))).ravel()

    def add(self, values: np.ndarray, **line_kw) -> None:
        """Draw one more density (C,) or (C, 2) as a line."""
        self.line = self.ax.plot(self.segments.theta.ravel(), self._y(values), lw=1.2, **line_kw)[0]

    def update(self, values: np.ndarray | None = None, title: str | None = None, points: np.ndarray | None = None,
               masses: np.ndarray | None = None) -> None:
        """Replace the last line's density (the first call draws it), the point masses, the title.

        Point masses (m, 2) are circles on the theta axis whose area is proportional to mass.
        """
        if values is not None:
            if self.line is None:
                self.add(values)
            else:
                self.line.set_ydata(self._y(values))
        if points is not None:
            if self.markers is None:
                self.markers = self.mark(points, masses)
            else:
                theta = np.arctan2(points[:, 1], points[:, 0])
                self.markers.set_offsets(np.column_stack([theta, np.zeros(len(theta))]))
                self.markers.set_sizes(marker_sizes(len(points), masses))
        if title is not None:
            self._title.set_text(title)

    def mark(self, points: np.ndarray, masses: np.ndarray | None = None, color: Any = None) -> PathCollection:
        """Draw point masses (m, 2) as circles on the theta axis, area proportional to mass (another set)."""
        theta = np.arctan2(points[:, 1], points[:, 0])
        style = {**ATOM_STYLE, **({"edgecolors": color} if color is not None else {})}
        return self.ax.scatter(theta, np.zeros(len(theta)), s=marker_sizes(len(points), masses), clip_on=False,
                               zorder=3, transform=self.ax.get_xaxis_transform(), **style)  # y in axes units


def label_masses(ax, points: np.ndarray, masses: np.ndarray) -> None:
    """Write each point mass's mass above its circle on the theta axis (``ax``'s bottom)."""
    for (x, y), m in zip(np.reshape(points, (-1, 2)), masses):
        ax.annotate(f"{m:.3g}", (np.arctan2(y, x), 0.0), xycoords=ax.get_xaxis_transform(), xytext=(0, 9),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8, color="red")


def circle_density(vertices: np.ndarray, cells: np.ndarray, values: np.ndarray | Sequence[np.ndarray], *,
                   times: Sequence[float] | None = None, log: bool = False, points: np.ndarray | None = None,
                   masses: np.ndarray | None = None, atoms: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
                   title: str | None = None, vmin: float | None = None, vmax: float | None = None) -> Figure:
    """A density on S^1 against theta in [-pi, pi), or several (one per time, coloured by time).

    Parameters
    ----------
    vertices, cells
        (V, 2) mesh vertices on the unit circle, (C, 2) segments.
    values
        One density, (C,) cell averages or (C, 2) vertex values; with ``times``, one such
        density per time.
    times
        Labels of several densities (their times).
    log
        Logarithmic density axis.
    points, masses
        Optional point masses (m, 2) drawn as circles on the theta axis, area proportional to mass.
    atoms
        With ``times``: the point masses (positions (m, 2), masses (m,)) of each time, drawn
        like ``points`` in the colour of that time's line; the legend gives each time's atom
        mass and the circles' meaning, and the atoms of the last time are labelled with their masses.
    title
        Figure title.
    vmin, vmax
        Limits of the density axis (default: the values'; see
        :func:`meanfield.plotting.style.color_norm`).
    """
    series = [np.asarray(values)] if times is None else [np.asarray(v) for v in values]
    norm = color_norm(np.concatenate([np.ravel(v) for v in series]), log=log, vmin=vmin, vmax=vmax)
    lines = CircleLines(circle_segments(vertices, cells), cells, norm, title=title)
    if times is None:
        lines.add(series[0])
    else:
        cmap = colormaps["viridis"]
        for k, (t, v) in enumerate(zip(times, series)):
            color = cmap(k / max(len(series) - 1, 1))
            held = float(np.sum(atoms[k][1])) if atoms is not None else 0.0
            lines.add(v, color=color, label=f"t = {t:.3g}" + (f", atoms hold {held:.3g}" if held > 0 else ""))
            if atoms is not None:
                lines.mark(np.asarray(atoms[k][0], float), atoms[k][1], color=color)
        if atoms is not None and any(len(m) for _, m in atoms):
            lines.ax.scatter([], [], s=marker_sizes(1, None) / 4, label="atom (circle area \N{PROPORTIONAL TO} mass)",
                             **ATOM_STYLE)
            label_masses(lines.ax, np.asarray(atoms[-1][0], float), np.asarray(atoms[-1][1], float))
        lines.ax.legend(fontsize=8)
    if points is not None:
        lines.update(points=np.asarray(points, float), masses=masses)
    return lines.figure


def circle_spacetime(vertices: np.ndarray, cells: np.ndarray, times: np.ndarray, densities: np.ndarray, *,
                     log: bool = False, cmap: str = "viridis",
                     atoms: Sequence[tuple[np.ndarray, np.ndarray]] | None = None, title: str | None = None,
                     vmin: float | None = None, vmax: float | None = None, dpi: float = 100.0) -> Figure:
    """The density of a whole run on S^1 as an image: theta across, time up.

    With more cells than the image has room for at ``dpi`` (one column per
    :data:`PIXELS_PER_COLUMN` pixels), the cells are max-pooled into columns
    (:func:`pooled_columns`, said on the colour bar): a cluster one cell wide stays visible
    instead of falling between pixels.

    Parameters
    ----------
    vertices, cells
        (V, 2) mesh vertices, (C, 2) segments.
    times
        (T,) output times (any spacing: each row spans half-way to its neighbours).
    densities
        (T, C) cell averages.
    log, cmap, title
        Colour scale, colour map, figure title.
    vmin, vmax
        Limits of the colour scale (default: the densities').
    atoms
        The point masses (positions (m, 2), masses (m,)) of each output, drawn at (theta, t) as
        circles of area ``SPACETIME_ATOM_SCALE`` x mass (their tracks).
    dpi
        The resolution the figure will be saved at (sets the number of columns).
    """
    seg = circle_segments(vertices, cells)
    times = np.asarray(times, float)
    if len(times) > 1:
        mid = 0.5 * (times[1:] + times[:-1])
        t_edges = np.concatenate([[2 * times[0] - mid[0]], mid, [2 * times[-1] - mid[-1]]])
    else:
        t_edges = times[0] + np.array([-0.5, 0.5])
    norm = color_norm(densities, log=log, vmin=vmin, vmax=vmax)
    columns = int(SPACETIME_SIZE[0] * dpi / PIXELS_PER_COLUMN)
    label = density_label(S1)
    if len(seg.index) > columns:
        theta_edges, values = pooled_columns(seg, densities, columns)
        label += f"\n(each column the max of its {len(cells) / columns:.2g} cells)"
    else:
        theta_edges, values = seg.edges(), np.asarray(densities, float)[:, seg.index]
    fig = Figure(figsize=SPACETIME_SIZE, dpi=dpi, layout="constrained")
    ax = fig.subplots()
    image = ax.pcolormesh(theta_edges, t_edges, clip_to(norm, values), norm=norm, cmap=cmap, shading="flat",
                          rasterized=True)
    fig.colorbar(image, ax=ax, label=label)
    if atoms is not None:
        points = np.concatenate([np.reshape(p, (-1, 2)) for p, _ in atoms])
        masses = np.concatenate([np.ravel(m) for _, m in atoms])
        t = np.repeat(times, [len(m) for _, m in atoms])
        ax.scatter(np.arctan2(points[:, 1], points[:, 0]), t, s=SPACETIME_ATOM_SCALE * masses, zorder=3, **ATOM_STYLE)
    theta_axis(ax)
    ax.set(ylabel="t", title=title or "")
    return fig
