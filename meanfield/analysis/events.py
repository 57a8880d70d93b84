"""The events that change a set of clusters over time, and their table, for every kind of cluster history.

One convention serves the density basins of :mod:`meanfield.analysis.clusters`
(``meanfield clusters``, :class:`~meanfield.analysis.clusters.BasinHistory`) and the point
sets of :mod:`meanfield.analysis.longtime` (``meanfield longtime``,
:class:`~meanfield.analysis.longtime.PointSetHistory`):

* angles are in (-pi, pi] (``arctan2``: the theta axis of every picture, the longitude of
  S^2 maps), so a cluster has one angle in every table;
* events are :class:`Event` objects, written by :func:`write_events` with the same columns.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: The kinds of :class:`Event`.
EVENT_KINDS = ("birth", "split", "merge", "death")
#: The columns of an events table (:func:`write_events`).
EVENT_COLUMNS = ("kind", "time", "kept", "absorbed", "kept_mass", "absorbed_mass")


@dataclass(frozen=True)
class Event:
    """A change of the cluster set.

    Attributes
    ----------
    kind
        One of :data:`EVENT_KINDS`.
    time
        When it happened: for a merge the merge time of :mod:`meanfield.merging` (interpolated
        between outputs), for the others the first output that shows it.
    ids
        The clusters' ids (labels), the one that carries on first.  ``merge``: the survivor,
        then the absorbed clusters (by decreasing mass); ``birth``: the new cluster, then its
        parent if it has one; ``split``: the cluster split from, then the new one; ``death``:
        the cluster.
    masses
        Masses of the merging clusters just before a merge of point sets, in the order of
        ``ids``; empty where not recorded.
    """

    kind: str
    time: float
    ids: tuple[int, ...]
    masses: tuple[float, ...] = ()

    @property
    def kept(self) -> int:
        """The cluster that carries on (the first id)."""
        return self.ids[0]

    @property
    def absorbed(self) -> int:
        """The second id (absorbed by a merge, split off by a split), -1 if there is none."""
        return self.ids[1] if len(self.ids) > 1 else -1


def write_events(path: str | Path, events: Iterable[Event]) -> Path:
    """Write an events table: :data:`EVENT_COLUMNS`, one row per event.

    ``kept`` is the cluster that carries on (the survivor of a merge, the new cluster of a
    birth, the cluster split from, the cluster that died), ``absorbed`` the second id (the
    absorbed cluster, the parent of a birth, the new cluster of a split; empty if none), the
    masses those of the two merging clusters just before a merge (empty otherwise).
    """
    path = Path(path)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(EVENT_COLUMNS)
        for e in events:
            masses = [repr(float(m)) for m in e.masses[:2]] if any(e.masses) else ["", ""]
            writer.writerow([e.kind, repr(float(e.time)), e.kept, "" if e.absorbed < 0 else e.absorbed, *masses])
    return path
