"""Clusters, merges and metastable states of point sets (meanfield.analysis.longtime.events).

Synthetic histories with exact answers: two atoms approaching exponentially (their merge
time is known in closed form), atoms absorbed by a solver between frames, token groups
splitting, stray points.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from meanfield.analysis.longtime import LINK_DENSITY, group_points, point_set_history
from meanfield.analysis.longtime.events import local_density


def test_group_points_wraps_around_the_circle():
    angles = np.array([0.001, 2 * np.pi - 0.003, 3.0, 3.005, 0.006, 1.0])
    groups = [sorted(g.tolist()) for g in group_points(angles, 0.01)]
    assert sorted(groups) == [[0, 1, 4], [2, 3], [5]]
    assert [g.tolist() for g in group_points(np.linspace(0, 2 * np.pi, 50, endpoint=False), 0.2)] \
        == [list(range(50))]
    assert group_points(np.zeros(0), 0.1) == []


def test_local_density_and_peaks_on_the_circle():
    theta, masses = np.array([0.01, 2 * np.pi - 0.03, 3.0, 1.0]), np.array([1.0, 1.0, 2.0, 1.0])
    assert local_density(theta, masses) == pytest.approx([25.0, 25.0, 1.0, 1.0 / 0.99])  # gaps across 0
    assert local_density(np.array([1.0, 1.0]), np.ones(2)).tolist() == [np.finfo(float).max] * 2
    bump = np.pi + 0.001 + 0.05 * np.linspace(-1.0, 1.0, 41) ** 3  # densest at its middle token
    h = point_set_history([(0.0, bump, np.full(41, 1 / 41), np.arange(41))])
    assert h.centres[0] == pytest.approx([-np.pi + 0.001], abs=1e-5)  # the peak (a token), in (-pi, pi] as every table


def approaching(times, s0=1.0, masses=(0.3, 0.2), absorb_below=None):
    """Two atoms at distance s0 e^{-t} around 1.0 rad (mass-weighted centre fixed), a third at 4.0."""
    m1, m2 = masses
    for t in times:
        s = s0 * np.exp(-t)
        a1, a2 = 1.0 - s * m2 / (m1 + m2), 1.0 + s * m1 / (m1 + m2)
        if absorb_below is not None and s < absorb_below:
            yield t, np.array([1.0, 4.0]), np.array([m1 + m2, 0.5]), np.array([7, 9])
        else:
            yield t, np.array([a1, a2, 4.0]), np.array([m1, m2, 0.5]), np.array([7, 8, 9])


@pytest.mark.parametrize("delta", [1e-2, 1e-3])
def test_exponential_approach_merge_time_is_exact(delta):
    """s = e^{-t}: the separation reaches delta at t = log(1/delta), between coarse frames."""
    h = point_set_history(approaching(np.arange(0.0, 12.0, 0.7)), delta=delta)
    (merge,) = h.merges()
    assert merge.time == pytest.approx(np.log(1.0 / delta), rel=1e-12)
    assert merge.masses == pytest.approx((0.3, 0.2))
    labels, centres, masses = h.state_at(11.0)
    assert len(labels) == 2 and masses.sum() == pytest.approx(1.0)
    peak = 1.0 - 0.4 * np.exp(-h.times[h.frame_at(11.0)])  # the peak: atom 1 (the denser), not the centre of mass
    assert centres[np.argmin(np.abs(centres - 1.0))] == pytest.approx(peak, abs=1e-12)
    assert merge.kept == labels[np.argmin(np.abs(centres - 1.0))]  # the heavier cluster keeps its label


def test_atom_absorbed_between_frames():
    """The solver merged the atoms (below 1e-3) before the frame after the delta crossing."""
    times = np.array([0.0, 4.0, 8.0, 9.0])
    h = point_set_history(approaching(times, absorb_below=1e-3), delta=1e-2)
    (merge,) = h.merges()
    s0 = np.exp(-4.0)  # linear in s from s0 at t = 4 to 0 at t = 8
    assert merge.time == pytest.approx(4.0 + 4.0 * (s0 - 1e-2) / s0)
    assert h.counts.tolist() == [3, 3, 2, 2]


def test_states_and_metastable_times():
    """Three atoms merging twice: states 3 -> 2 -> 1 with durations between the merges."""
    def frames():
        for t in np.arange(0.0, 30.0, 0.5):
            s1, s2 = np.exp(-t), 2.0 * np.exp(-(t - 10.0)) if t > 10 else 2.0
            yield t, np.array([1.0, 1.0 + s1, 1.0 + s1 + s2]), np.array([0.5, 0.3, 0.2]), np.array([0, 1, 2])

    h = point_set_history(frames(), delta=1e-2)
    times = [e.time for e in h.merges()]
    # the second merge: atom 2 against the peak of atoms 0 and 1 (atom 0, the denser), e^{-t} farther than atom 1
    second = optimize.brentq(lambda t: 2.0 * np.exp(-(t - 10.0)) + np.exp(-t) - 1e-2, 10.0, 20.0)
    assert times == pytest.approx([np.log(100.0), second], rel=1e-9)
    states = h.states()
    assert [s.count for s in states] == [3, 2, 1]
    assert states[0].start == 0.0 and states[1].duration == pytest.approx(times[1] - times[0])
    assert states[-1].lower_bound and states[-1].duration == pytest.approx(29.5 - times[1])


def test_tokens_split_strays_and_formation():
    """A group of equal tokens splits in two (formation); a lone token between them is in a
    cluster's region, not in the cluster's members (its centre)."""
    n = 200
    ids = np.arange(n + 1)
    w = np.full(n + 1, 1.0 / (n + 1))

    def frames():
        for t in np.arange(0.0, 10.0, 1.0):
            half = np.linspace(0.0, 0.3, n // 2) * np.exp(-t)
            spread = 0.02 * t  # the two halves drift apart
            angles = np.concatenate([2.0 - spread - half[::-1], 2.0 + spread + half, [5.0]])
            yield t, angles, w, ids

    h = point_set_history(frames(), delta=0.05, link_density=0.0, min_mass=0.01)  # gaps alone
    assert [e.kind for e in h.events] == ["split"]
    assert h.events[0].time == 2.0  # gap 2 * 0.02 t first exceeds 0.05 at t = 2
    assert h.stray[-1] == pytest.approx(0.0, abs=1e-15)  # the lone token is in a region, as in a basin
    assert h.states()[0].start == 2.0 and h.states()[0].count == 2
    assert sorted(h.masses[-1]) == pytest.approx([n // 2 / (n + 1), (n // 2 + 1) / (n + 1)])


def test_links_need_the_cluster_threshold():
    """Tokens below the uniform density (the threshold of every cluster count) are not linked
    (no cluster), above it they are (one cluster around the circle); a bump 20x denser is a
    cluster, a light chain of tokens between two clusters does not bridge them (it is shared
    between their regions); the bumps of a
    perturbed uniform density are clusters from the start, as ``meanfield clusters`` counts them."""
    from meanfield.peaks import LEVEL
    from meanfield.spheres import S1

    assert LINK_DENSITY == LEVEL * S1.uniform_density
    n = 400
    uniform = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    for mass, count in ((0.9, 0), (1.1, 1)):  # 0.9 and 1.1 times the uniform density
        h = point_set_history([(0.0, uniform, np.full(n, mass / n), np.arange(n))], delta=0.05)
        assert h.counts.tolist() == [count] and h.stray[0] == pytest.approx(mass * (1 - count))
    bumps = np.concatenate([1.0 + np.linspace(0, 0.01, 50), 1.01 + np.linspace(0.004, 0.086, 49),  # chain
                            1.1 + np.linspace(0, 0.01, 50)])
    w = np.concatenate([np.full(50, 0.4 / 50), np.full(49, 0.01 / 49), np.full(50, 0.4 / 50)])
    h = point_set_history([(0.0, bumps, w, np.arange(149))], delta=0.05)
    assert h.counts.tolist() == [2] and h.masses[0].sum() == pytest.approx(0.81)  # the chain: 0.12 / rad
    assert h.centres[0] == pytest.approx([1.005, 1.105], abs=0.0051)  # peaks in the bumps, not on the chain
    atoms = np.array([1.0, 1.004, 1.008, 1.012, 1.0175])  # two atoms 0.0175 apart, light points between
    h = point_set_history([(0.0, atoms, np.array([0.5, 1e-4, 1e-4, 1e-4, 0.4]), np.arange(5))], delta=0.01)
    assert h.counts.tolist() == [2]
    h = point_set_history([(0.0, atoms[[0, 1, 2]], np.array([0.5, 1e-4, 0.4]), np.arange(3))], delta=0.01)
    assert h.counts.tolist() == [1] and h.masses[0][0] == pytest.approx(0.9001)  # the light point in its region
    # 1 + 0.05 cos 3 theta as 3000 quantile-like tokens: three bumps above the uniform density
    theta = np.linspace(-np.pi, np.pi, 3000, endpoint=False)
    density = (1 + 0.05 * np.cos(3 * theta)) / (2 * np.pi)
    h = point_set_history([(0.0, theta, density * 2 * np.pi / 3000, np.arange(3000))])
    assert h.counts.tolist() == [3]
    assert np.sort(h.centres[0]) == pytest.approx([-2 * np.pi / 3, 0.0, 2 * np.pi / 3], abs=1e-3)


def test_compare_pairs_merges_and_clusters():
    """A history with an extra early merge against one without: the late merges stay paired."""
    from meanfield.analysis.longtime import compare_histories

    h1 = point_set_history(approaching(np.arange(0.0, 12.0, 0.7)), delta=1e-2)
    h2 = point_set_history(approaching(np.arange(0.0, 12.0, 0.7), s0=1.1), delta=1e-2)
    c = compare_histories(h1, h2, 11.0)
    assert c.merges.shape == (1, 2) and c.merge_errors[0] == pytest.approx(np.log(110.0) / np.log(100.0) - 1)
    assert c.counts == (2, 2) and c.mass_error == pytest.approx(0.0, abs=1e-15)
