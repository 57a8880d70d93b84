"""The events that change a set of clusters over time, for every kind of cluster history.

One :class:`Event` serves the density basins of :mod:`meanfield.analysis.clusters`
(:class:`~meanfield.analysis.clusters.BasinHistory`) and the point sets of
:mod:`meanfield.analysis.longtime` (:class:`~meanfield.analysis.longtime.PointSetHistory`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The kinds of :class:`Event`.
EVENT_KINDS = ("birth", "split", "merge", "death")


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
