"""Pictures of a causal run: the density against token position, who clusters first, and the
attention map.

* :func:`position_images` (S^1): the density over (theta, s) at a few output times, one panel
  each, on one colour scale: the slices' densities stacked by position.
* :func:`position_clusters`: the order parameter ``|mean|`` of each position against time (an
  image over (t, s)) with the time at which each position's peak density first reaches
  ``factor`` times the uniform density: early positions lead when that curve rises with s.
* :func:`slice_maps` (S^2): Mollweide maps of a few positions' densities at one time.
* :func:`attention_figure`: the attention map a(t; s, s') (:mod:`meanfield.analysis.causal`)
  at a few times, relative to the share an s-independent density gives (1: s' gets its fair
  share; above 1: s draws more from s' than from the other positions before it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from .circle import circle_segments, theta_axis
from .projections import Mollweide
from .sphere_maps import MapPanel
from .style import clip_to, color_norm, density_label

#: Peak density, in units of the uniform density, at which a position counts as clustered.
CLUSTERED_FACTOR = 10.0


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
                    vmax: float | None = None, title: str | None = None) -> Figure:
    """S^1: the density over (theta, s) at each of ``times`` (one panel each, one colour scale).

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
    fig = Figure(figsize=(3.6 * len(times) + 1.2, 3.6), layout="constrained")
    axes = fig.subplots(1, len(times), squeeze=False, sharey=True)[0]
    s_edges = _edges(positions, 0.0, 1.0)
    image = None
    for ax, t, rho in zip(axes, times, densities):
        image = ax.pcolormesh(seg.edges(), s_edges, clip_to(norm, rho[:, seg.index]), norm=norm, shading="flat",
                              rasterized=True)
        theta_axis(ax)
        ax.set_title(f"t = {t:g}", fontsize=10)
    axes[0].set_ylabel("token position s")
    if image is not None:
        fig.colorbar(image, ax=list(axes), label=density_label("S1"))
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


def position_clusters(times: np.ndarray, positions: np.ndarray, order: np.ndarray, rho_max: np.ndarray | None,
                      uniform: float, *, factor: float = CLUSTERED_FACTOR, title: str | None = None) -> Figure:
    """The order parameter of each position against time, and when each position clusters.

    Parameters
    ----------
    times, positions
        (T,) output times and (M,) slice positions.
    order
        (T, M) each slice's order parameter ``|mean|``.
    rho_max
        (T, M) each slice's peak density (``None``: no clustering curve).
    uniform
        The uniform density 1/|S|.
    factor
        A position counts as clustered once its peak reaches ``factor * uniform``.
    """
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    image = ax.pcolormesh(_edges(times), _edges(positions, 0.0, 1.0), np.asarray(order, float).T, shading="flat",
                          cmap="magma", rasterized=True)
    fig.colorbar(image, ax=ax, label="order parameter |mean| of the position")
    if rho_max is not None:
        reached = first_reaching(times, rho_max, factor * uniform)
        ax.plot(reached, positions, color="c", lw=2.0, label=f"peak density reaches {factor:g} x uniform")
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
        fig.colorbar(artist, ax=list(axes), shrink=0.8, label=density_label("S2"))
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
        (t, (M, M) attention map) pairs (:func:`meanfield.analysis.causal.attention_map`).
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
