"""Maps of S^2: a density on the mesh triangles and/or marked points, in one or more projections.

A density is given per cell, shape (cells,) (cell averages: one colour per triangle), or per
cell vertex, shape (cells, 3) (DG1: the value at each vertex of each triangle, in the order of
``cells``; discontinuous across cells: Gouraud shading inside each triangle).  Points (tokens,
cluster peaks, point masses) are drawn as markers whose area is proportional to their mass.

:class:`SphereMaps` owns one :class:`matplotlib.figure.Figure` with a panel per projection
and can redraw it for another frame (:meth:`SphereMaps.update`), which is how movies are made.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import Collection, PathCollection
from matplotlib.colorbar import Colorbar
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patheffects import withStroke
from matplotlib.tri import Triangulation

from ..sphere import subsample
from ..spheres import S2
from .data import corner_values
from .projections import MapTriangles, Mollweide, Orthographic, Projection, graticule
from .style import (
    ATOM_STYLE,
    COLOURED_TOKEN_STYLE,
    TOKEN_DENSITY_LABEL,
    TOKEN_SIZE,
    TOKEN_STYLE,
    MarkerStyle,
    clip_to,
    color_norm,
    density_label,
    marker_sizes,
)

View = str | Projection
VIEWS = ("mollweide", "orthographic")
#: :func:`token_density` counts tokens in caps that hold about this many of n uniform tokens.
TOKENS_PER_CAP = 20


def densest_direction(vertices: np.ndarray, cells: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Unit vector to the centroid of the cell with the largest mean density."""
    c = int(np.argmax(corner_values(cells, values).mean(axis=1)))
    centroid = vertices[cells[c]].mean(axis=0)
    return centroid / np.linalg.norm(centroid)


def densest_point(points: np.ndarray, radius: float = 0.2, candidates: int = 500) -> np.ndarray:
    """The point (among at most ``candidates``) with the most points within angle ``radius``."""
    probe = points[:: max(1, len(points) // candidates)]
    counts = (probe @ points.T > np.cos(radius)).sum(axis=1)
    return probe[int(np.argmax(counts))]


def make_projections(views: Sequence[View], center: np.ndarray | None,
                     central_longitude: float = 0.0) -> list[Projection]:
    """Projection objects for view names ("mollweide", "orthographic" about ``center``) or objects."""
    out: list[Projection] = []
    for v in views:
        if v == "mollweide":
            out.append(Mollweide(central_longitude))
        elif v == "orthographic":
            out.append(Orthographic(np.array([0.0, 0.0, 1.0]) if center is None else center))
        elif isinstance(v, str):
            raise ValueError(f"unknown view {v!r}: use one of {VIEWS} or a Projection")
        else:
            out.append(v)
    return out


class MapPanel:
    """One projection's axes: the density (if any) on its map triangles, and markers."""

    def __init__(self, ax: Axes, projection: Projection, mesh: tuple[np.ndarray, np.ndarray] | None) -> None:
        self.ax, self.projection = ax, projection
        self.triangles: MapTriangles | None = projection.triangles(*mesh) if mesh is not None else None
        self.density: Collection | None = None
        self.markers: PathCollection | None = None
        for line in graticule():
            xy = projection.lines(line)
            ax.plot(xy[:, 0], xy[:, 1], color="0.5", lw=0.3, alpha=0.6, zorder=2)
        outline = projection.outline()
        ax.plot(outline[:, 0], outline[:, 1], color="k", lw=0.8, zorder=2)
        for x, y, text, side in getattr(projection, "labels", list)():  # a map with a graticule's labels
            ax.annotate(text, (x, y), xytext=(0, -6) if side == "center" else (-3, 0), textcoords="offset points",
                        ha=side, va="top" if side == "center" else "center", fontsize=7, color="0.15", zorder=4,
                        annotation_clip=False, path_effects=[withStroke(linewidth=2, foreground="white")])
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title(projection.title, fontsize=9)

    def draw_density(self, cv: np.ndarray, norm: Normalize, cmap: str, gouraud: bool) -> Collection:
        """Draw (or redraw) the density given by (cells, 3) vertex values ``cv``."""
        t = self.triangles
        assert t is not None, "a density is drawn only on a panel made with the mesh (SphereMaps.update checks)"
        values = clip_to(norm, t.pieces.values(cv))
        if self.density is None:
            tri = Triangulation(t.xy[..., 0].ravel(), t.xy[..., 1].ravel(), np.arange(3 * len(t.xy)).reshape(-1, 3))
            if gouraud:
                self.density = self.ax.tripcolor(tri, values.ravel(), shading="gouraud", norm=norm, cmap=cmap)
            else:  # no antialiasing: it leaves seams between triangles
                self.density = self.ax.tripcolor(tri, facecolors=values.mean(axis=1), norm=norm, cmap=cmap,
                                                 antialiased=False)
        else:
            self.density.set_array(values.ravel() if gouraud else values.mean(axis=1))
        return self.density

    def draw_markers(self, points: np.ndarray, sizes: np.ndarray, style: MarkerStyle,
                     values: np.ndarray | None = None, norm: Normalize | None = None, cmap: str = "viridis") -> None:
        """Draw (or move) markers at ``points``; with ``values``, coloured by them on ``norm``."""
        xy, visible = self.projection.points(points)
        if self.markers is None:
            if values is None:
                self.markers = self.ax.scatter(xy[visible, 0], xy[visible, 1], s=sizes[visible], zorder=3, **style)
            else:
                shown = clip_to(norm, values[visible]) if norm else values[visible]
                self.markers = self.ax.scatter(xy[visible, 0], xy[visible, 1], s=sizes[visible], c=shown, norm=norm,
                                               cmap=cmap, zorder=3, **style)
        else:
            self.markers.set_offsets(xy[visible])
            self.markers.set_sizes(sizes[visible])
            if values is not None:
                self.markers.set_array(clip_to(norm, values[visible]) if norm else values[visible])


class SphereMaps:
    """A figure with one panel per projection showing a density on a mesh and/or points.

    Parameters
    ----------
    views
        Projection objects, one panel each (:func:`make_projections` builds them from names).
    mesh
        (vertices (V, 3), cells (C, 3)) when a density is drawn.
    norm
        The colour scale of the density (:func:`meanfield.plotting.style.color_norm`); keep
        one for all frames of a movie (default: the first density's range).
    cmap, colorbar_label
        Colour map and the colour bar's label.
    shading
        "flat" or "gouraud"; default: flat for cell averages, Gouraud for vertex data.
    markers
        "atoms" (open circles, area ``ATOM_SCALE * mass``) or "tokens" (small dots, coloured by
        the tokens' density around them when :meth:`update` is given it, on ``norm``).

    Examples
    --------
    A movie frame by frame, on one colour scale::

        maps = SphereMaps(make_projections(VIEWS, center), mesh=(vertices, cells), norm=color_norm(densities))
        write_movie(maps.figure, lambda i: maps.update(densities[i], title=f"t = {times[i]:g}"),
                    range(len(times)), "density")
    """

    def __init__(self, views: Sequence[Projection], *, mesh: tuple[np.ndarray, np.ndarray] | None = None,
                 norm: Normalize | None = None, cmap: str = "viridis", shading: str | None = None,
                 markers: str = "atoms", colorbar_label: str = density_label(S2)) -> None:
        widths = [2.0 if isinstance(p, Mollweide) else 1.0 for p in views]
        self.figure = Figure(figsize=(3.3 * sum(widths) + (1.3 if mesh is not None else 0.3), 3.6),
                             layout="constrained")
        axes = self.figure.subplots(1, len(views), width_ratios=widths, squeeze=False)[0]
        self.panels = [MapPanel(ax, p, mesh) for ax, p in zip(axes, views)]
        self.mesh, self.norm, self.cmap, self.shading = mesh, norm, cmap, shading
        self.markers, self.colorbar_label = markers, colorbar_label
        self.colorbar: Colorbar | None = None
        self._title = self.figure.suptitle("")

    def update(self, values: np.ndarray | None = None, points: np.ndarray | None = None,
               masses: np.ndarray | None = None, title: str | None = None,
               densities: np.ndarray | None = None) -> None:
        """Draw a density (per cell or per cell vertex), points (m, 3) with optional masses, a title;
        tokens coloured by their ``densities`` (m,) (:func:`token_density`)."""
        if values is not None:
            if self.mesh is None:
                raise ValueError("a density needs the mesh: SphereMaps(..., mesh=(vertices, cells))")
            cv = corner_values(self.mesh[1], values)
            if self.norm is None:
                self.norm = color_norm(cv)
            gouraud = self.shading == "gouraud" or (self.shading is None and np.ndim(values) == 2)
            artists = [p.draw_density(cv, self.norm, self.cmap, gouraud) for p in self.panels]
            if self.colorbar is None:
                self.colorbar = self.figure.colorbar(artists[0], ax=[p.ax for p in self.panels], shrink=0.8,
                                                     label=self.colorbar_label)
        if points is not None:
            atoms = self.markers == "atoms"
            sizes = marker_sizes(len(points), masses) if atoms else np.full(len(points), TOKEN_SIZE)
            colours = None if atoms else densities
            if colours is not None and self.norm is None:
                self.norm = color_norm(colours, log=True)
            style = ATOM_STYLE if atoms else TOKEN_STYLE if colours is None else COLOURED_TOKEN_STYLE
            for p in self.panels:
                p.draw_markers(np.asarray(points, float), sizes, style, colours,
                               None if colours is None else self.norm, self.cmap)
            drawn = self.panels[0].markers
            if colours is not None and self.colorbar is None and drawn is not None:
                self.colorbar = self.figure.colorbar(drawn, ax=[p.ax for p in self.panels], shrink=0.8,
                                                     label=TOKEN_DENSITY_LABEL)
        if title is not None:
            self._title.set_text(title)


def sphere_map(vertices: np.ndarray, cells: np.ndarray, values: np.ndarray, *, views: Sequence[View] = VIEWS,
               center: np.ndarray | None = None, central_longitude: float = 0.0, log: bool = False,
               vmin: float | None = None, vmax: float | None = None, cmap: str = "viridis",
               shading: str | None = None, points: np.ndarray | None = None, masses: np.ndarray | None = None,
               title: str | None = None, limits: dict[str, float] | None = None) -> Figure:
    """A density on S^2 as a Mollweide map and an orthographic view (tripcolor on the mesh triangles).

    Parameters
    ----------
    vertices, cells
        (V, 3) mesh vertices on the unit sphere, (C, 3) triangles.
    values
        (C,) cell averages or (C, 3) values at each cell's vertices (DG1).
    views
        Projections or their names, one panel each.
    center
        Direction the orthographic view looks at; default: the densest cell.
    central_longitude
        Central meridian of the Mollweide map, degrees.
    log, vmin, vmax, cmap
        Colour scale (see :func:`meanfield.plotting.style.color_norm`) and colour map.
    shading
        "flat" or "gouraud" (default: flat for cell averages, Gouraud for vertex data).
    points, masses
        Optional point masses (m, 3) drawn as circles of area proportional to mass.
    title
        Figure title.
    limits
        ``floor`` and ``least_top`` of the colour scale (:func:`meanfield.plotting.style.color_norm`;
        a hybrid run's :func:`meanfield.plotting.focus.colour_limits`).
    """
    center = densest_direction(vertices, cells, values) if center is None else center
    maps = SphereMaps(make_projections(views, center, central_longitude), mesh=(vertices, cells),
                      norm=color_norm(corner_values(cells, values), log=log, vmin=vmin, vmax=vmax, **(limits or {})),
                      cmap=cmap, shading=shading)
    maps.update(values, points, masses, title)
    return maps.figure


def token_radius(n: int) -> float:
    """The cap radius (radians) over which :func:`token_density` counts: about
    :data:`TOKENS_PER_CAP` of n uniform tokens in it, between 0.02 and 0.3 rad."""
    return float(np.clip(np.arccos(1.0 - 2.0 * TOKENS_PER_CAP / n), 0.02, 0.3))


def token_density(points: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The density of n tokens (n, 3) around the points ``at`` (m, 3), fraction per steradian:
    the fraction of the tokens in the cap of radius :func:`token_radius` about each, over the
    cap's area ``2 pi (1 - cos r)``."""
    from scipy.spatial import cKDTree

    points = np.asarray(points, float)
    r = token_radius(len(points))
    counts = cKDTree(points).query_ball_point(np.asarray(at, float), 2.0 * np.sin(r / 2.0), return_length=True)
    return np.asarray(counts, float) / (len(points) * 2.0 * np.pi * (1.0 - np.cos(r)))


def token_map(points: np.ndarray, *, views: Sequence[View] = VIEWS, center: np.ndarray | None = None,
              central_longitude: float = 0.0, max_points: int = 4000, title: str | None = None,
              norm: Normalize | None = None) -> Figure:
    """Tokens (n, 3) on S^2 as dots on a Mollweide map and an orthographic view, coloured by the
    tokens' density around each (:func:`token_density`, of all n; log colour scale ``norm``,
    default the drawn tokens' range), so that a cluster of thousands of tokens shows its
    concentration instead of one black blot.

    At most ``max_points`` tokens are drawn (a fixed uniform subsample); the orthographic view
    looks at the densest token by default.
    """
    points = np.asarray(points, float)
    shown = subsample(points, max_points)
    center = densest_point(shown) if center is None else center
    maps = SphereMaps(make_projections(views, center, central_longitude), markers="tokens", norm=norm)
    maps.update(points=shown, title=title, densities=token_density(points, shown))
    return maps.figure
