"""Clusters, merges and metastable states of weighted point sets on S^1 over time.

One rule for every point set: reference tokens (:mod:`meanfield.references.lagrangian_circle`,
ids = token indices) and weighted points such as atoms, given as a sequence of frames
``(t, angles, masses, ids)``.  It is the cluster definition of :mod:`meanfield.peaks.basins`
(significant peaks above the cluster level, each with its region) for points instead of cell
averages: a run's density is analysed by :mod:`meanfield.analysis.clusters` itself
(:func:`meanfield.studies.longtime.run_history`).

Grouping (one frame)
    A point's *local density* is its mass over its spacing, the smaller of the angular gaps
    to its two neighbours.  A point of mass m is *dense* when ``m >= link_density *
    min(delta, spacing)`` (a local density of at least ``link_density``, by default the
    cluster level :data:`meanfield.peaks.LEVEL` times the uniform density ``1 / (2 pi)``;
    any point heavier than ``link_density * delta`` is dense, so atoms always are).  Dense
    points sorted by angle whose gap (skipping the other points) is at most ``delta`` form a
    group (single linkage).  A group is cut at its significant dips: the basins of
    :func:`meanfield.peaks.cluster_labels` of the local densities along the group
    (``prominence``, :data:`meanfield.peaks.PROMINENCE`), those whose peaks are within
    ``delta`` of each other kept together.  Each part of mass at least ``min_mass`` is a
    *cluster*: its *peak* is its densest point, and its position (``centres``, in (-pi, pi])
    the peak's angle, as a density cluster's is its peak's.  Its *region*, whose mass is the
    cluster's mass, is its points and the other points up to the least dense point between it
    and the next cluster on either side (on S^1, the basin of a density ends at the minimum
    between two peaks), so the regions share the circle; ``stray`` is the mass in no region
    (all of it when there is no cluster).  Default ``delta = 0.01`` rad, ``min_mass = 0.01``.

    With ``link_density`` at the cluster level, the bumps of an initial density above the
    uniform one are clusters from t = 0, as ``meanfield clusters`` counts them; collapsed
    clusters (width ``<< delta``, the metastable phase; atoms) are separate iff they are more
    than ``delta`` apart, so ``delta`` is a distance between cluster peaks, as the hybrid's
    atom merge distance is; light points between clusters neither bridge nor separate them.

Tracking
    Points keep their ids between frames, and a cluster follows its peak, as the density
    clusters of :mod:`meanfield.analysis.clusters.tracking` do: an old cluster's *successor*
    is the new cluster holding its peak's id (for a peak that is gone -- an atom absorbed by a
    solver -- the cluster nearest its last position).  A new cluster that is the successor of
    one old cluster keeps its label; of several, it keeps the heaviest one's label and the
    others *merge* into it; of none, it is new: a ``"split"`` if its peak was in an old cluster,
    else a ``"birth"``.  An old cluster that is no one's predecessor -- its peak in no cluster
    -- ends with a ``"death"``.

Merge time
    The merge of :mod:`meanfield.merging` (one definition for every cluster history): the
    time at which the separation of the two clusters -- the distance of their peaks (the
    points that were their peaks in the last frame where both were clusters) -- falls to
    ``delta``.  Between the last frame with ``s0 > delta`` and the first with
    ``s1 <= delta``, ``log s`` is interpolated linearly in t (the final approach of two
    clusters is exponential, ``s' ~ -s``), or s itself when ``s1 = 0`` (a peak gone: the
    lighter atom was absorbed by the solver).  Two clusters joined into one group while
    still more than ``delta`` apart (linked through dense points between them, such as the
    tokens flowing into both) are followed until their peaks come within ``delta``; a pair
    that never does by the last frame is reported at the frame where it joined.  Keep
    ``delta`` at least the hybrid's ``atoms.merge_distance``, so that the solver never
    combines atoms before the merge is seen.

Metastable states
    The k-cluster state lasts from the event that made the cluster count k (for the first
    state the last birth or split before the first merge, or the first frame when there is
    none: the bumps of a perturbed initial density are clusters from the start, so the first
    state's duration includes their formation) to the next merge; its duration is the
    metastable time.  A state still present at the last frame has ``end = None`` and its
    duration is a lower bound (``lower_bound = True``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ...merging import MERGE_DISTANCE, crossing_time
from ...peaks import LEVEL, PROMINENCE, CellGraph, cluster_labels
from ..events import Event

TWO_PI = 2.0 * np.pi
#: Defaults: grouping / merge distance (rad), least link density (the cluster threshold on S^1),
#: smallest mass of a cluster.
DELTA, LINK_DENSITY, MIN_MASS = MERGE_DISTANCE, LEVEL / TWO_PI, 1e-2


def circular_distance(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """|a - b| on the circle, in [0, pi]."""
    d = np.mod(np.asarray(a, float) - np.asarray(b, float), TWO_PI)
    return np.minimum(d, TWO_PI - d)


def group_points(angles: np.ndarray, delta: float, masses: np.ndarray | None = None,
                 link_density: float = 0.0) -> list[np.ndarray]:
    """Indices of the groups of dense points linked by gaps <= delta (module docstring).

    Without ``masses`` (or with ``link_density = 0``) every point is dense.  Returns the groups
    in counter-clockwise order, each as indices into ``angles`` ordered counter-clockwise from
    the group's first member; points that are not dense are in no group.
    """
    theta = np.mod(np.asarray(angles, float), TWO_PI)
    if theta.size == 0:
        return []
    order = np.argsort(theta, kind="stable")
    if masses is not None and link_density > 0 and theta.size > 1:
        s = theta[order]
        gaps = np.diff(np.append(s, s[0] + TWO_PI))  # gaps[i]: from s[i] to the next point
        spacing = np.minimum(np.minimum(gaps, np.roll(gaps, 1)), delta)
        order = order[np.asarray(masses, float)[order] >= link_density * spacing]
        if order.size == 0:
            return []
    s = theta[order]
    gaps = np.diff(np.append(s, s[0] + TWO_PI))
    cuts = np.flatnonzero(gaps > delta)
    if cuts.size == 0:
        return [order]
    rolled = np.roll(order, -(cuts[-1] + 1))  # start just after the last cut
    stops = np.sort((cuts - cuts[-1] - 1) % order.size) + 1
    starts = np.concatenate([[0], stops[:-1]])
    return [rolled[a:b] for a, b in zip(starts, stops, strict=True)]


def local_density(angles: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """Each point's mass over its spacing, the smaller of the angular gaps to its two neighbours
    (mass per radian; the largest float where points coincide)."""
    theta = np.mod(np.asarray(angles, float), TWO_PI)
    order = np.argsort(theta, kind="stable")
    s = theta[order]
    gaps = np.diff(np.append(s, s[0] + TWO_PI))
    spacing = np.empty_like(theta)
    spacing[order] = np.minimum(gaps, np.roll(gaps, 1))
    top = np.finfo(float).max
    return np.divide(np.asarray(masses, float), spacing, out=np.full(theta.size, top), where=spacing > 0)


def split_group(group: np.ndarray, angles: np.ndarray, density: np.ndarray, delta: float,
                prominence: float = PROMINENCE) -> list[np.ndarray]:
    """A group of linked points (counter-clockwise, :func:`group_points`) cut at its significant
    dips: the basins of :func:`meanfield.peaks.cluster_labels` of the points' densities along
    the group, those whose peaks are within ``delta`` of each other joined.  Returns index
    arrays into ``angles``, each with its peak (the densest member) first."""
    n = len(group)
    step = np.arange(n)
    ring = n > 2 and circular_distance(angles[group[-1]], angles[group[0]]) <= delta  # the whole circle
    before, after = (step - 1) % n, (step + 1) % n
    if not ring:
        before[0], after[-1] = -1, -1
    neighbours = np.stack([before, after], axis=1) if n > 1 else np.full((1, 2), -1)
    values = density[group]
    labels, peaks = cluster_labels(values, CellGraph(neighbours), 0.0, prominence)
    along = np.argsort(peaks, kind="stable")  # peaks in order along the group
    at = angles[group[peaks[along]]]
    run = np.concatenate([[0], np.cumsum(circular_distance(at[:-1], at[1:]) > delta)])
    if ring and len(at) > 1 and circular_distance(at[-1], at[0]) <= delta:
        run[run == run[-1]] = 0
    joined = np.empty(len(peaks), dtype=np.int64)
    joined[along] = run  # peaks within delta of the next one along: one cluster
    part = joined[labels]
    parts = []
    for k in np.unique(part):
        members = np.flatnonzero(part == k)
        top = members[np.argmax(values[members])]
        parts.append(group[np.concatenate([[top], members[members != top]])])
    return parts


def region_masses(angles: np.ndarray, masses: np.ndarray, clusters: list[np.ndarray],
                  density: np.ndarray) -> np.ndarray:
    """The mass of each cluster's region: its members and the points between it and the next
    cluster on either side up to the least dense of them (the dip between two clusters; every
    point when there is one cluster), so the regions partition the circle as the basins of a
    density do (:mod:`meanfield.peaks.basins`)."""
    out = np.array([float(masses[c].sum()) for c in clusters])
    if not clusters:
        return out
    order = np.argsort(np.mod(angles, TWO_PI), kind="stable")
    owner = np.full(len(angles), -1)
    for k, members in enumerate(clusters):
        owner[members] = k
    ring, n = owner[order], len(angles)
    owned = np.flatnonzero(ring >= 0)
    after = np.roll(owned, -1)
    runs = (after - owned) % n != 1  # unowned points follow (all of them after a lone owned point)
    for a, b in zip(owned[runs], after[runs], strict=True):
        points = order[np.arange(a + 1, b + n if b <= a else b) % n]
        if ring[a] == ring[b]:
            out[ring[a]] += masses[points].sum()
            continue
        cut = int(np.argmin(density[points])) + 1
        out[ring[a]] += masses[points[:cut]].sum()
        out[ring[b]] += masses[points[cut:]].sum()
    return out


def point_angle(theta: np.ndarray, ids: np.ndarray, point: int) -> float | None:
    """The angle of the point with id ``point`` (None if it is gone)."""
    where = np.flatnonzero(ids == point)
    return float(theta[where[0]]) if where.size else None


@dataclass(frozen=True)
class State:
    """A metastable k-cluster state: ``[start, end)``, ``end`` None if it lasts past the last frame."""

    count: int
    start: float
    end: float | None
    last_frame: float

    @property
    def duration(self) -> float:
        """``end - start``, or ``last_frame - start`` (a lower bound) while it lasts."""
        return (self.last_frame if self.end is None else self.end) - self.start

    @property
    def lower_bound(self) -> bool:
        return self.end is None


@dataclass
class PointSetHistory:
    """Clusters of a point set over time (module docstring).

    Attributes
    ----------
    times
        (T,) frame times.
    labels, centres, masses
        Per frame: (k,) cluster labels, centres (peaks) in (-pi, pi] and masses (of their
        regions), in increasing theta.
    stray
        (T,) mass in no region (all of it when there is no cluster).
    total
        (T,) total mass of the frame.
    events
        Merges, splits, births and deaths in time order.
    delta
        The merge distance (rad).
    rule
        The cluster rule's parameters by name: ``link_density`` and ``min_mass`` for a point
        set (module docstring); ``threshold`` and ``prominence`` of the density basins
        (:mod:`meanfield.peaks.basins`) for a run's history
        (:func:`meanfield.studies.longtime.run_history`).
    """

    delta: float
    rule: dict[str, float]
    times: list[float] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    centres: list[np.ndarray] = field(default_factory=list)
    masses: list[np.ndarray] = field(default_factory=list)
    stray: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    @property
    def counts(self) -> np.ndarray:
        """(T,) number of clusters per frame."""
        return np.array([len(lab) for lab in self.labels])

    def merges(self) -> list[Event]:
        """The merge events, in time order."""
        return sorted((e for e in self.events if e.kind == "merge"), key=lambda e: e.time)

    def frame_at(self, t: float) -> int:
        """Index of the last frame at or before ``t`` (the first frame if t is earlier)."""
        return max(int(np.searchsorted(np.asarray(self.times), t, side="right")) - 1, 0)

    def state_at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(labels, centres, masses)`` of the clusters at the last frame at or before t."""
        i = self.frame_at(t)
        return self.labels[i], self.centres[i], self.masses[i]

    def track(self, label: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(times, centres, masses)`` of one cluster label over the frames where it exists."""
        rows = [(t, c[lab == label][0], m[lab == label][0])
                for t, lab, c, m in zip(self.times, self.labels, self.centres, self.masses, strict=True)
                if np.any(lab == label)]
        if not rows:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        t, c, m = (np.array(x) for x in zip(*rows, strict=True))
        return t, c, m

    def all_labels(self) -> list[int]:
        """Every label that ever named a cluster, in order of appearance."""
        seen: dict[int, None] = {}
        for lab in self.labels:
            seen.update(dict.fromkeys(int(x) for x in lab))
        return list(seen)

    def states(self) -> list[State]:
        """The metastable states after formation (module docstring), in time order."""
        if not self.times:
            return []
        changes = sorted((e for e in self.events if e.kind in ("split", "birth", "merge")), key=lambda e: e.time)
        merges = [e for e in changes if e.kind == "merge"]
        formed = [e.time for e in changes if e.kind != "merge" and (not merges or e.time <= merges[0].time)]
        start = max(formed) if formed else self.times[0]
        count = int(self.counts[self.frame_at(start)])
        out = []
        for e in merges:
            if e.time < start:
                continue
            out.append(State(count, start, e.time, self.times[-1]))
            start, count = e.time, count - 1
        out.append(State(count, start, None, self.times[-1]))
        return out


def point_set_history(
    frames: Iterable[tuple[float, np.ndarray, np.ndarray, np.ndarray]],
    delta: float = DELTA,
    link_density: float = LINK_DENSITY,
    min_mass: float = MIN_MASS,
    prominence: float = PROMINENCE,
) -> PointSetHistory:
    """Group, track and time the clusters of a sequence of point-set frames (module docstring).

    Parameters
    ----------
    frames
        ``(t, angles (m,), masses (m,), ids (m,))`` in increasing t; m may change (atoms
        appear and merge); ids are integers that a point keeps between frames.
    delta
        Merge distance and grouping gap (rad), :mod:`meanfield.merging`.
    link_density
        Least local density of a link (mass per radian).
    min_mass
        Smallest mass of a cluster.
    prominence
        Least relative depth of a dip that cuts a group (:mod:`meanfield.peaks.basins`).
    """
    history = PointSetHistory(float(delta), {"link_density": float(link_density), "min_mass": float(min_mass),
                                             "prominence": float(prominence)})
    prev: _Frame | None = None
    pending: list[_Pending] = []
    next_label = 0
    for t, angles, masses, ids in frames:
        theta, m, ident = (np.asarray(x) for x in (angles, masses, ids))
        theta = np.mod(theta.astype(float), TWO_PI)
        density = local_density(theta, m)
        clusters = [part for g in group_points(theta, delta, m, link_density)
                    for part in split_group(g, theta, density, delta, prominence) if m[part].sum() >= min_mass]
        peaks = np.angle(np.exp(1j * theta[[c[0] for c in clusters]]))  # in (-pi, pi]
        clusters = [clusters[k] for k in np.argsort(peaks, kind="stable")]
        centre = np.sort(peaks)
        members = [ident[c] for c in clusters]
        mass = region_masses(theta, m, clusters, density)
        labels = np.full(len(clusters), -1, dtype=np.int64)
        frame = _Frame(float(t), labels, centre, mass, members, theta, m, ident)
        if prev is None:
            labels[:] = np.arange(len(clusters))
            next_label = len(clusters)
        else:
            successor = {}  # old label -> the new cluster holding its peak (-1: none)
            for lab in prev.labels:
                peak = np.array([prev.peak_of(int(lab))])
                successor[int(lab)] = int(frame.index_of(peak)[0])
                if successor[int(lab)] < 0 and not np.isin(peak, ident).any() and len(clusters):
                    # its peak is gone (an atom absorbed by the solver): into the nearest cluster
                    successor[int(lab)] = int(np.argmin(circular_distance(centre, prev.centre_of(int(lab)))))
            for c in range(len(clusters)):
                parents = [lab for lab, j in successor.items() if j == c]
                if not parents:
                    labels[c] = next_label
                    parent = int(prev.index_of(members[c][:1])[0])
                    born = (next_label,) if parent < 0 else (int(prev.labels[parent]), next_label)
                    history.events.append(Event("birth" if parent < 0 else "split", float(t), born, (0.0, 0.0)))
                    next_label += 1
                    continue
                keep = max(parents, key=prev.mass_of)
                labels[c] = keep
                pending += [_Pending(keep, p, prev.mass_of(keep), prev.mass_of(p), prev.peak_of(keep),
                                     prev.peak_of(p), prev.time, prev.separation(keep, p))
                            for p in parents if p != keep]
            history.events += [Event("death", float(t), (lab,)) for lab, j in successor.items() if j < 0]
        for merge in list(pending):  # parents joined: their centres come within delta now or later
            done = merge.advance(float(t), theta, ident, delta)
            if done is not None:
                history.events.append(done)
                pending.remove(merge)
        history.times.append(float(t))
        history.labels.append(labels)
        history.centres.append(centre)
        history.masses.append(mass)
        history.total.append(float(m.sum()))
        history.stray.append(float(m.sum() - mass.sum()))
        prev = frame
    history.events += [Event("merge", m.t0, (m.kept, m.absorbed), m.masses) for m in pending]  # never reached delta
    history.events.sort(key=lambda e: e.time)
    return history


@dataclass
class _Pending:
    """Two parents joined in one cluster whose centres have not been seen within delta yet."""

    kept: int
    absorbed: int
    kept_mass: float
    absorbed_mass: float
    kept_peak: int
    absorbed_peak: int
    t0: float
    s0: float

    @property
    def masses(self) -> tuple[float, float]:
        return self.kept_mass, self.absorbed_mass

    def advance(self, t1: float, theta: np.ndarray, ids: np.ndarray, delta: float) -> Event | None:
        """The merge event if the distance of the parents' peaks in this frame is <= delta
        (interpolated, module docstring), else None after remembering this frame."""
        a, b = (point_angle(theta, ids, x) for x in (self.kept_peak, self.absorbed_peak))
        s1 = 0.0 if a is None or b is None else float(circular_distance(a, b))  # gone: absorbed by the solver
        if s1 > delta:
            self.t0, self.s0 = t1, s1
            return None
        time = crossing_time(self.t0, self.s0, t1, s1, delta)
        return Event("merge", time, (self.kept, self.absorbed), self.masses)


@dataclass
class _Frame:
    """A frame for tracking: clusters (each one's peak id first among its member ids) and the raw points."""

    time: float
    labels: np.ndarray
    centre: np.ndarray
    mass: np.ndarray
    members: list[np.ndarray]
    theta: np.ndarray
    m: np.ndarray
    ids: np.ndarray

    def __post_init__(self) -> None:
        all_ids = np.concatenate(self.members) if self.members else np.zeros(0, np.int64)
        owner = np.concatenate([np.full(len(x), k) for k, x in enumerate(self.members)]) \
            if self.members else np.zeros(0, np.int64)
        order = np.argsort(all_ids, kind="stable")
        self._ids, self._owner = all_ids[order], owner[order]

    def _at(self, label: int) -> int:
        """The index of the cluster labelled ``label`` (labels are given once the frame is tracked)."""
        return int(np.flatnonzero(self.labels == label)[0])

    def index_of(self, ids: np.ndarray) -> np.ndarray:
        """Index of the cluster holding each id in this frame (-1 if it is in none)."""
        if self._ids.size == 0:
            return np.full(len(ids), -1)
        j = np.minimum(np.searchsorted(self._ids, ids), self._ids.size - 1)
        return np.where(self._ids[j] == ids, self._owner[j], -1)

    def peak_of(self, label: int) -> int:
        """The id of the peak (the densest member) of the cluster labelled ``label``."""
        return int(self.members[self._at(label)][0])

    def mass_of(self, label: int) -> float:
        return float(self.mass[self._at(label)])

    def centre_of(self, label: int) -> float:
        return float(self.centre[self._at(label)])

    def separation(self, a: int, b: int) -> float:
        """Separation (module docstring) of the clusters labelled a and b in this frame: their peaks' distance."""
        return float(circular_distance(self.centre_of(a), self.centre_of(b)))
