"""Checks that a raw mesh is a usable mesh of the unit sphere, made before dolfinx sees it.

A usable mesh covers the sphere exactly once with non-degenerate cells:

* every vertex lies on the unit sphere (to :data:`ON_SPHERE_TOL`);
* connectivity indices are in range, no cell repeats a vertex, no two cells have the same
  vertices, no cell has (nearly) zero measure;
* it is closed and manifold: on S^2 every edge belongs to exactly two triangles, on S^1
  every vertex to exactly two segments;
* it covers the sphere once: the cells' *spherical* measures (exact solid angles of the
  spherical triangles, or arc angles on S^1) add up to |S^{d-1}| to :data:`COVER_TOL`, which
  refuses double coverings, folds and overlapping cells (the flat measures would not: a
  coarse mesh's flat area is well below 4 pi).

dolfinx is not robust to such meshes (degenerate or duplicated cells corrupt memory inside
``create_mesh``), so :func:`check_sphere_mesh` runs on every mesh file before distribution.
"""

from __future__ import annotations

import numpy as np

from .raw import MeshError

ON_SPHERE_TOL = 1e-8
#: Relative tolerance of the total spherical measure against |S^{d-1}|.
COVER_TOL = 1e-6
#: Cells with spherical measure below this fraction of the mean are degenerate.
DEGENERATE_FRACTION = 1e-10


def check_on_sphere(points: np.ndarray, where: str, tol: float = ON_SPHERE_TOL) -> None:
    """Raise :class:`MeshError` unless every point has norm 1 to within ``tol``."""
    off = np.abs(np.linalg.norm(points, axis=1) - 1.0)
    if not np.all(np.isfinite(points)):
        raise MeshError(f"{where}: vertex coordinates must be finite")
    if off.size and off.max() > tol:
        i = int(off.argmax())
        raise MeshError(
            f"{where}: vertex {i} at {points[i].tolist()} is off the unit sphere by "
            f"{off[i]:.3e} (tolerance {tol:g}); project the vertices onto |x| = 1"
        )


def spherical_measures(points: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Exact measures of the cells projected onto the sphere: arc angles (S^1) or solid angles (S^2).

    Solid angle of the spherical triangle (a, b, c) by Van Oosterom & Strackee:
    ``tan(Omega / 2) = |a . (b x c)| / (1 + a.b + b.c + c.a)``.
    """
    v = points[cells]
    if cells.shape[1] == 2:
        return np.arccos(np.clip(np.einsum("ij,ij->i", v[:, 0], v[:, 1]), -1.0, 1.0))
    a, b, c = v[:, 0], v[:, 1], v[:, 2]
    triple = np.abs(np.einsum("ij,ij->i", a, np.cross(b, c)))
    denominator = 1.0 + np.einsum("ij,ij->i", a, b) + np.einsum("ij,ij->i", b, c) + np.einsum("ij,ij->i", c, a)
    return 2.0 * np.arctan2(triple, denominator)


def _closed_manifold(cells: np.ndarray, where: str) -> None:
    if cells.shape[1] == 2:
        counts = np.bincount(cells.ravel())
        bad = np.flatnonzero(counts != 2)
        if bad.size:
            raise MeshError(f"{where}: vertex {int(bad[0])} belongs to {int(counts[bad[0]])} segments, not 2: "
                            "the circle mesh is not closed and manifold")
        return
    edges = np.sort(np.concatenate([cells[:, [0, 1]], cells[:, [1, 2]], cells[:, [2, 0]]]), axis=1)
    unique, counts = np.unique(edges, axis=0, return_counts=True)
    bad = np.flatnonzero(counts != 2)
    if bad.size:
        e = unique[bad[0]]
        defect = "a boundary (the mesh has a hole or is not closed)" if counts[bad[0]] == 1 else "non-manifold"
        raise MeshError(f"{where}: edge ({int(e[0])}, {int(e[1])}) belongs to {int(counts[bad[0]])} triangles, "
                        f"not 2: {defect}")


def check_sphere_mesh(points: np.ndarray, cells: np.ndarray, where: str) -> None:
    """Raise :class:`MeshError` naming ``where`` unless the mesh covers the sphere once (module docstring).

    Parameters
    ----------
    points
        (V, d) vertices, d = 2 (S^1) or 3 (S^2).
    cells
        (C, d) connectivity (segments or triangles).
    """
    check_on_sphere(points, where)
    nv = points.shape[1]
    if cells.ndim != 2 or cells.shape[1] != nv or len(cells) == 0:
        raise MeshError(f"{where}: expected a non-empty ({'segment' if nv == 2 else 'triangle'}) cell array "
                        f"of shape (cells, {nv}), got {cells.shape}")
    if cells.min() < 0 or cells.max() >= len(points):
        raise MeshError(f"{where}: cell vertex indices must lie in [0, {len(points)})")
    srt = np.sort(cells, axis=1)
    repeated = np.flatnonzero((np.diff(srt, axis=1) == 0).any(axis=1))
    if repeated.size:
        raise MeshError(f"{where}: cell {int(repeated[0])} {cells[repeated[0]].tolist()} repeats a vertex (degenerate)")
    _, first, counts = np.unique(srt, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        c = int(first[np.flatnonzero(counts > 1)[0]])
        raise MeshError(f"{where}: cell {c} {cells[c].tolist()} appears more than once (duplicate cells)")
    measure = spherical_measures(points, cells)
    tiny = np.flatnonzero(measure <= DEGENERATE_FRACTION * measure.mean())
    if tiny.size:
        raise MeshError(f"{where}: cell {int(tiny[0])} {cells[tiny[0]].tolist()} has (nearly) zero measure "
                        "(degenerate)")
    _closed_manifold(cells, where)
    full = 2.0 * np.pi if nv == 2 else 4.0 * np.pi
    total = float(measure.sum())
    if abs(total - full) > COVER_TOL * full:
        raise MeshError(f"{where}: the cells cover {total / full:.6g} times the sphere's measure, not once "
                        "(overlapping, folded or multiply covering cells)")
