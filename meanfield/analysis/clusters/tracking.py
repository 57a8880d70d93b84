"""Stable cluster ids through output times, and the events that change them.

Between consecutive frames a and b (same analysis mesh), an old cluster's *successor* is the
new cluster whose region holds the old peak's top cell, and a new cluster's *parent* is the
old cluster whose region holds the new peak's top cell.  Then, for each new cluster:

* exactly one old cluster has it as successor: it keeps that cluster's id;
* several do: ``merge`` -- it keeps the id of the most massive of them, the others end;
* none: ``birth`` -- a new id; its *parent* (if any) is recorded: a peak that rose above the
  threshold on a cluster's flank, or one cluster becoming two;

and an old cluster without successor (no cluster is left where its peak was) ends with
``death``: it *vanished*.  Of several old clusters with one successor, one carries on (the
most massive of those whose old top cell is still above the threshold); each of the others
*vanished* (``death``) if the density at its old top cell has sunk below the threshold (a bump
that flattens out into a neighbour's flank is not a merge), else it is still above the
threshold but no longer separated by a dip of the prominence: a ``merge`` (one event per
absorbed cluster: ``survivor, absorbed``).
Births and deaths carry the time of the first frame that shows them (the change happened
between the previous output and that time); a merge carries the merge time of
:mod:`meanfield.merging`, the one definition of a merge: when the distance of the two peaks
fell to 0.01 rad, interpolated between the frames where both were seen (and 0 at the frame
that shows one cluster).  Ids are integers from 0, given in order of appearance (tallest
first within a frame).

Atoms (hybrid runs, :mod:`.atoms`) move between outputs without regard to cells and carry
ids, so a cluster whose heaviest atom has an id follows that id instead: its successor is the
new cluster whose heaviest atom has the same id, or, when that atom has merged into another,
the new atom cluster nearest to it; and the old cluster with the same atom id is a new atom
cluster's parent.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from ...merging import MERGE_DISTANCE, merge_time
from ..events import Event
from .coords import geodesic
from .frame import Frame


def track(frames: list[Frame], merge_distance: float = MERGE_DISTANCE) -> tuple[list[np.ndarray], list[Event]]:
    """Ids of the clusters of every frame and the events between frames (module docstring);
    merges are timed at ``merge_distance`` (rad, :mod:`meanfield.merging`).

    Returns
    -------
    ids
        One (P_k,) integer array per frame.
    events
        In time order.
    """
    if not frames:
        return [], []
    ids = [np.arange(frames[0].count)]
    next_id = frames[0].count
    events: list[Event] = []
    for a, b in pairwise(frames):
        old = ids[-1]
        successor = b.labels[a.peak_cells]
        parent = a.labels[b.peak_cells]
        if a.atom_ids is not None and b.atom_ids is not None:
            _follow_atoms(a, b, successor, parent)
        atom = a.atom_ids >= 0 if a.atom_ids is not None else np.zeros(a.count, bool)
        vanished = ~b.above[a.peak_cells] & ~atom  # its old top cell sank below the threshold
        new = np.empty(b.count, dtype=np.int64)
        for j in range(b.count):
            preds = np.flatnonzero(successor == j)
            if len(preds) == 1:
                new[j] = old[preds[0]]
                continue
            if len(preds) > 1:
                preds = preds[np.lexsort((old[preds], -a.masses[preds], vanished[preds]))]
                new[j] = old[preds[0]]
                events.extend(Event("death", b.t, (int(old[i]),)) if vanished[i] else
                              Event("merge", b.t, (int(old[preds[0]]), int(old[i])),
                                    (float(a.masses[preds[0]]), float(a.masses[i])))
                              for i in preds[1:])
                continue
            new[j], next_id = next_id, next_id + 1
            events.append(Event("birth", b.t, (int(new[j]),) + ((int(old[parent[j]]),) if parent[j] >= 0 else ())))
        events.extend(Event("death", b.t, (int(old[i]),)) for i in np.flatnonzero(successor < 0))
        ids.append(new)
    events = [_timed(e, frames, ids, merge_distance) if e.kind == "merge" else e for e in events]
    return ids, sorted(events, key=lambda e: e.time)


def _timed(event: Event, frames: list[Frame], ids: list[np.ndarray], merge_distance: float) -> Event:
    """A merge event (at the first frame showing one cluster) with its merge time (module docstring)."""
    times, distances = [], []
    pair = None
    for frame, present in zip(frames, ids):
        if frame.t >= event.time:
            break
        a, b = np.flatnonzero(present == event.ids[0]), np.flatnonzero(present == event.ids[1])
        if len(a) and len(b):
            times.append(frame.t)
            distances.append(float(geodesic(frame.positions[a[0]], frame.positions[b[0]])))
            pair = None if frame.atom_ids is None else (int(frame.atom_ids[a[0]]), int(frame.atom_ids[b[0]]))
    if pair is not None and min(pair) >= 0:
        times, distances = _atom_distances(frames, pair)
    time = merge_time(np.array([*times, event.time]), np.array([*distances, 0.0]), merge_distance)
    assert time is not None  # the distance is 0 at the event
    return Event("merge", time, event.ids, event.masses)


def _atom_distances(frames: list[Frame], pair: tuple[int, int]) -> tuple[list[float], list[float]]:
    """Times and distances of two atoms (by id) while both exist: two clusters that are atoms
    merge when the atoms come within the merge distance, though they may share a cell (one
    cluster) before."""
    times, distances = [], []
    for frame in frames:
        atoms = frame.atoms
        if atoms is None:
            continue
        where = {int(i): k for k, i in enumerate(atoms.ids)}
        if pair[0] in where and pair[1] in where:
            times.append(frame.t)
            distances.append(float(geodesic(atoms.positions[where[pair[0]]], atoms.positions[where[pair[1]]])))
        elif times:
            times.append(frame.t)  # the solver combined them
            distances.append(0.0)
            break
    return times, distances


def _follow_atoms(a: Frame, b: Frame, successor: np.ndarray, parent: np.ndarray) -> None:
    """Successors and parents of clusters with atoms, by atom id (module docstring; in place)."""
    assert a.atom_ids is not None and b.atom_ids is not None
    new = {int(i): j for j, i in enumerate(b.atom_ids) if i >= 0}
    old = {int(i): k for k, i in enumerate(a.atom_ids) if i >= 0}
    atom_clusters = np.flatnonzero(b.atom_ids >= 0)
    for i, k in old.items():
        if i in new:
            successor[k] = new[i]
        elif len(atom_clusters):
            successor[k] = atom_clusters[np.argmax(b.positions[atom_clusters] @ a.positions[k])]
    for i, j in new.items():
        if i in old:
            parent[j] = old[i]
