"""Map projections of the unit sphere S^2 for mesh data, points and lines (pure numpy).

* :class:`Mollweide`: the equal-area world map, an ellipse of semi-axes 2 sqrt 2 and sqrt 2
  (area 4 pi, the sphere's).  Mesh triangles that cross the antimeridian are cut along it and
  drawn on both edges of the map; triangles around a pole are split at the pole.
* :class:`Orthographic`: the hemisphere facing a viewer looking at ``center`` from outside
  (the unit disk, north up); triangles behind the limb are dropped, those across it clipped.

Both map mesh triangles to :class:`MapTriangles` (projected pieces with their source cells),
points to 2-D positions with a visibility mask, and polylines to 2-D lines with NaN breaks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .geometry import Pieces, clip, is_pole, signed_distances, split_at_poles, split_by_plane

SQRT2 = np.sqrt(2.0)


@dataclass(frozen=True)
class MapTriangles:
    """Mesh pieces on a map: (n, 3, 2) corner positions ``xy`` of the (n,) ``pieces``."""

    xy: np.ndarray
    pieces: Pieces

    def signed_areas(self) -> np.ndarray:
        """(n,) signed areas on the map (> 0: counter-clockwise, as seen from outside the sphere)."""
        a, b, c = self.xy[:, 0], self.xy[:, 1], self.xy[:, 2]
        return 0.5 * ((b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0]))


class Projection(Protocol):
    """What a map view needs from a projection."""

    title: str

    def triangles(self, vertices: np.ndarray, cells: np.ndarray) -> MapTriangles: ...

    def points(self, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def lines(self, xyz: np.ndarray) -> np.ndarray: ...

    def outline(self) -> np.ndarray: ...


def lonlat(xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Longitude in [-pi, pi] and latitude in [-pi/2, pi/2] (radians) of points (..., 3)."""
    r = np.linalg.norm(xyz, axis=-1)
    return np.arctan2(xyz[..., 1], xyz[..., 0]), np.arcsin(np.clip(xyz[..., 2] / r, -1.0, 1.0))


def mollweide(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Mollweide coordinates (..., 2) of longitudes and latitudes in radians (unit sphere).

    The auxiliary angle solves ``2 t + sin 2t = pi sin(lat)``; its left side increases on
    [-pi/2, pi/2], so bisection converges everywhere (Newton stalls at the poles).
    """
    target = np.pi * np.sin(lat)
    lo, hi = np.full_like(target, -np.pi / 2), np.full_like(target, np.pi / 2)
    for _ in range(55):
        mid = 0.5 * (lo + hi)
        below = 2 * mid + np.sin(2 * mid) < target
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    t = 0.5 * (lo + hi)
    return np.stack([2 * SQRT2 / np.pi * lon * np.cos(t), SQRT2 * np.sin(t)], axis=-1)


def _rotation_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class Mollweide:
    """Equal-area Mollweide map centred on the meridian ``central_longitude`` (degrees)."""

    def __init__(self, central_longitude: float = 0.0) -> None:
        self.central_longitude = float(central_longitude)
        self.title = "Mollweide (equal area)"
        self._rotation = _rotation_z(-np.radians(self.central_longitude))

    def _frame(self, xyz: np.ndarray) -> np.ndarray:
        return xyz @ self._rotation.T

    def triangles(self, vertices: np.ndarray, cells: np.ndarray) -> MapTriangles:
        pieces = split_at_poles(Pieces.from_mesh(self._frame(vertices), cells))
        y_axis = np.array([0.0, 1.0, 0.0])
        d = signed_distances(pieces, y_axis)
        c = pieces.corners
        # x where edges with a sign change of y cross y = 0; the antimeridian is the half x < 0
        crossing_x = np.full(d.shape, np.inf)
        for k in range(3):
            a, b = k, (k + 1) % 3
            change = d[:, a] * d[:, b] < 0
            s = d[change, a] / (d[change, a] - d[change, b])
            crossing_x[change, k] = c[change, a, 0] + s * (c[change, b, 0] - c[change, a, 0])
        pieces = split_by_plane(pieces, y_axis, crossing_x.min(axis=1) < 0)
        lon, lat = self._corner_lonlat(pieces)
        return MapTriangles(mollweide(lon, lat), pieces)

    @staticmethod
    def _corner_lonlat(pieces: Pieces) -> tuple[np.ndarray, np.ndarray]:
        """Longitudes continuous on each piece: corners on the antimeridian take the side of their
        piece (+pi or -pi), a corner at a pole the mean longitude of the piece's other corners."""
        c = pieces.corners
        lon, lat = lonlat(c)
        on_cut = (signed_distances(pieces, np.array([0.0, 1.0, 0.0])) == 0) & (c[..., 0] < 0)
        side = np.where(c[..., 1].sum(axis=1) < 0, -np.pi, np.pi)
        lon = np.where(on_cut, side[:, None], lon)
        pole = is_pole(c)
        others = np.where(pole, 0.0, lon).sum(axis=1) / np.maximum((~pole).sum(axis=1), 1)
        return np.where(pole, others[:, None], lon), lat

    def points(self, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return mollweide(*lonlat(self._frame(xyz))), np.ones(len(xyz), dtype=bool)

    def lines(self, xyz: np.ndarray) -> np.ndarray:
        lon, lat = lonlat(self._frame(xyz))
        xy = mollweide(lon, lat)
        jump = np.flatnonzero(np.abs(np.diff(lon)) > np.pi)  # the line crosses the map's edge there
        return np.insert(xy, jump + 1, np.nan, axis=0)

    def outline(self) -> np.ndarray:
        t = np.linspace(0, 2 * np.pi, 361)
        return np.stack([2 * SQRT2 * np.cos(t), SQRT2 * np.sin(t)], axis=1)

    def labels(self, step_lon: float = 60.0, step_lat: float = 30.0) -> list[tuple[float, float, str, str]]:
        """The graticule's labels ``(x, y, text, side)``: longitudes under the equator where the
        meridians of :func:`graticule` cross it, the other parallels' latitudes left of the map's edge (side: the
        text's alignment, "center" or "right")."""
        out = []
        for lon in np.arange(-180.0 + step_lon, 180.0, step_lon):
            shown = (lon - self.central_longitude + 180.0) % 360.0 - 180.0  # where it is on this map
            x, y = mollweide(np.radians(shown), np.zeros(()))
            out.append((float(x), float(y), degrees(lon, "E", "W"), "center"))
        for lat in np.arange(-90.0 + step_lat, 90.0, step_lat):
            if lat == 0:  # the equator carries the longitudes
                continue
            x, y = mollweide(np.radians(-180.0), np.radians(lat))
            out.append((float(x), float(y), degrees(lat, "N", "S"), "right"))
        return out


class Orthographic:
    """The hemisphere around the unit vector ``center`` seen from outside, the north pole up."""

    def __init__(self, center: np.ndarray) -> None:
        c = np.asarray(center, float)
        self.center = c / np.linalg.norm(c)
        east = np.cross([0.0, 0.0, 1.0], self.center)
        if np.linalg.norm(east) < 1e-9:  # looking at a pole: x to the right
            east = np.cross(self.center, np.cross([1.0, 0.0, 0.0], self.center))
        self.east = east / np.linalg.norm(east)
        self.north = np.cross(self.center, self.east)
        lon, lat = np.degrees(lonlat(self.center))
        self.title = (f"orthographic, centre lon {round(lon) + 0:d}\N{DEGREE SIGN} lat {round(lat) + 0:d}"
                      "\N{DEGREE SIGN}")

    def _project(self, xyz: np.ndarray) -> np.ndarray:
        unit = xyz / np.linalg.norm(xyz, axis=-1, keepdims=True)
        return np.stack([unit @ self.east, unit @ self.north], axis=-1)

    def triangles(self, vertices: np.ndarray, cells: np.ndarray) -> MapTriangles:
        pieces = clip(Pieces.from_mesh(vertices, cells), self.center)
        return MapTriangles(self._project(pieces.corners), pieces)

    def points(self, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._project(xyz), xyz @ self.center > 0

    def lines(self, xyz: np.ndarray) -> np.ndarray:
        xy = self._project(xyz)
        xy[xyz @ self.center < 0] = np.nan
        return xy

    def outline(self) -> np.ndarray:
        t = np.linspace(0, 2 * np.pi, 361)
        return np.stack([np.cos(t), np.sin(t)], axis=1)


def degrees(angle: float, positive: str, negative: str) -> str:
    """An angle in whole degrees with its hemisphere: ``60°E``, ``30°S``, ``0°``."""
    value = round(float(angle))
    return f"{abs(value)}\N{DEGREE SIGN}{positive if value > 0 else negative if value < 0 else ''}"


def graticule(step_lon: float = 60.0, step_lat: float = 30.0, samples: int = 181) -> list[np.ndarray]:
    """Meridians and parallels (degrees apart) as (samples, 3) polylines on the unit sphere."""
    out = []
    lat = np.radians(np.linspace(-90, 90, samples))
    for lon in np.radians(np.arange(-180.0, 180.0, step_lon)):
        out.append(np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=1))
    lon = np.radians(np.linspace(-180, 180, 2 * samples))
    for lat0 in np.radians(np.arange(-90.0 + step_lat, 90.0, step_lat)):
        out.append(np.stack([np.cos(lat0) * np.cos(lon), np.cos(lat0) * np.sin(lon), np.full_like(lon, np.sin(lat0))],
                            axis=1))
    return out
