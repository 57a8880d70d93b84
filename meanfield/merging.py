"""What a merge of two clusters is, and when it happens: one definition for every cluster history.

Two clusters *merge* when the distance between them -- of their centres (peaks, atoms, the
centres of collapsed groups of tokens) -- falls to :data:`MERGE_DISTANCE` (0.01 rad); the
*merge time* is when it does, interpolated between the two observations around it (outputs
of a run, steps of the solver): linearly in ``log s``, exact for the exponential final
approach of two clusters (``s' ~ -s``), or linearly in s when the later distance is 0 (one
of them is gone: absorbed by the solver, or no longer a separate peak).

Used by the cluster analysis of densities (:mod:`meanfield.analysis.clusters`), the point-set
histories of :mod:`meanfield.analysis.longtime` (``meanfield longtime``) and the run log of a
hybrid run (:mod:`meanfield.atoms.journal`), so a run has one merge time wherever it is
reported.  Other events are named for what they are: the solver *combines* two atoms closer
than ``atoms.merge_distance`` (a numerical step, later than the merge), and a density bump
whose peak sinks below the cluster threshold *vanishes* (a ``death``, not a merge).
"""

from __future__ import annotations

import numpy as np

#: The distance (radians) at which two clusters have merged.
MERGE_DISTANCE = 1e-2


def crossing_time(t0: float, s0: float, t1: float, s1: float, delta: float = MERGE_DISTANCE) -> float:
    """When the distance s (``s0`` at ``t0``, ``s1 <= delta`` at ``t1``) reaches ``delta``.

    Linear in ``log s`` between the two observations, or in s when ``s1 = 0``; ``t0`` when
    ``s0 <= delta`` already.
    """
    if s0 <= delta:
        return float(t0)
    if s1 > 0:
        return float(t0 + (t1 - t0) * np.log(s0 / delta) / np.log(s0 / s1))
    return float(t0 + (t1 - t0) * (s0 - delta) / s0)


def merge_time(times: np.ndarray, distances: np.ndarray, delta: float = MERGE_DISTANCE) -> float | None:
    """The merge time of a pair observed at ``times`` (increasing) at ``distances``.

    The first observation at or below ``delta`` and the one before it give the time
    (:func:`crossing_time`); the first observation's time when it is already within
    ``delta``; None when the pair never comes within ``delta``.
    """
    times, distances = np.asarray(times, float), np.asarray(distances, float)
    within = np.flatnonzero(distances <= delta)
    if not len(within):
        return None
    k = int(within[0])
    if k == 0:
        return float(times[0])
    return crossing_time(times[k - 1], distances[k - 1], times[k], distances[k], delta)
