"""Stable cluster ids through output times, and the events that change them.

Between consecutive frames a and b (same analysis mesh), an old cluster's *successor* is the
new cluster whose region holds the old peak's top cell, and a new cluster's *parent* is the
old cluster whose region holds the new peak's top cell.  Then, for each new cluster:

* exactly one old cluster has it as successor: it keeps that cluster's id;
* several do: ``merge`` -- it keeps the id of the most massive of them, the others end;
* none: ``birth`` -- a new id; its *parent* (if any) is recorded: a peak that rose above the
  threshold on a cluster's flank, or one cluster becoming two;

and an old cluster without successor (no cluster is left where its peak was) ends with
``death``.  A cluster whose peak sinks below the threshold or into a neighbour's flank has
that neighbour as successor: a ``merge``.  Events carry the time of the first frame that shows
them: the change happened between the previous output and that time.  Ids are integers from
0, given in order of appearance (tallest first within a frame).

Atoms (hybrid runs, :mod:`.atoms`) move between outputs without regard to cells and carry
ids, so a cluster whose heaviest atom has an id follows that id instead: its successor is the
new cluster whose heaviest atom has the same id, or, when that atom has merged into another,
the new atom cluster nearest to it; and the old cluster with the same atom id is a new atom
cluster's parent.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from ..events import Event
from .frame import Frame


def track(frames: list[Frame]) -> tuple[list[np.ndarray], list[Event]]:
    """Ids of the clusters of every frame and the events between frames (module docstring).

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
        new = np.empty(b.count, dtype=np.int64)
        for j in range(b.count):
            preds = np.flatnonzero(successor == j)
            if len(preds) == 1:
                new[j] = old[preds[0]]
                continue
            if len(preds) > 1:
                preds = preds[np.lexsort((old[preds], -a.masses[preds]))]
                new[j] = old[preds[0]]
                events.append(Event("merge", b.t, tuple(int(old[i]) for i in preds)))
                continue
            new[j], next_id = next_id, next_id + 1
            events.append(Event("birth", b.t, (int(new[j]),) + ((int(old[parent[j]]),) if parent[j] >= 0 else ())))
        events.extend(Event("death", b.t, (int(old[i]),)) for i in np.flatnonzero(successor < 0))
        ids.append(new)
    return ids, events


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
