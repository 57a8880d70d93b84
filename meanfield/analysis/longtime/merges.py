"""Merges of weighted point sets: the tokens of a Lagrangian reference, or a hybrid run's atoms.

One rule on frames ``(t, points, masses, ids)``: the *heavy* points (mass >= ``min_mass``:
coalesced clusters, atoms) are the clusters; a merge is the first time the distance of two
heavy points falls to ``delta`` (interpolated linearly in log distance between the frames,
exact for the exponential final approach), counted only for pairs that were once at least
``apart`` apart while both heavy (so a cluster captured in pieces a cell apart, or coalescing
in pieces, is not a merge).  A heavy point that is gone in the next frame (merged by a solver
between two frames) merged with the heavy point nearest to it in its last frame, if that one
was closer than ``apart`` (else it joined a group that was not heavy yet: not a merge of
clusters), at the time their distance, interpolated linearly to 0, crossed ``delta``.

Each merge is an :class:`~meanfield.analysis.events.Event` of kind ``"merge"`` with the two
points' ids and their masses just before.  The S^1 histories of :mod:`.events` group points
by gaps instead; this rule needs no ordering of the points and serves S^2.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...merging import MERGE_DISTANCE, crossing_time
from ..events import Event

#: Merge rule: distance (rad, :mod:`meanfield.merging`), least cluster mass, least earlier separation (rad).
DELTA, MIN_MASS, APART = MERGE_DISTANCE, 1e-2, 0.1


def point_merges(frames: Iterable[tuple[float, np.ndarray, np.ndarray, np.ndarray]], *, delta: float = DELTA,
                 min_mass: float = MIN_MASS, apart: float = APART) -> list[Event]:
    """The merges (module docstring) of frames ``(t, points (m, d), masses (m,), ids (m,))``.

    Ids follow points between frames (atom ids, token ids:
    :class:`~meanfield.references.lagrangian_sphere.TokenFrame`); a pair is identified by the
    ids of its two points.
    """
    out: list[Event] = []
    last: dict[tuple[int, int], tuple[float, float, tuple[float, float]]] = {}  # pair -> (t, distance, masses)
    far: set[tuple[int, int]] = set()
    done: set[tuple[int, int]] = set()
    for t, points, masses, ids in frames:
        heavy = masses >= min_mass
        x, m, k = points[heavy], masses[heavy], np.asarray(ids)[heavy]
        angle = 2.0 * np.arcsin(np.clip(np.linalg.norm(x[:, None] - x[None], axis=-1) / 2.0, 0.0, 1.0))
        seen = {}
        for i in range(len(x)):
            for j in range(i + 1, len(x)):
                key = (int(min(k[i], k[j])), int(max(k[i], k[j])))
                seen[key] = (float(angle[i, j]), (float(m[i]), float(m[j])))
        for key, (s1, _) in seen.items():
            if s1 >= apart:
                far.add(key)
            if key in far and key not in done and s1 <= delta and key in last:
                t0, s0, before = last[key]
                out.append(Event("merge", crossing_time(t0, s0, float(t), s1, delta), key, before))
                done.add(key)
        present = {int(i) for i in ids}
        for gone in sorted({i for key in last for i in key} - present):  # merged by the solver into
            pairs = [key for key in last if gone in key and not set(key) - present - {gone}]  # its nearest
            if pairs:
                key = min(pairs, key=lambda p: last[p][1])
                t0, s0, before = last[key]
                if key in far and key not in done and s0 < apart:
                    out.append(Event("merge", crossing_time(t0, s0, float(t), 0.0, delta), key, before))
                    done.add(key)
        last = {key: (float(t), s, pm) for key, (s, pm) in seen.items()}
    return sorted(out, key=lambda e: e.time)

