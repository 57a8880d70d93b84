"""Pictures of a causal run: the density against token position, who clusters first, and the
attention map.

* :func:`position_images` (S^1): the density over (theta, s) at a few output times, one panel
  each, on one colour scale (a nearly uniform start on a log scale: a linear one of its own):
  the slices' densities stacked by position.
* :func:`position_clusters`: the number of clusters of each position against time (an image
  over (t, s), one colour per count) with the time at which each position's peak density
  first reaches ``factor`` times the uniform density: early positions lead when that curve
  rises with s.
* :func:`slice_maps` (S^2): Mollweide maps of a few positions' densities at one time.
* :func:`attention_figure`: the attention map a(t; s, s') (:mod:`meanfield.analysis.attention_maps`)
  at a few times, relative to the share an s-independent density gives (1: s' gets its fair
  share; above 1: s draws more from s' than from the other positions before it).
* :func:`attending_figure`: whom chosen positions attend to, in absolute shares
  (:mod:`meanfield.analysis.attending`): over the source positions, and over the sphere's
  clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure

from ..spheres import S1, S2
from .circle import circle_segments, theta_axis
from .projections import Mollweide
from .sphere_maps import MapPanel
from .style import clip_to, color_norm, density_label

if TYPE_CHECKING:
    from ..analysis.attending import Attending

#: Peak density, in units of the uniform density, at which a position counts as clustered.
CLUSTERED_FACTOR = 10.0
#: On a log scale, a panel of :func:`position_images` whose densities lie within this factor
#: gets a linear scale of its own.
OWN_SCALE_SPAN = 10.0


def _edges(centres: np.ndarray, low: float | None = None, high: float | None = None) -> np.ndarray:
    """Cell edges half-way between ``centres`` (the ends at ``low``/``high`` when given)."""
    centres = np.asarray(centres, float)
    if len(centres) == 1:
        return np.array([low if low is not None else centres[0] - 0.5, high if high is not None else centres[0] + 0.5])
    mid = 0.5 * (centres[1:] + centres[:-1])
    first = low if low is not None else 2 * centres[0] - mid[0]
    last = high if high is not None else 2 * centres[-1] - mid[-1]
    return np.concatenate([[first], mid, [last]])


def position_images(vertices: np.ndarray, cells: np.ndarray, positions: np.ndarray, times: Sequence[float] | np.ndarray,
                    densities: np.ndarray, *, log: bool = False, vmin: float | None = None,
                    vmax: float | None = None, title: str | None = None, cmap: str = "viridis") -> Figure:
    """S^1: the density over (theta, s) at each of ``times`` (one panel each, one colour scale).

    On a log scale a panel whose densities lie within a factor :data:`OWN_SCALE_SPAN` (a nearly
    uniform start, which the shared scale shows in one colour) gets a linear scale of its own,
    with its own colour bar, so that its dependence on s shows (unless ``vmin``/``vmax`` fix the scale).

    Parameters
    ----------
    vertices, cells
        (V, 2) mesh vertices and (C, 2) segments.
    positions
        (M,) the slices' positions s_k.
    times
        The panels' times (for their titles).
    densities
        (len(times), M, C) each slice's cell averages at those times.
    """
    seg = circle_segments(vertices, cells)
    densities = np.asarray(densities, float)
    norm = color_norm(densities, log=log, vmin=vmin, vmax=vmax)
    own = [log and vmin is None and vmax is None and rho.min() > 0 and rho.max() < OWN_SCALE_SPAN * rho.min()
           for rho in densities]
    fig = Figure(figsize=(3.6 * len(times) + 1.2 + 1.0 * sum(own), 3.6), layout="constrained")
    axes = fig.subplots(1, len(times), squeeze=False, sharey=True)[0]
    s_edges = _edges(positions, 0.0, 1.0)
    shared = []
    for ax, t, rho, alone in zip(axes, times, densities, own):
        panel = Normalize(rho.min(), rho.max()) if alone else norm
        image = ax.pcolormesh(seg.edges(), s_edges, clip_to(panel, rho[:, seg.index]), norm=panel, shading="flat",
                              rasterized=True, cmap=cmap)
        theta_axis(ax)
        ax.set_title(f"t = {t:g}" + (" (own linear scale)" if alone else ""), fontsize=10)
        if alone:
            fig.colorbar(image, ax=ax, label=density_label(S1))
        else:
            shared.append((ax, image))
    axes[0].set_ylabel("token position s")
    if shared:
        fig.colorbar(shared[-1][1], ax=[ax for ax, _ in shared], label=density_label(S1))
    if title:
        fig.suptitle(title)
    return fig


def first_reaching(times: np.ndarray, values: np.ndarray, level: float) -> np.ndarray:
    """For each column of ``values`` (T, M), the first time it reaches ``level`` (linear between
    outputs; ``nan`` where it never does)."""
    times, values = np.asarray(times, float), np.asarray(values, float)
    out = np.full(values.shape[1], np.nan)
    for k in range(values.shape[1]):
        above = np.flatnonzero(values[:, k] >= level)
        if not len(above):
            continue
        i = above[0]
        if i == 0:
            out[k] = times[0]
        else:
            a, b = values[i - 1, k], values[i, k]
            out[k] = times[i - 1] + (level - a) / (b - a) * (times[i] - times[i - 1])
    return out


def position_clusters(times: np.ndarray, positions: np.ndarray, counts: np.ndarray, rho_max: np.ndarray | None,
                      uniform: float, *, factor: float = CLUSTERED_FACTOR, title: str | None = None) -> Figure:
    """The number of clusters of each position against time, and when each position clusters.

    Parameters
    ----------
    times, positions
        (T,) output times and (M,) slice positions.
    counts
        (T, M) each slice's number of clusters (:func:`meanfield.analysis.clusters.analyse_positions`):
        one colour per count, so that states (four bumps, three clusters, ...) stand apart.
    rho_max
        (T, M) each slice's peak density (``None``: no clustering curve).
    uniform
        The uniform density 1/|S|.
    factor
        A position counts as clustered once its peak reaches ``factor * uniform``.
    """
    from matplotlib import colormaps
    from matplotlib.colors import BoundaryNorm, ListedColormap

    counts = np.asarray(counts, int)
    low, top = (int(counts.min()), int(counts.max())) if counts.size else (0, 0)
    palette = colormaps["tab10"]
    cmap = ListedColormap([palette(k % 10) for k in range(low, top + 1)])
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    image = ax.pcolormesh(_edges(times), _edges(positions, 0.0, 1.0), counts.T, shading="flat", cmap=cmap,
                          norm=BoundaryNorm(np.arange(low, top + 2) - 0.5, top - low + 1), rasterized=True)
    bar = fig.colorbar(image, ax=ax, label="number of clusters of the position")
    bar.set_ticks(range(low, top + 1))
    if rho_max is not None:
        reached = first_reaching(times, rho_max, factor * uniform)
        ax.plot(reached, positions, color="k", lw=2.0, label=f"peak density reaches {factor:g} x uniform")
        ax.legend(loc="upper right", fontsize=8)
    ax.set(xlabel="t", ylabel="token position s", title=title or "")
    return fig


def slice_maps(vertices: np.ndarray, cells: np.ndarray, positions: np.ndarray, densities: np.ndarray,
               picks: Sequence[int], *, log: bool = False, vmin: float | None = None, vmax: float | None = None,
               title: str | None = None) -> Figure:
    """S^2: Mollweide maps of the densities of the slices ``picks`` at one time (one colour scale).

    Parameters
    ----------
    vertices, cells
        (V, 3) mesh vertices and (C, 3) triangles.
    positions
        (M,) slice positions.
    densities
        (M, C) cell averages or (M, C, 3) vertex values of every slice at that time.
    picks
        The slices to draw.
    """
    from .data import corner_values

    corners = [corner_values(cells, densities[k]) for k in picks]
    norm = color_norm(np.array(corners), log=log, vmin=vmin, vmax=vmax)
    fig = Figure(figsize=(3.6 * len(picks) + 1.2, 2.4), layout="constrained")
    axes = fig.subplots(1, len(picks), squeeze=False)[0]
    artist = None
    for ax, k, cv in zip(axes, picks, corners):
        panel = MapPanel(ax, Mollweide(), (vertices, cells))
        artist = panel.draw_density(cv, norm, "viridis", gouraud=np.ndim(densities[k]) == 2)
        ax.set_title(f"s = {positions[k]:.3g}", fontsize=10)
    if artist is not None:
        fig.colorbar(artist, ax=list(axes), shrink=0.8, label=density_label(S2))
    if title:
        fig.suptitle(title)
    return fig


def fair_shares(slices: int) -> np.ndarray:
    """(M, M) the attention map of an s-independent density: ``c_kj / (k + 1/2)``."""
    weights = np.tril(np.ones((slices, slices)), -1) + 0.5 * np.eye(slices)
    return weights / weights.sum(axis=1, keepdims=True)


def attention_figure(maps: Sequence[tuple[float, np.ndarray]], positions: np.ndarray, *,
                     title: str | None = None) -> Figure:
    """The attention maps a(t; s, s') at a few times, relative to :func:`fair_shares`.

    Parameters
    ----------
    maps
        (t, (M, M) attention map) pairs (:func:`meanfield.analysis.attention_maps.attention_map`).
    positions
        (M,) slice positions.
    """
    fair = fair_shares(len(positions))
    relative = [np.where(fair > 0, a / np.where(fair > 0, fair, 1.0), np.nan) for _, a in maps]
    spread = max(float(np.nanmax(np.abs(r - 1.0))) for r in relative) if relative else 0.0
    spread = max(spread, 1e-3)
    norm = TwoSlopeNorm(1.0, 1.0 - spread, 1.0 + spread)
    fig = Figure(figsize=(3.6 * len(maps) + 1.6, 4.4), layout="constrained")
    axes = fig.subplots(1, len(maps), squeeze=False)[0]
    edges = _edges(positions, 0.0, 1.0)
    image = None
    for ax, (t, _), r in zip(axes, maps, relative):
        image = ax.pcolormesh(edges, edges, np.ma.masked_invalid(r), norm=norm, cmap="RdBu_r", shading="flat")
        ax.set(xlabel="attended position s'", title=f"t = {t:g}", aspect="equal")
    axes[0].set_ylabel("attending position s")
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.85, label="share / share if rho were s-independent")
    fig.suptitle(title or "what each position draws from the positions before it")
    return fig


def _where(point: np.ndarray) -> str:
    """A cluster peak's place: theta on S^1, lon/lat on S^2 (degrees)."""
    if len(point) == 2:
        return f"\N{GREEK SMALL LETTER THETA} = {np.arctan2(point[1], point[0]):.2f}"
    return f"{np.degrees(np.arctan2(point[1], point[0])):.0f}\N{DEGREE SIGN}, " \
           f"{np.degrees(np.arcsin(np.clip(point[2], -1.0, 1.0))):.0f}\N{DEGREE SIGN}"


def attending_figure(items: Sequence[Attending], *, title: str | None = None) -> Figure:
    """Whom chosen positions attend to (:func:`meanfield.analysis.attending.attending`): one
    row per attending position; left, the share of its attention that each source position s'
    gets (one line per time); right, the shares of the sphere's clusters (one stacked bar per
    time, each cluster labelled with its id and peak, grey: no cluster).
    """
    from matplotlib import colormaps

    attending = list(dict.fromkeys(item.position for item in items))
    times = list(dict.fromkeys(item.t for item in items))
    fig = Figure(figsize=(11.0, 3.4 * len(attending) + 0.4), layout="constrained")
    axes = fig.subplots(len(attending), 2, squeeze=False)
    colours = colormaps["viridis"]
    palette = colormaps["tab10"]
    for (left, right), s in zip(axes, attending):
        mine = [item for item in items if item.position == s]
        for item in mine:
            colour = colours(times.index(item.t) / max(len(times) - 1, 1))
            upto = item.positions <= item.position
            left.plot(item.positions[upto], item.by_position[upto], ".-", color=colour, label=f"t = {item.t:g}")
        left.set(xlabel="source position s'", ylabel="share of the attention", xlim=(0.0, 1.0),
                 title=f"position s = {s:.3g}: over the positions before it")
        left.set_ylim(bottom=0.0)
        left.legend(fontsize=8)
        left.grid(alpha=0.3)
        for row, item in enumerate(mine):
            start = 0.0
            for cluster, point, share in zip(item.cluster_ids, item.cluster_points, item.by_cluster):
                right.barh(row, share, left=start, color=palette(int(cluster) % 10), edgecolor="w")
                if share > 0.08:
                    right.text(start + share / 2, row, f"#{int(cluster)}\n{_where(point)}\n{share:.0%}",
                               ha="center", va="center", fontsize=7)
                start += share
            if item.outside > 0:
                right.barh(row, item.outside, left=start, color="0.8", edgecolor="w")
        right.set_yticks(range(len(mine)), [f"t = {item.t:g}" for item in mine])
        right.set(xlim=(0.0, 1.0), xlabel="share of the attention",
                  title="over the clusters (#id as in clusters.csv; grey: no cluster)")
        right.invert_yaxis()
    fig.suptitle(title or "whom a position attends to")
    return fig
