"""Cutting mesh triangles for maps of the sphere: clipping by a plane, splitting at the poles.

Triangles are handled as :class:`Pieces`: corner positions on the *flat* mesh triangles (not
on the sphere; a map projects their directions), the barycentric coordinates of each corner
in the mesh cell it came from, and that cell's index.  Data linear on a flat cell (a cell
average, DG1 vertex values) is therefore carried exactly through every cut, and a movie
evaluates the same pieces for each frame (:meth:`Pieces.values`).

Cuts keep the orientation of the cells (counter-clockwise seen from outside stays so), and
pieces of zero area are dropped.  Pure numpy, no matplotlib.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TOL = 1e-12  # relative: a signed distance below TOL * |corner| counts as on the plane


def interpolate(bary: np.ndarray, index: np.ndarray, corner_values: np.ndarray) -> np.ndarray:
    """(n, k) values at points with barycentric coordinates ``bary`` (n, k, nv) in cells ``index``
    (n,), from (cells, nv) values at the cells' vertices."""
    return np.einsum("nkj,nj->nk", bary, corner_values[index])


@dataclass(frozen=True)
class Pieces:
    """Triangles cut from mesh cells.

    Attributes
    ----------
    corners
        (n, 3, 3) corner positions in R^3.
    bary
        (n, 3, 3) barycentric coordinates of each corner in its source cell's vertices.
    index
        (n,) the source cell of each piece.
    """

    corners: np.ndarray
    bary: np.ndarray
    index: np.ndarray

    @classmethod
    def from_mesh(cls, vertices: np.ndarray, cells: np.ndarray) -> Pieces:
        """One piece per triangle of the mesh, unchanged."""
        n = len(cells)
        return cls(vertices[cells].astype(float), np.broadcast_to(np.eye(3), (n, 3, 3)).copy(), np.arange(n))

    def __len__(self) -> int:
        return len(self.index)

    def select(self, mask: np.ndarray) -> Pieces:
        return Pieces(self.corners[mask], self.bary[mask], self.index[mask])

    def values(self, corner_values: np.ndarray) -> np.ndarray:
        """(n, 3) values at the piece corners from (cells, 3) values at the cells' vertices."""
        return interpolate(self.bary, self.index, corner_values)

    @staticmethod
    def concatenate(parts: list[Pieces]) -> Pieces:
        return Pieces(*(np.concatenate([getattr(p, a) for p in parts]) for a in ("corners", "bary", "index")))


def _lerp(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    return a + s[:, None] * (b - a)


def _rotate_corners(a: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Reorder the corners (axis 1) of each triangle by ``order`` (n, 3)."""
    return np.take_along_axis(a, order.reshape(order.shape + (1,) * (a.ndim - 2)), axis=1)


def _nondegenerate(p: Pieces) -> Pieces:
    c = p.corners
    area2 = np.linalg.norm(np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]), axis=1)
    scale = np.linalg.norm(c, axis=2).max(axis=1) ** 2
    return p.select(area2 > TOL * scale)


def signed_distances(pieces: Pieces, normal: np.ndarray) -> np.ndarray:
    """(n, 3) signed distances of the corners to the plane ``normal . x = 0``, snapped to 0 within TOL."""
    d = pieces.corners @ np.asarray(normal, float)
    return np.where(np.abs(d) <= TOL * np.linalg.norm(pieces.corners, axis=2), 0.0, d)


def clip(pieces: Pieces, normal: np.ndarray) -> Pieces:
    """The parts of the pieces on the side ``normal . x >= 0`` of a plane through the origin."""
    d = signed_distances(pieces, normal)
    outside = d < 0
    count = outside.sum(axis=1)
    parts = [pieces.select(count == 0)]
    rows = np.arange(3)
    for k in (1, 2):
        sel = np.flatnonzero(count == k)
        if not len(sel):
            continue
        # rotate each triangle cyclically (keeps its orientation) so that the lone vertex,
        # outside for k = 1 or inside for k = 2, comes first
        lone = np.argmax(outside[sel] if k == 1 else ~outside[sel], axis=1)
        order = (lone[:, None] + rows) % 3
        c, b, dd = (_rotate_corners(a[sel], order) for a in (pieces.corners, pieces.bary, d))
        s1 = dd[:, 0] / (dd[:, 0] - dd[:, 1])
        s2 = dd[:, 0] / (dd[:, 0] - dd[:, 2])
        p1c, p2c = _lerp(c[:, 0], c[:, 1], s1), _lerp(c[:, 0], c[:, 2], s2)
        p1b, p2b = _lerp(b[:, 0], b[:, 1], s1), _lerp(b[:, 0], b[:, 2], s2)
        if k == 1:  # the quad p1, v1, v2, p2 as two triangles
            tris = [((p1c, c[:, 1], c[:, 2]), (p1b, b[:, 1], b[:, 2])), ((p1c, c[:, 2], p2c), (p1b, b[:, 2], p2b))]
        else:
            tris = [((c[:, 0], p1c, p2c), (b[:, 0], p1b, p2b))]
        index = pieces.index[sel]
        parts += [Pieces(np.stack(tc, axis=1), np.stack(tb, axis=1), index) for tc, tb in tris]
    return _nondegenerate(Pieces.concatenate(parts))


def split_by_plane(pieces: Pieces, normal: np.ndarray, where: np.ndarray) -> Pieces:
    """Cut the pieces selected by the mask ``where`` along a plane; keep the others whole."""
    normal = np.asarray(normal, float)
    cut = pieces.select(where)
    return Pieces.concatenate([pieces.select(~where), clip(cut, normal), clip(cut, -normal)])


def is_pole(points: np.ndarray) -> np.ndarray:
    """Mask of the points on the z axis (x = y = 0 within TOL relative to |p|)."""
    return np.hypot(points[..., 0], points[..., 1]) <= TOL * np.linalg.norm(points, axis=-1)


def split_at_poles(pieces: Pieces) -> Pieces:
    """Split every piece whose spherical triangle contains a pole, not at a corner, into three
    pieces meeting at the pole (fan split; longitudes are then single-valued on each piece)."""
    for z in (1.0, -1.0):
        c = pieces.corners
        e1, e2 = c[:, 1] - c[:, 0], c[:, 2] - c[:, 0]
        # the ray t (0, 0, z), t > 0, against each flat triangle (Moller-Trumbore)
        direction = np.array([0.0, 0.0, z])
        p = np.cross(direction, e2)
        det = np.einsum("ij,ij->i", e1, p)
        ok = np.abs(det) > TOL * np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1)
        inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
        tvec = -c[:, 0]
        u = np.einsum("ij,ij->i", tvec, p) * inv
        q = np.cross(tvec, e1)
        v = (q @ direction) * inv
        t = np.einsum("ij,ij->i", e2, q) * inv
        hit = ok & (u >= -TOL) & (v >= -TOL) & (u + v <= 1 + TOL) & (t > 0)
        hit &= ~(is_pole(c) & (np.sign(c[..., 2]) == z)).any(axis=1)
        if not hit.any():
            continue
        sel = pieces.select(hit)
        w = np.stack([1 - u[hit] - v[hit], u[hit], v[hit]], axis=1)  # barycentrics of the pole point
        pole_c = np.einsum("nk,nkj->nj", w, sel.corners)
        pole_c[:, :2] = 0.0
        pole_b = np.einsum("nk,nkj->nj", w, sel.bary)
        fans = []
        for k in range(3):  # replace corner k by the pole point: orientation is kept
            corners, bary = sel.corners.copy(), sel.bary.copy()
            corners[:, k], bary[:, k] = pole_c, pole_b
            fans.append(Pieces(corners, bary, sel.index))
        pieces = _nondegenerate(Pieces.concatenate([pieces.select(~hit), *fans]))
    return pieces
