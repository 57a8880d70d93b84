"""Cluster-by-cluster agreement of two analyses (a PDE run against a reference or particles).

At a common time, clusters are matched by position: the assignment minimising the total
geodesic distance (``scipy.optimize.linear_sum_assignment``), keeping pairs closer than
``max_distance`` (default 0.1 rad, far below the spacing of distinct clusters).  Per matched
pair: position error (geodesic), mass and width differences, relative height difference.
Unmatched clusters on either side count in :attr:`FrameComparison.unmatched`.  Crossing times
are compared for the global maximum and for clusters whose ids are matched (an id of one
history is paired with the id it is most often matched with).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from ...times import MATCH_TOL, same_time
from .cells import AnalysisMesh
from .coords import geodesic
from .frame import Frame
from .history import BasinHistory
from .particles import TokenField

MAX_DISTANCE = 0.1


@dataclass(frozen=True)
class FrameComparison:
    """Matched clusters of two frames at one time (a: the tested side, b: the reference).

    Attributes
    ----------
    t
        The time.
    pairs
        (M, 2) indices (into a, into b) of the matched clusters.
    count_a, count_b
        Numbers of clusters.
    position, mass, width, height
        (M,) geodesic distance of the peaks, mass and width differences (a - b), and
        height difference relative to b, per pair.
    """

    t: float
    pairs: np.ndarray
    count_a: int
    count_b: int
    position: np.ndarray
    mass: np.ndarray
    width: np.ndarray
    height: np.ndarray

    @property
    def unmatched(self) -> int:
        return self.count_a + self.count_b - 2 * len(self.pairs)

    def summary(self) -> dict[str, float]:
        """Worst matched errors (nan without pairs) and the counts."""
        worst = {name: float(np.abs(getattr(self, name)).max()) if len(self.pairs) else np.nan
                 for name in ("position", "mass", "width", "height")}
        return {"t": self.t, "count_a": self.count_a, "count_b": self.count_b, "unmatched": self.unmatched, **worst}


def compare_frames(a: Frame, b: Frame, max_distance: float = MAX_DISTANCE) -> FrameComparison:
    """Match the clusters of two frames by position (module docstring)."""
    cost = geodesic(a.positions[:, None, :], b.positions[None, :, :]) if a.count and b.count else np.zeros((0, 0))
    ia, ib = linear_sum_assignment(cost) if cost.size else (np.zeros(0, int), np.zeros(0, int))
    keep = cost[ia, ib] <= max_distance if cost.size else np.zeros(0, bool)
    ia, ib = ia[keep], ib[keep]
    return FrameComparison(
        a.t, np.stack([ia, ib], axis=1), a.count, b.count, cost[ia, ib] if cost.size else np.zeros(0),
        a.masses[ia] - b.masses[ib], a.widths[ia] - b.widths[ib], a.heights[ia] / b.heights[ib] - 1.0,
    )


def frame_comparisons(a: BasinHistory, b: BasinHistory, max_distance: float = MAX_DISTANCE,
                      rtol: float = MATCH_TOL) -> list[FrameComparison]:
    """:func:`compare_frames` at every time of a that b also has (to ``rtol``)."""
    out = []
    for frame in a.frames:
        k = int(np.argmin(np.abs(b.times - frame.t)))
        if same_time(b.times[k], frame.t, rtol):
            out.append(compare_frames(frame, b.frames[k], max_distance))
    return out


def id_pairs(a: BasinHistory, b: BasinHistory, comparisons: list[FrameComparison]) -> dict[int, int]:
    """Each id of a mapped to the id of b it is most often matched with."""
    counts: dict[int, Counter] = {}
    for c in comparisons:
        ids_a = a.ids[int(np.argmin(np.abs(a.times - c.t)))]
        ids_b = b.ids[int(np.argmin(np.abs(b.times - c.t)))]
        for i, j in c.pairs:
            counts.setdefault(int(ids_a[i]), Counter())[int(ids_b[j])] += 1
    return {i: counter.most_common(1)[0][0] for i, counter in counts.items()}


def crossing_differences(a: BasinHistory, b: BasinHistory, comparisons: list[FrameComparison]) -> list[dict]:
    """Crossing times of both histories side by side: the global maximum and matched ids, per factor."""
    mapping = id_pairs(a, b, comparisons)
    rows = []
    for c in a.crossings:
        other = None if c.id is None else mapping.get(c.id)
        if c.id is not None and other is None:
            continue
        try:
            ref = b.crossing(c.factor, other)
        except KeyError:
            continue
        rows.append({"id": c.id, "ref_id": other, "factor": c.factor, "time": c.time, "ref_time": ref,
                     "relative": (c.time - ref) / ref if np.isfinite(ref) and ref > 0 else np.nan})
    return rows


class ClusterValidation:
    """Cluster-level agreement of particle runs with one PDE run, for ``meanfield validate``.

    n tokens resolve clusters only down to their sampling noise: their density estimate has
    the bandwidth h(n) and the least prominence p(n) of :mod:`.noise` (a dip shallower than
    the noise is no saddle), so counting the tokens' clusters against the PDE's at the mesh
    scale reports a failure that is not there (a bump whose dip is shallower than the noise
    of n tokens is one cluster for the tokens and two for the PDE at every n that does not
    resolve it).  The metrics, per output time, therefore use one definition on both sides:

    ``cluster_mass_error``
        On the PDE's clusters (the basins of its own analysis): the largest difference between
        the mass the tokens put in a cluster's region (the tokens in its cells) and the PDE's
        mass there (its cell masses).  The regions are the same sets of cells for both, so the
        difference is the tokens' sampling noise, ``O(n^-1/2)``, plus the PDE's error.
    ``cluster_position_error``
        On the PDE's clusters: the largest geodesic distance between the centres of mass
        (normalised mean position) of a region's tokens and of its PDE mass: ``O(n^-1/2)``
        too.  The region's centre, not its peak: the peak of a density estimate carries the
        bias of its bandwidth (``h(n)^2``, 0.05 rad for the second bump of s1-validation at
        n = 8000), which falls far slower than the noise.
    ``cluster_count_error``
        At the tokens' resolution: ``|count - count_pde|`` where the PDE's measure (its cell
        masses at the centroids) is smoothed by the same kernel of bandwidth h(n) and analysed
        with the same prominence p(n) on the same mesh; 0 unless sampling noise makes or hides
        a cluster the tokens could resolve.
    ``pde_clusters_resolved``
        How many clusters the PDE has at the tokens' resolution: what the count compares
        (fewer than the PDE's own count while n is too small to resolve them).

    h(n) and p(n) shrink with n towards one cell and :data:`meanfield.peaks.PROMINENCE`, the PDE's own
    definition.

    Parameters
    ----------
    pde
        The PDE run result (as :func:`meanfield.load_run` returns it).
    """

    METRICS = ("cluster_count_error", "cluster_position_error", "cluster_mass_error", "pde_clusters_resolved")

    def __init__(self, pde) -> None:
        self.pde = pde
        self._own: BasinHistory | None = None
        self._resolved: dict[tuple[float, float], BasinHistory] = {}

    def _at_resolution(self, mesh: AnalysisMesh, bandwidth: float, prominence: float) -> BasinHistory:
        """The PDE's clusters at a resolution (bandwidth, prominence), computed once per resolution."""
        from .api import analyse_fields

        key = (bandwidth, prominence)
        if key not in self._resolved:
            pde = self.pde
            fields = [(float(t), TokenField(mesh, pde.centroids, rho * pde.areas, bandwidth))
                      for t, rho in zip(pde.times, pde.densities)]
            self._resolved[key] = analyse_fields(fields, mesh.sphere, prominence=prominence)
        return self._resolved[key]

    def rows(self, particles) -> list[tuple[str, float, float]]:
        """(metric, time, value) of a particle run against the PDE at every common output time."""
        from .api import analyse_fields, analyse_run, default_prominence, particle_fields

        if self._own is None:
            self._own = analyse_run(self.pde, plots=False)
        mesh, fields = particle_fields(particles)
        if mesh.num_cells != len(self.pde.areas):
            raise ValueError(f"{getattr(particles, 'path', 'particles')}: the tokens' mesh has {mesh.num_cells} "
                             f"cells, the PDE's {len(self.pde.areas)}")
        first = fields[0][1]
        assert isinstance(first, TokenField)  # particle_fields builds TokenFields
        prominence = default_prominence(mesh, first)
        tokens = analyse_fields(fields, mesh.sphere, prominence=prominence)
        resolved = self._at_resolution(mesh, first.bandwidth, prominence)
        out: list[tuple[str, float, float]] = []
        for (t, field), c in zip(fields, frame_comparisons(tokens, resolved)):
            own = _frame_at(self._own, t)
            assert isinstance(field, TokenField) and own is not None
            i = int(np.argmin(np.abs(self.pde.times - t)))
            pde_mass, pde_centre = _regions(own.labels, self.pde.centroids, self.pde.densities[i] * self.pde.areas,
                                            own.count)
            token_mass, token_centre = _regions(own.labels[field.cells], field.points, field.weights, own.count)
            worst = (float(geodesic(token_centre, pde_centre).max()), float(np.abs(token_mass - pde_mass).max())) \
                if own.count else (np.nan, np.nan)
            values = (abs(c.count_a - c.count_b), *worst, c.count_b)
            out.extend((metric, c.t, float(v)) for metric, v in zip(self.METRICS, values))
        return out


def _regions(labels: np.ndarray, points: np.ndarray, masses: np.ndarray, count: int) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    """Mass (count,) and centre of mass on the sphere (count, d) of labelled weighted points per region."""
    mass = np.bincount(labels, masses, count)
    total = np.stack([np.bincount(labels, masses * points[:, k], count) for k in range(points.shape[1])], axis=1)
    return mass, total / np.maximum(np.linalg.norm(total, axis=1, keepdims=True), 1e-300)


def _frame_at(history: BasinHistory, t: float, rtol: float = MATCH_TOL) -> Frame | None:
    """The frame of a history at time t (to ``rtol``), None if it has none."""
    k = int(np.argmin(np.abs(history.times - t)))
    return history.frames[k] if same_time(history.times[k], t, rtol) else None
