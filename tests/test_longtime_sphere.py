"""The S^2 long-time reference (:mod:`meanfield.references.lagrangian_sphere`) and the merge rule
(:mod:`meanfield.analysis.longtime.merges`) against exact answers.

* coalescence conserves mass and the mass-weighted centre and keeps the heaviest member's id;
* two tokens of mass 1/2 under softmax attention (Q = K = V = I) approach along their great
  circle by ``theta' = -2 sin(theta) / (1 + exp(beta (1 - cos theta)))`` (each sees the other
  with weight ``1 / (1 + e^{beta (1 - cos theta)})``); the tokens' separation follows this ODE
  (solved by scipy), the merge time found by :func:`point_merges` is the ODE's time of
  ``theta = delta``, and the two coalesce into one token of mass 1 at their midpoint;
* merges of heavy points only, of pairs once ``apart`` apart; a point that vanishes between
  frames (merged by a solver) is a merge at the interpolated time.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from meanfield.analysis.longtime.merges import DELTA, point_merges
from meanfield.config import load_config
from meanfield.problem import Problem
from meanfield.references.lagrangian_sphere import coalesce, coalescing_points

BETA = 4.0


def _two_token_layer():
    cfg = load_config({"mesh": {"sphere": "S2", "resolution": 1}, "model": {"attention": "softmax", "beta": BETA}})
    return Problem(cfg).schedule().layers[0]


def _theta_ode(theta0: float, times: np.ndarray) -> np.ndarray:
    def rhs(_t, y):
        return -2.0 * np.sin(y) / (1.0 + np.exp(BETA * (1.0 - np.cos(y))))

    return solve_ivp(rhs, (0.0, times[-1]), [theta0], t_eval=times, rtol=1e-12, atol=1e-14).y[0]


def test_coalesce_keeps_mass_centre_and_the_heaviest_id():
    rng = np.random.default_rng(0)
    base = np.array([0.0, 0.0, 1.0])
    close = base + 1e-10 * rng.normal(size=(3, 3))
    points = np.vstack([close, [[1.0, 0.0, 0.0]]])
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    masses = np.array([0.1, 0.3, 0.2, 0.4])
    ids = np.array([7, 8, 9, 10])
    x, m, k = coalesce(points, masses, ids, 1e-8)
    assert len(m) == 2 and abs(m.sum() - 1.0) < 1e-15
    centre = (masses[:3, None] * points[:3]).sum(axis=0)
    assert np.abs(x[0] - centre / np.linalg.norm(centre)).max() < 1e-15 and abs(m[0] - 0.6) < 1e-15
    assert list(k) == [8, 10] and np.array_equal(x[1], points[3])


def test_two_tokens_follow_the_exact_ode_merge_and_coalesce():
    theta0 = 1.2
    x0 = np.array([[1.0, 0.0, 0.0], [np.cos(theta0), np.sin(theta0), 0.0]])
    times = np.arange(0.0, 40.01, 0.5)
    frames = list(coalescing_points(_two_token_layer(), x0, np.array([0.5, 0.5]), times, dt=0.01,
                                    coalesce_distance=1e-9))
    exact = _theta_ode(theta0, times)
    two = [(f.t, f.points) for f in frames if len(f.masses) == 2]
    theta = np.array([2.0 * np.arcsin(np.linalg.norm(p[0] - p[1]) / 2.0) for _, p in two])
    assert len(two) > 10 and theta[-1] < 1e-6
    assert np.abs(theta / exact[: len(two)] - 1.0).max() < 1e-6
    # merge time: theta = DELTA, from the ODE (event) and from the frames
    event = solve_ivp(lambda _t, y: -2.0 * np.sin(y) / (1.0 + np.exp(BETA * (1.0 - np.cos(y)))), (0.0, 100.0),
                      [theta0], events=lambda _t, y: y[0] - DELTA, rtol=1e-12, atol=1e-14).t_events[0][0]
    merges = point_merges((f.t, f.points, f.masses, f.ids) for f in frames)
    assert len(merges) == 1 and merges[0].masses == (0.5, 0.5)
    assert abs(merges[0].time - event) < 1e-3 * event
    last = frames[-1]
    midpoint = (x0[0] + x0[1]) / np.linalg.norm(x0[0] + x0[1])
    assert len(last.masses) == 1 and abs(last.masses[0] - 1.0) < 1e-15
    assert np.abs(last.points[0] - midpoint).max() < 1e-8


def test_point_merges_counts_heavy_pairs_once_apart_and_vanished_points():
    def frame(t, angles, masses, ids):
        a = np.asarray(angles, float)
        return t, np.column_stack([np.cos(a), np.sin(a), np.zeros_like(a)]), np.asarray(masses, float), np.asarray(ids)

    frames = [
        frame(0.0, [0.0, 0.05, 1.0, 2.0], [0.3, 0.3, 0.005, 0.395], [0, 1, 2, 3]),  # 0, 1: close from the start
        frame(1.0, [0.0, 0.005, 0.5, 2.0], [0.3, 0.3, 0.005, 0.395], [0, 1, 2, 3]),  # light 2 near 0: no cluster
        frame(2.0, [0.0, 0.001, 0.0049, 0.05], [0.3, 0.3, 0.005, 0.395], [0, 1, 2, 3]),
        frame(3.0, [0.0, 0.0], [0.6, 0.4], [0, 1]),  # 3 merged by the solver between frames 2 and 3
    ]
    merges = point_merges(frames, apart=0.1)
    assert len(merges) == 1 and merges[0].masses in ((0.3, 0.395), (0.395, 0.3))
    assert 2.0 < merges[0].time < 3.0
    assert abs(merges[0].time - (2.0 + (0.049 - DELTA) / 0.049)) < 1e-12  # with 1, the nearer
    # a point gone while the nearest heavy point was still >= apart away joined a group that was
    # not heavy yet: no merge
    far = frames[:2] + [frame(2.0, [0.0, 0.001, 0.0049, 0.5], [0.3, 0.3, 0.005, 0.395], [0, 1, 2, 3]), frames[3]]
    assert point_merges(far, apart=0.1) == []
