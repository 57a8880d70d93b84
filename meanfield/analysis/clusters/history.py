"""Clusters through a run: frames, ids, events and crossing times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...merging import MERGE_DISTANCE
from ...spheres import sphere_named
from ..events import Event
from .crossing import crossing_status, first_crossing
from .frame import Frame
from .tracking import track

#: Default crossing factors: multiples of the uniform density.
FACTORS: tuple[float, ...] = (2.0, 5.0, 10.0, 20.0, 50.0)


@dataclass(frozen=True)
class Crossing:
    """The first time a cluster's peak (or the global maximum, ``id = None``) reaches ``factor`` x uniform.

    ``time`` is nan unless ``status`` is ``"crossed"``: ``"already"`` when the peak was at or
    above the level when first seen, ``"never"`` when it never reached it
    (:func:`.crossing.crossing_status`).
    """

    id: int | None
    factor: float
    time: float
    status: str


@dataclass
class BasinHistory:
    """The cluster analysis of one run: the basins of a density's peaks over time.

    Attributes
    ----------
    sphere
        ``mesh.sphere``: the sphere's name (:mod:`meanfield.spheres`).
    frames
        One :class:`~.frame.Frame` per output time.
    ids
        Stable ids of each frame's clusters.
    events
        Births, merges and deaths (:class:`~meanfield.analysis.events.Event`, :mod:`.tracking`).
    crossings
        Crossing times of every cluster and of the global maximum, per factor.
    threshold, prominence
        The cluster definition used (:mod:`.basins`).
    source
        Where the data came from (a run directory or a description).
    """

    sphere: str
    frames: list[Frame]
    ids: list[np.ndarray]
    events: list[Event]
    crossings: list[Crossing]
    threshold: float
    prominence: float
    source: str = ""
    info: dict = field(default_factory=dict)

    @property
    def uniform(self) -> float:
        """The uniform density 1/|S|."""
        return sphere_named(self.sphere).uniform_density

    @property
    def has_atoms(self) -> bool:
        """Whether the frames come from a hybrid run (clusters may hold atoms, :mod:`.atoms`)."""
        return any(f.atom_masses is not None for f in self.frames)

    @property
    def times(self) -> np.ndarray:
        return np.array([f.t for f in self.frames])

    @property
    def counts(self) -> np.ndarray:
        return np.array([f.count for f in self.frames])

    @property
    def maxima(self) -> np.ndarray:
        """The global maximum of the density at each output time."""
        return np.array([f.maximum for f in self.frames])

    def track(self, cluster: int) -> dict[str, np.ndarray]:
        """The history of one cluster id: t, positions, heights, masses, widths over its lifetime
        (hybrid runs also atom_masses: the part of the mass in atoms)."""
        rows = [(f, int(np.flatnonzero(i == cluster)[0])) for f, i in zip(self.frames, self.ids) if cluster in i]
        names = ("positions", "heights", "masses", "widths") + (("atom_masses",) if self.has_atoms else ())
        return {"t": np.array([f.t for f, _ in rows]),
                **{name: np.array([getattr(f, name)[k] for f, k in rows]) for name in names}}

    def all_ids(self) -> list[int]:
        return sorted({int(i) for ids in self.ids for i in ids})

    def crossing(self, factor: float, cluster: int | None = None) -> float:
        """The crossing time of ``factor`` x uniform by a cluster (or the global maximum)."""
        for c in self.crossings:
            if c.id == cluster and c.factor == factor:
                return c.time
        raise KeyError(f"no crossing for id {cluster} and factor {factor}")


def build_history(frames: list[Frame], sphere: str, threshold: float, prominence: float,
                  factors: Sequence[float] = FACTORS, source: str = "",
                  merge_distance: float = MERGE_DISTANCE) -> BasinHistory:
    """Track the frames of a run and compute the crossing times (:mod:`.tracking`, :mod:`.crossing`);
    merges are timed at ``merge_distance`` (rad)."""
    ids, events = track(frames, merge_distance)
    history = BasinHistory(sphere, frames, ids, events, [], threshold, prominence, source)
    u = history.uniform
    times = history.times
    for factor in factors:
        level = factor * u
        history.crossings.append(Crossing(None, float(factor), first_crossing(times, history.maxima, level),
                                          crossing_status(history.maxima, level)))
        for cluster in history.all_ids():
            tr = history.track(cluster)
            history.crossings.append(Crossing(cluster, float(factor), first_crossing(tr["t"], tr["heights"], level),
                                              crossing_status(tr["heights"], level)))
    return history
