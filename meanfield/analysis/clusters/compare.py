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

from .coords import geodesic
from .frame import Frame
from .history import BasinHistory

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
                      rtol: float = 1e-9) -> list[FrameComparison]:
    """:func:`compare_frames` at every time of a that b also has (to ``rtol``)."""
    out = []
    for frame in a.frames:
        k = int(np.argmin(np.abs(b.times - frame.t)))
        if abs(b.times[k] - frame.t) <= rtol * max(1.0, abs(frame.t)):
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

    The PDE run is analysed once, on first use; each particle run on the PDE's mesh
    (:func:`~.api.analyse_run` defaults).  Metrics per output time: ``cluster_count_error``
    (``|count - count_pde|``), ``cluster_position_error`` (largest geodesic distance of matched
    peaks, rad) and ``cluster_mass_error`` (largest mass difference of matched clusters);
    nan without matched clusters.

    Parameters
    ----------
    pde
        The PDE run result (as :func:`meanfield.load_run` returns it).
    """

    METRICS = ("cluster_count_error", "cluster_position_error", "cluster_mass_error")

    def __init__(self, pde) -> None:
        self.pde = pde
        self._history: BasinHistory | None = None

    def rows(self, particles) -> list[tuple[str, float, float]]:
        """(metric, time, value) of a particle run against the PDE at every common output time."""
        from .api import analyse_run

        if self._history is None:
            self._history = analyse_run(self.pde)
        out: list[tuple[str, float, float]] = []
        for c in frame_comparisons(analyse_run(particles), self._history):
            worst = c.summary()
            values = (abs(c.count_a - c.count_b), worst["position"], worst["mass"])
            out.extend((metric, c.t, float(v)) for metric, v in zip(self.METRICS, values))
        return out
