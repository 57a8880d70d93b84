"""Agreement of two cluster histories (a hybrid run against the reference): merges and a late state.

Merges are paired one to one by the assignment that minimises the sum of ``|log(t_a / t_b)|``
(``scipy.optimize.linear_sum_assignment``), so that a merge seen by one history only (two
dense regions joining during formation, which one representation resolves and the other
not) leaves the others paired; unpaired merges are listed with ``nan`` for the other side.
Clusters at a time are paired by the assignment that minimises the sum of circular centre distances
(``scipy.optimize.linear_sum_assignment``); unpaired clusters are reported by count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from .events import PointSetHistory, circular_distance


@dataclass(frozen=True)
class HistoryComparison:
    """Merge times and the clusters at ``time`` of a history against a reference.

    Attributes
    ----------
    merges
        ``(reference, other)`` merge times, paired (module docstring), in time order; ``nan``
        for the side of an unpaired merge.
    time
        The time of the state comparison (the last frame at or before it in each history).
    counts
        Number of clusters ``(reference, other)`` at ``time``.
    centres, masses
        Paired ``(reference, other)`` cluster centres (rad) and masses at ``time``, (k, 2).
    """

    merges: np.ndarray
    time: float
    counts: tuple[int, int]
    centres: np.ndarray
    masses: np.ndarray

    @property
    def merge_errors(self) -> np.ndarray:
        """Relative merge-time errors ``|other - ref| / ref`` (nan where unpaired)."""
        return np.abs(self.merges[:, 1] - self.merges[:, 0]) / self.merges[:, 0]

    @property
    def position_error(self) -> float:
        """Largest circular distance of paired centres (inf when the counts differ)."""
        if self.counts[0] != self.counts[1]:
            return float("inf")
        return float(circular_distance(self.centres[:, 0], self.centres[:, 1]).max(initial=0.0))

    @property
    def mass_error(self) -> float:
        """Largest mass difference of paired clusters (inf when the counts differ)."""
        if self.counts[0] != self.counts[1]:
            return float("inf")
        return float(np.abs(self.masses[:, 0] - self.masses[:, 1]).max(initial=0.0))


def compare_histories(reference: PointSetHistory, other: PointSetHistory, time: float) -> HistoryComparison:
    """Merges and clusters at ``time`` (both paired by assignment) of ``other`` against ``reference``."""
    a = np.array([e.time for e in reference.merges()])
    b = np.array([e.time for e in other.merges()])
    ra, rb = linear_sum_assignment(np.abs(np.log(a[:, None] / b[None, :]))) if a.size and b.size \
        else (np.zeros(0, int), np.zeros(0, int))
    pairs = [(a[i], b[j]) for i, j in zip(ra, rb, strict=True)]
    pairs += [(t, np.nan) for i, t in enumerate(a) if i not in set(ra)]
    pairs += [(np.nan, t) for j, t in enumerate(b) if j not in set(rb)]
    merges = np.array(sorted(pairs, key=lambda r: np.nanmin(r)), float).reshape(-1, 2)
    _, ca, ma = reference.state_at(time)
    _, cb, mb = other.state_at(time)
    rows, cols = linear_sum_assignment(circular_distance(ca[:, None], cb[None, :])) if len(ca) and len(cb) \
        else (np.zeros(0, int), np.zeros(0, int))
    return HistoryComparison(merges, float(time), (len(ca), len(cb)),
                             np.stack([ca[rows], cb[cols]], axis=1), np.stack([ma[rows], mb[cols]], axis=1))
